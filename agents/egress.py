"""The agent's way out of a sandbox without a network: to its model endpoint and nowhere else.

    python -I -S agents/egress.py --socket PATH --proxy PORT [--allow HOST:PORT]...
        [--forward PORT=HOST:PORT]... [--reverse PORT=URL] [--hold NAME]... -- bwrap ...

Runs outside the sandbox, in front of bubblewrap, in the attempt's process group. It binds
the unix socket PATH (its directory is bound read-only into the sandbox, where
agents/forwarder.py listens on 127.0.0.1 and relays each connection over it, prefixed with
the port it came to), then forks: the parent becomes bubblewrap (`exec`: its status and
signals are the agent's, as if egress were not there), the child serves the socket and is
killed the moment that parent ends. What a connection may do depends on the in-sandbox port
it came to:

    --proxy PORT          an HTTP CONNECT proxy (the agent's HTTPS_PROXY) that opens a
                          tunnel to an `--allow`ed HOST:PORT, exactly (another port of an
                          allowed host is another service), and answers anything else with
                          403 and a line saying what is allowed. It follows nothing: what
                          comes through a tunnel goes to its host, never read as a request
                          of the proxy's, and a redirect is the agent's to ask for again.
    --forward PORT=H:P    a plain relay to H:P (a model server on the host's loopback, whose
                          URL the agent holds unchanged).
    --reverse PORT=URL    the plan's endpoint, reached over http on 127.0.0.1:PORT: each
                          connection carries one request (Connection: close), the stand-in
                          key in its key headers replaced by the real one and its Host made
                          URL's, sent to URL's origin (TLS for https, the certificate
                          checked).

`--hold NAME`: the variable NAME of our environment is the endpoint's key. The agent gets
KEY_STAND_IN in it instead, and the reverse proxy puts the key back into the request headers
that carry the stand-in (`x-api-key`, `Authorization: Bearer`, whichever the program
sends): the agent never holds the key, nor does any process inside the sandbox.

A connection that has not sent its request within HEAD_SECONDS (all of it: a client
sending a byte at a time is no exception), or whose tunnel moves no byte for
IDLE_SECONDS, is closed; at most MAX_CONNECTIONS are served at once. Standard library only,
like agents/runner.py: it starts once per attempt, in front of the agent.
"""

# pathlib would be a visible part of egress's startup, as of the runner's; contextlib
# likewise (collections, functools); a try/except-pass is free:
# ruff: noqa: PTH103, PTH108, PTH119, PTH120, SIM105

from __future__ import annotations

import os
import selectors
import socket
import sys
import threading
import time

KEY_STAND_IN = "kairo-egress-stand-in-key"
#: The headers a model API takes its key in: Anthropic's, OpenAI's (and every compatible
#: gateway's), Azure's, Google's.
KEY_HEADERS = (b"x-api-key", b"authorization", b"api-key", b"x-goog-api-key")
HEAD_SECONDS = 30.0
CONNECT_SECONDS = 30.0
IDLE_SECONDS = 600.0  # a model's stream may pause, not for ten minutes
MAX_HEAD = 16384
MAX_CONNECTIONS = 64
PARENT_POLL_SECONDS = 0.5
PR_SET_PDEATHSIG, SIGKILL = 1, 9  # <linux/prctl.h>, <signal.h>
CHUNK = 65536


def split_host_port(target: str) -> tuple[str, int] | None:
    """`host:port` or `[v6]:port` -> (host lowercased, without a trailing dot; port), or
    None when it is not one."""
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        return None
    number = int(port)
    if not 0 < number < 65536:
        return None
    host = host.lower().rstrip(".")
    return (host, number) if host else None


def allowed(target: str, allow: list[str]) -> bool:
    """Whether a CONNECT to `target` may open: its host and its port both those of an
    allowed entry (an allowed host on another port is not allowed)."""
    wanted = split_host_port(target)
    return wanted is not None and any(wanted == split_host_port(entry) for entry in allow)


def request_line(head: bytes) -> tuple[str, str, str] | None:
    """The method, target and version of a request head, or None when it is not one."""
    first = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = first.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    return parts[0], parts[1], parts[2]


def _shown(text: str) -> str:
    """What the agent sent, fit for a line of the pane: printable, and not too long."""
    return "".join(c if c.isprintable() else "?" for c in text[:200])


def refusal(status: str, line: str) -> bytes:
    body = (line + "\n").encode()
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body


def rewrite_head(head: bytes, host: str, key: str | None) -> bytes | None:
    """A request head for the reverse proxy's upstream: Host made `host`, one request per
    connection, and the stand-in key replaced by `key` in the headers that carry a key
    (never another, which the endpoint might echo back; never the body). None for a head
    with a line break that is not CRLF, which a server might read as a header of its own."""
    if b"\n" in head.replace(b"\r\n", b"") or b"\r" in head.replace(b"\r\n", b""):
        return None
    lines = head.split(b"\r\n")
    kept = [lines[0]]
    for line in lines[1:]:
        name = line.split(b":", 1)[0].strip().lower()
        if not line or name in (b"host", b"connection", b"proxy-connection", b"keep-alive"):
            continue
        if key is not None and name in KEY_HEADERS:
            line = line.replace(KEY_STAND_IN.encode(), key.encode())
        kept.append(line)
    kept += [b"Host: " + host.encode(), b"Connection: close"]
    return b"\r\n".join(kept) + b"\r\n\r\n"


