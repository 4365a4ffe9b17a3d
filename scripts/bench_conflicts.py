"""bench.py's conflict_map_32: `kairo-orch conflicts`' map of 32 branches.

The generated repository (2,000 files) with 32 branches off main, each changing three
files of its own; one pair in ten (50 of the 496) also changes a file of that pair's own,
half of them so that the two conflict (the same line, two ways) and half so that they
merge clean (its first line and its last). What is timed is git/conflict_map.py's
`conflict_map` of the 32 heads, as `kairo-orch conflicts` calls it (a `diff-tree` a branch,
then `merge-tree` of the pairs whose paths intersect); the baseline, in the same run, is
`merge-tree --write-tree` of every one of the 496 pairs, one after another, as one would
without the path filter. Both must find the same conflicting pairs.

bench.py runs it (`--only conflict_map_32`); `--tiny` makes it of 2 branches that share
one file.
"""

from __future__ import annotations

import itertools
import random
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: One pair in ten shares a file.
SHARING = 0.1
OWN_FILES = 3


def _module(i: int, files: int) -> str:
    i %= files
    return f"src/pkg{i // 100:02d}/mod{i:04d}.py"


def _edit(path: Path, how: str, tag: str) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if how == "first":
        lines[0] = f'"""Changed by {tag}."""\n'
    elif how == "last":
        lines.append(f"\n\ndef added_by_{tag}():\n    return 1\n")
    else:  # "same": the one line every conflicting editor of the file changes, its own way
        lines[3] = f"def changed_by_{tag}(x):\n"
    path.write_text("".join(lines), encoding="utf-8")


def make_branches(lab: Any, template: Path, files: int, branches: int) -> tuple[Path, list[str]]:
    """A copy of `template` with `branches` branches off main; their head commits."""
    repo: Path = lab.copy_of(template, "conflicts-template")
    names = [f"b{j:02d}" for j in range(branches)]
    pairs = list(itertools.combinations(range(branches), 2))
    shared = random.Random(32).sample(pairs, max(1, round(len(pairs) * SHARING)))
    edits: dict[int, list[tuple[str, str]]] = {j: [] for j in range(branches)}
    spare = branches * OWN_FILES  # the shared files come after every branch's own
    for n, (a, b) in enumerate(shared):
        path = _module(spare + n, files)
        conflicting = n % 2 == 0
        edits[a].append((path, "same" if conflicting else "first"))
        edits[b].append((path, "same" if conflicting else "last"))
    heads = []
    for j, name in enumerate(names):
        lab.git(repo, "checkout", "-q", "-b", name, "main")
        own = [(_module(j * OWN_FILES + k, files), "last") for k in range(OWN_FILES)]
        for path, how in own + edits[j]:
            _edit(repo / path, how, name)
        lab.git(repo, "commit", "-q", "-am", f"{name}: its changes")
        heads.append(lab.git(repo, "rev-parse", "HEAD").strip())
    lab.git(repo, "checkout", "-q", "main")
    lab.git(repo, "repack", "-adq")
    return repo, heads


def conflict_map_pair(
    lab: Any, files: int, branches: int
) -> Callable[[bool], tuple[float, float | None]]:
    """One run of the map and of its baseline (the baseline first when asked), for
    bench.py's `repeat`; each checks that the other found the same conflicting pairs."""
    import trio

    from orchestrator.git.conflict_map import BranchToMap, conflict_map
    from orchestrator.git.repo import discover_repo

    repo, heads = make_branches(lab, lab.template(files), files, branches)
    discover_repo(repo)  # the repository the user names, as `conflicts` finds it
    main = lab.git(repo, "rev-parse", "main").strip()
    wanted = [BranchToMap(f"b{j:02d}", "succeeded", main, head) for j, head in enumerate(heads)]
    found: dict[str, set[tuple[int, int]]] = {}

    def mapped() -> float:
        t0 = time.perf_counter()
        result = trio.run(conflict_map, repo, wanted)
        elapsed = time.perf_counter() - t0
        index = {branch.subtask_id: j for j, branch in enumerate(wanted)}
        found["map"] = {(index[p.first], index[p.second]) for p in result.conflicting}
        return elapsed

    def every_pair() -> float:
        conflicting = set()
        t0 = time.perf_counter()
        for a, b in itertools.combinations(range(len(heads)), 2):
            done = subprocess.run(
                ["git", "merge-tree", "--write-tree", "-z", "--messages", heads[a], heads[b]],
                cwd=repo, capture_output=True, check=False,
            )  # fmt: skip
            if done.returncode == 1:
                conflicting.add((a, b))
        elapsed = time.perf_counter() - t0
        found["every"] = conflicting
        return elapsed

    def run(baseline_first: bool) -> tuple[float, float | None]:
        if baseline_first:
            theirs = every_pair()
            ours = mapped()
        else:
            ours = mapped()
            theirs = every_pair()
        assert found["map"] == found["every"], (found["map"], found["every"])
        assert found["map"], "no pair conflicts: the branches were not made as meant"
        return ours, theirs

    return run
