"""Separate hosts on one machine: a network namespace each, cabled to a switch.

The switch is a bridge in a namespace of its own; each host is a namespace with one veth
pair, `eth0` on the host's side (an address of the lab's private /24) and a port on the
switch's. Nothing is added to the machine's own namespace, so two labs at once (two test
runs) cannot collide, even on the same /24. Each host's programs run under a host name of
their own (a UTS namespace, `unshare --uts`), so that `socket.gethostname()` tells them
apart as it would on real machines.

A host is cut off by taking its switch port down (a pulled cable: packets go nowhere and
nothing tells the host) and back by bringing it up.

Every name carries the lab's `tag` (`kl<pid>x<random>`): `sweep_stale` removes what a run
killed before its finalizers left behind.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PREFIX = "kl"
_STALE = re.compile(rf"^{PREFIX}(\d+)x[0-9a-f]+-")


def ip(*arguments: str) -> None:
    subprocess.run(["ip", *arguments], check=True, capture_output=True, text=True, timeout=30)


def namespaces() -> list[str]:
    listed = subprocess.run(
        ["ip", "netns", "list"], check=True, capture_output=True, text=True, timeout=30
    ).stdout
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def sweep_stale() -> None:
    """Delete the namespaces of labs whose test process is gone."""
    for name in namespaces():
        found = _STALE.match(name)
        if found and not Path(f"/proc/{found.group(1)}").exists():
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


@dataclass
class Host:
    """One machine of the lab: its namespace, address, host name and home directory."""

    name: str  # the host name its programs see
    netns: str
    address: str
    home: Path
    switch_netns: str
    port: str  # its cable's end on the switch

    def argv(self, command: Sequence[str]) -> list[str]:
        """`command` as run on this host. Every step execs the next, so a process started
        with it has the pid of `command` itself (to signal it)."""
        return [
            "ip",
            "netns",
            "exec",
            self.netns,
            "unshare",
            "--uts",
            "sh",
            "-c",
            'hostname "$0" && exec "$@"',
            self.name,
            *command,
        ]

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of this host's programs: its own HOME, nothing of the caller's
        kairo settings."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAIRO_")}
        return {**env, "HOME": str(self.home), **extra}

    def run(
        self, command: Sequence[str], *, timeout: float = 60, **kwargs: Any
    ) -> subprocess.CompletedProcess[str]:
        kwargs.setdefault("env", self.env())
        kwargs.setdefault("cwd", self.home)
        return subprocess.run(
            self.argv(command), capture_output=True, text=True, timeout=timeout, **kwargs
        )

    def popen(self, command: Sequence[str], **kwargs: Any) -> subprocess.Popen[str]:
        kwargs.setdefault("env", self.env())
        kwargs.setdefault("cwd", self.home)
        return subprocess.Popen(self.argv(command), text=True, **kwargs)

    def cut(self) -> None:
        ip("-n", self.switch_netns, "link", "set", self.port, "down")

    def reconnect(self) -> None:
        ip("-n", self.switch_netns, "link", "set", self.port, "up")


@dataclass
class Network:
    """The switch and the hosts cabled to it (`start`, `add_host`); `remove` takes all of
    it down."""

    root: Path  # the hosts' home directories are made here
    tag: str = field(default_factory=lambda: f"{PREFIX}{os.getpid()}x{secrets.token_hex(3)}")
    hosts: dict[str, Host] = field(default_factory=dict)
    made: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # A /24 of 10.231.0.0/16 of its own (namespaces keep labs apart anyway).
        self.subnet = f"10.231.{secrets.randbelow(254) + 1}"
        self.switch = f"{self.tag}-switch"

    def start(self) -> None:
        """Make the switch; `remove` undoes whatever part of it was made."""
        self._namespace("switch")
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")

    def _namespace(self, role: str) -> str:
        name = f"{self.tag}-{role}"
        ip("netns", "add", name)
        self.made.append(name)
        ip("-n", name, "link", "set", "lo", "up")
        return name

    def add_host(self, name: str) -> Host:
        number = len(self.hosts) + 1
        netns = self._namespace(name)
        port = f"p{number}"
        ip(
            "-n",
            self.switch,
            "link",
            "add",
            port,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            netns,
        )
        ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
        address = f"{self.subnet}.{number}"
        ip("-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
        ip("-n", netns, "link", "set", "eth0", "up")
        home = self.root / name
        home.mkdir(parents=True)
        host = Host(name, netns, address, home, self.switch, port)
        self.hosts[name] = host
        return host

    @property
    def cidr(self) -> str:
        return f"{self.subnet}.0/24"

    def remove(self) -> None:
        """Delete every namespace (their veth pairs go with them) and the homes."""
        for name in reversed(self.made):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        self.made.clear()
        shutil.rmtree(self.root, ignore_errors=True)