class Egress:
    """The services of one sandbox, by the in-sandbox port a connection came to."""

    def __init__(
        self,
        proxy: int,
        allow: list[str],
        forwards: dict[int, tuple[str, int]],
        reverse: dict[int, str],
        key: str | None,
    ) -> None:
        self.proxy = proxy
        self.allow = allow
        self.forwards = forwards
        self.reverse = reverse
        self.key = key
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.refused: set[str] = set()

    def serve(self, listener: socket.socket, parent: int) -> None:
        """Accept until `parent` (bubblewrap) is gone."""
        listener.settimeout(PARENT_POLL_SECONDS)
        while os.getppid() == parent:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if listener.fileno() < 0:
                    return  # closed: nothing more to serve
                continue
            if not self.slots.acquire(blocking=False):
                client.close()
                continue
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        try:
            deadline = time.monotonic() + HEAD_SECONDS  # for the whole head, however sent
            port_line, rest = _read_line(client, deadline)
            if not port_line.isdigit():
                return
            port = int(port_line)
            if port == self.proxy:
                self._connect(client, rest, deadline)
            elif port in self.forwards:
                upstream = socket.create_connection(self.forwards[port], CONNECT_SECONDS)
                relay(client, upstream, rest)
            elif port in self.reverse:
                self._reverse(client, self.reverse[port], rest, deadline)
        except (OSError, ValueError):
            pass
        finally:
            client.close()
            self.slots.release()

    def _connect(self, client: socket.socket, buffered: bytes, deadline: float) -> None:
        head, rest = _read_head(client, buffered, deadline)
        parsed = request_line(head)
        if parsed is None:
            client.sendall(refusal("400 Bad Request", "kairo egress: not an HTTP request"))
            return
        method, target = (_shown(part) for part in parsed[:2])
        only = ", ".join(self.allow) or "nothing"
        if method != "CONNECT":
            line = f"kairo egress: only CONNECT (https) to the model endpoint ({only})"
            client.sendall(refusal("403 Forbidden", line))
            self._log(f"refused {method} {target}: {line}")
            return
        if not allowed(target, self.allow):
            line = f"kairo egress: {target} is not the model endpoint; allowed: {only}"
            client.sendall(refusal("403 Forbidden", line))
            self._log(line)
            return
        address = split_host_port(target)
        assert address is not None
        try:
            upstream = socket.create_connection(address, CONNECT_SECONDS)
        except OSError as exc:
            client.sendall(refusal("502 Bad Gateway", f"kairo egress: {target}: {exc}"))
            return
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        relay(client, upstream, rest)

    def _reverse(self, client: socket.socket, url: str, buffered: bytes, deadline: float) -> None:
        head, rest = _read_head(client, buffered, deadline)
        if request_line(head) is None:
            client.sendall(refusal("400 Bad Request", "kairo egress: not an HTTP request"))
            return
        scheme, _, authority = url.partition("://")
        authority = authority.split("/", 1)[0]
        address = split_host_port(authority) or (authority, 443 if scheme == "https" else 80)
        rewritten = rewrite_head(head, authority, self.key)
        if rewritten is None:
            client.sendall(refusal("400 Bad Request", "kairo egress: a line break not CRLF"))
            return
        try:
            upstream = socket.create_connection(address, CONNECT_SECONDS)
        except OSError as exc:
            client.sendall(refusal("502 Bad Gateway", f"kairo egress: {authority}: {exc}"))
            return
        if scheme == "https":
            import ssl  # only here: it costs startup time, and most plans have no key to add

            upstream = ssl.create_default_context().wrap_socket(
                upstream, server_hostname=address[0]
            )
        upstream.sendall(rewritten)
        relay(client, upstream, rest)

    def _log(self, line: str) -> None:
        if line not in self.refused:  # once each: a client that retries must not flood
            self.refused.add(line)
            try:
                os.write(2, (line + "\n").encode())
            except OSError:
                pass


