"""Holding an attempt's processes (agents/containment.py): finding the cgroup v2 hierarchy,
and ending all of a cgroup, or all below a subreaper, with real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.containment import Cgroup, cgroup2_root, cgroups_named, end_cgroup, own_cgroup

HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
UNIFIED = "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
ESCAPED = "40 23 0:40 /user.slice /mnt/c\\040g rw - cgroup2 cgroup2 rw\n"


def test_the_cgroup2_mount_is_found_on_hybrid_unified_and_escaped_mountinfo() -> None:
    assert cgroup2_root(HYBRID) == ("/sys/fs/cgroup/unified", "/")
    assert cgroup2_root(UNIFIED) == ("/sys/fs/cgroup", "/")  # optional fields before "-"
    assert cgroup2_root(ESCAPED) == ("/mnt/c g", "/user.slice")
    assert cgroup2_root(HYBRID.replace("cgroup2", "tmpfs")) is None  # a v1 machine


def test_cgroups_are_found_by_name_and_not_looked_into(tmp_path: Path) -> None:
    (tmp_path / "a" / "kairo-x.1" / "kairo-x.nested").mkdir(parents=True)
    (tmp_path / "b" / "kairo-y.2").mkdir(parents=True)
    (tmp_path / "b" / "other").mkdir()

    found = cgroups_named(str(tmp_path), "kairo-")

    assert sorted(found) == [str(tmp_path / "a" / "kairo-x.1"), str(tmp_path / "b" / "kairo-y.2")]


def _writable_cgroup() -> str:
    own = own_cgroup()
    if own is None or not (os.access(own, os.W_OK) and os.access(f"{own}/cgroup.procs", os.W_OK)):
        pytest.skip("no cgroup v2 this user may write here")
    return own


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_cgroup_ends_all_in_it_those_that_left_their_session_and_ignore_sigterm_too(
    tmp_path: Path,
) -> None:
    cgroup = Cgroup.make(_writable_cgroup(), f"kairo-test.{os.getpid()}")
    script = (
        'echo 0 > "$0"; '  # into the cgroup, then: a session of its own, deaf to SIGTERM
        "(setsid sh -c 'trap \"\" TERM; echo $$ > left.pid; while :; do sleep 0.1; done' &)"
    )
    subprocess.run(["/bin/sh", "-c", script, f"{cgroup.path}/cgroup.procs"], cwd=tmp_path)
    while not (tmp_path / "left.pid").exists():
        time.sleep(0.01)
    left = int((tmp_path / "left.pid").read_text())
    assert _alive(left) and cgroup.populated() and left in cgroup.pids()

    assert end_cgroup(cgroup.path)

    assert not _alive(left) and not Path(cgroup.path).exists()


SUBREAPER = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from agents.containment import Subreaper, become_subreaper, descendants
assert become_subreaper()
reaper = Subreaper()
child = os.fork()
if child == 0:  # forks a daemon and exits: the daemon is an orphan
    if os.fork() == 0:
        os.setsid()
        os.execv("/bin/sleep", ["sleep", "60"])
    os._exit(0)
os.waitpid(child, 0)
time.sleep(0.2)
orphans = list(descendants(os.getpid()))
assert len(orphans) == 1 and reaper.populated(agent=0), orphans
print(orphans[0], flush=True)
assert reaper.end(agent=0)
assert not reaper.populated(agent=0) and list(descendants(os.getpid())) == []
"""


def test_a_subreaper_finds_an_orphan_that_left_its_session_and_ends_it() -> None:
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", SUBREAPER, root], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert not _alive(int(done.stdout))
