"""Inside the sandbox: the agent's 127.0.0.1 ports that lead to agents/egress.py outside.

    python -I -S agents/forwarder.py --socket PATH [--listen PORT]... -- AGENT ARGS...

Listens on 127.0.0.1:PORT (and [::1]:PORT where it can: `localhost` may be either) for
each `--listen`, then forks: the parent becomes the agent (`exec`: its pid, status and
signals are the agent's own), the child relays every connection over the unix socket PATH,
to egress, after a first line naming the port it came to, until the agent is gone. The
sandbox has no network but its own loopback; egress decides what each port reaches.
Standard library only, like agents/runner.py: it starts once per attempt, in front of the
agent.
"""

# pathlib and contextlib would be a visible part of the forwarder's startup, as of the
# runner's; os.path and a try/except-pass are free:
# ruff: noqa: PTH100, PTH120

from __future__ import annotations

import os
import selectors
import socket
import sys
import threading

if __package__ in (None, ""):  # run by path, as the stream filters are
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from agents.egress import relay, socket_path

PARENT_POLL_SECONDS = 0.5


def _listeners(ports: list[int]) -> list[tuple[socket.socket, int]]:
    found = []
    for port in ports:
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            listener = socket.socket(family, socket.SOCK_STREAM)
            try:
                listener.bind((host, port))
            except OSError:
                listener.close()
                if family == socket.AF_INET:
                    raise
                continue  # no IPv6 loopback: 127.0.0.1 alone
            listener.listen(64)
            found.append((listener, port))
    return found


def _relay(client: socket.socket, path: str, port: int) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
        upstream.sendall(f"{port}\n".encode())
        relay(client, upstream, b"")  # closes upstream
    except OSError:
        upstream.close()
    finally:
        client.close()


def serve(listeners: list[tuple[socket.socket, int]], path: str, parent: int) -> None:
    """Relay every connection until `parent` (the agent) is gone."""
    ports = {listener: port for listener, port in listeners}
    with selectors.DefaultSelector() as selector:
        for listener in ports:
            selector.register(listener, selectors.EVENT_READ)
        while os.getppid() == parent:
            for key, _ in selector.select(PARENT_POLL_SECONDS):
                listener: socket.socket = key.fileobj  # type: ignore[no-redef]
                try:
                    client, _ = listener.accept()
                except OSError:
                    continue
                args = (client, path, ports[listener])
                threading.Thread(target=_relay, args=args, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        cut = args.index("--")
        options, command = args[:cut], args[cut + 1 :]
        pairs = list(zip(options[::2], options[1::2], strict=True))
        paths = [value for name, value in pairs if name == "--socket"]
        ports = [int(value) for name, value in pairs if name == "--listen"]
        usable = len(paths) == 1 and command and len(pairs) == len(ports) + 1
        listeners = _listeners(ports) if usable else None
        path = socket_path(paths[0]) if usable else ""
    except (ValueError, OSError) as exc:
        print(f"kairo forwarder: {exc}", file=sys.stderr)
        return 2
    if listeners is None:
        print("usage: forwarder.py --socket PATH [--listen PORT]... -- COMMAND...", file=sys.stderr)
        return 2
    parent = os.getpid()
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):
            os.dup2(null, fd)
        try:
            # Killed with the sandbox's process namespace when the agent ends; the poll of
            # `serve` besides. Nothing here costs the agent's startup a millisecond more.
            serve(listeners, path, parent)
        finally:
            os._exit(0)
    for listener, _ in listeners:
        listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"kairo forwarder: cannot start {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 127 if isinstance(exc, FileNotFoundError) else 126


if __name__ == "__main__":
    sys.exit(main())