def _receive(client: socket.socket, size: int, deadline: float) -> bytes:
    """At most `size` bytes, TimeoutError past `deadline`."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("no request in time")
    client.settimeout(left)
    return client.recv(size)


def _read_line(client: socket.socket, deadline: float) -> tuple[str, bytes]:
    data = b""
    while b"\n" not in data:
        chunk = _receive(client, 256, deadline)
        if not chunk or len(data) > 16:
            raise ValueError("no port line")
        data += chunk
    line, rest = data.split(b"\n", 1)
    return line.decode("ascii", "replace").strip(), rest


def _read_head(client: socket.socket, data: bytes, deadline: float) -> tuple[bytes, bytes]:
    """The request head (without its blank line) and what came after it."""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD:
            raise ValueError("request head too long")
        chunk = _receive(client, 4096, deadline)
        if not chunk:
            raise ValueError("closed before its request")
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    return head, rest


def relay(a: socket.socket, b: socket.socket, first: bytes) -> None:
    """Copy bytes both ways until both sides are done, or none moved for IDLE_SECONDS;
    `b` closed then (the forwarder inside relays through this too)."""
    try:
        if first:
            b.sendall(first)
        a.setblocking(True)
        b.setblocking(True)
        peers = {a: b, b: a}
        open_ends = {a, b}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            while open_ends:
                ready = selector.select(IDLE_SECONDS)
                if not ready:
                    return
                for key, _ in ready:
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    data = source.recv(CHUNK)
                    # TLS may hold decrypted bytes the socket no longer signals.
                    while data and getattr(source, "pending", lambda: 0)():
                        data += source.recv(CHUNK)
                    if data:
                        peers[source].sendall(data)
                        continue
                    selector.unregister(source)
                    open_ends.discard(source)
                    if not hasattr(peers[source], "pending"):  # never half-close TLS
                        try:
                            peers[source].shutdown(socket.SHUT_WR)
                        except OSError:
                            pass
    except OSError:
        pass
    finally:
        b.close()


def parse(argv: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """`--name value ... -- command...` -> ({name: [values]}, command)."""
    if "--" not in argv:
        raise ValueError("usage: egress.py --socket PATH --proxy PORT [OPTIONS] -- COMMAND...")
    cut = argv.index("--")
    options, command = argv[:cut], argv[cut + 1 :]
    if len(options) % 2 or not all(name.startswith("--") for name in options[::2]):
        raise ValueError(f"options come in pairs, --name value: {options}")
    if not command:
        raise ValueError("no program given after --")
    found: dict[str, list[str]] = {}
    for name, value in zip(options[::2], options[1::2], strict=True):
        found.setdefault(name[2:], []).append(value)
    return found, command


def build(options: dict[str, list[str]], env: dict[str, str]) -> Egress:
    """The Egress the options describe; the held variables of `env` replaced by the stand-in."""
    forwards: dict[int, tuple[str, int]] = {}
    for entry in options.get("forward", []):
        port, _, target = entry.partition("=")
        address = split_host_port(target)
        if not port.isdigit() or address is None:
            raise ValueError(f"--forward wants PORT=HOST:PORT, not {entry!r}")
        forwards[int(port)] = address
    reverse: dict[int, str] = {}
    for entry in options.get("reverse", []):
        port, _, url = entry.partition("=")
        if not port.isdigit() or not url.startswith(("http://", "https://")):
            raise ValueError(f"--reverse wants PORT=URL, not {entry!r}")
        reverse[int(port)] = url
    key = None
    for name in options.get("hold", []):
        key = env.get(name) or key
        env[name] = KEY_STAND_IN
    allow = options.get("allow", [])
    for entry in allow:
        if split_host_port(entry) is None:
            raise ValueError(f"--allow wants HOST:PORT, not {entry!r}")
    (proxy,) = options.get("proxy", ["0"])
    return Egress(int(proxy), allow, forwards, reverse, key)


def socket_path(path: str) -> str:
    """`path`, or one to the same socket short enough for a socket address (108 bytes,
    which a run directory deep in a repository passes): through a descriptor of its
    directory, kept open for the life of the process."""
    if len(os.fsencode(path)) < 100:
        return path
    directory = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY)
    return f"/proc/self/fd/{directory}/{os.path.basename(path)}"


def _listen(path: str) -> socket.socket:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    try:
        os.unlink(path)  # an earlier run's socket of the same attempt; a link is not followed
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path(path))
    listener.listen(MAX_CONNECTIONS)
    return listener


def die_with(parent: int) -> None:
    """Be killed the moment `parent` ends (a server holds the agent's stderr, which whoever
    reads it waits on): PR_SET_PDEATHSIG where ctypes can set it, else the servers' poll.
    Called after the fork, where ctypes costs the agent's startup nothing."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, SIGKILL)
    except (ImportError, OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it ended before that was set
        os._exit(0)


def main(argv: list[str] | None = None) -> int:
    try:
        options, command = parse(sys.argv[1:] if argv is None else argv)
        (path,) = options["socket"]
        env = dict(os.environ)
        egress = build(options, env)
        listener = _listen(path)
    except (ValueError, KeyError, OSError) as exc:
        print(f"kairo egress: {exc}", file=sys.stderr)
        return 2
    parent = os.getpid()
    if os.fork() == 0:
        # The server: no copy of the agent's output pipe kept open, and gone with bubblewrap.
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        try:
            die_with(parent)
            egress.serve(listener, parent)
        finally:
            os._exit(0)
    listener.close()
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        print(f"kairo egress: cannot start {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 127 if isinstance(exc, FileNotFoundError) else 126


if __name__ == "__main__":
    sys.exit(main())
