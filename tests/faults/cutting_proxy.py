"""A TCP proxy that cuts a connection where a test says: a network failing at the worst
moment, between a real client and a real server.

`cut(marker)` ends the next connection whose client sends `marker`: the
bytes holding it reach the server, whose answer never comes back (a COMMIT that landed
but whose answer was lost); with `deliver=False` they never reach it (a COMMIT lost on
the way). Every connection made after the cut passes as before.
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import suppress

#: How long a delivered chunk is given to be acted on before the connection is cut.
SETTLE_S = 0.3


class CuttingProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self._target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._marker: bytes | None = None
        self._deliver = True
        self._lock = threading.Lock()
        self.cuts = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self, marker: bytes, *, deliver: bool = True) -> None:
        with self._lock:
            self._marker, self._deliver = marker, deliver

    def close(self) -> None:
        """Refuse new connections from now on (the accepted ones go on)."""
        self._closed = True
        with suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept(), which close() would not
        with suppress(OSError):
            self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._target)
            link = _Link(client, server)
            threading.Thread(target=self._upstream, args=(link,), daemon=True).start()
            threading.Thread(target=link.downstream, daemon=True).start()

    def _upstream(self, link: _Link) -> None:
        while True:
            chunk = _receive(link.client)
            if not chunk:
                link.close()
                return
            with self._lock:
                hit = self._marker is not None and self._marker in chunk
                deliver = self._deliver
                if hit:
                    self._marker = None
                    self.cuts += 1
            if hit:
                link.answers = False
                if deliver:
                    link.server.sendall(chunk)
                    time.sleep(SETTLE_S)
                link.close()
                return
            try:
                link.server.sendall(chunk)
            except OSError:
                link.close()
                return


class _Link:
    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.answers = True

    def downstream(self) -> None:
        while True:
            chunk = _receive(self.server)
            if not chunk or not self.answers:
                self.close()
                return
            try:
                self.client.sendall(chunk)
            except OSError:
                self.close()
                return

    def close(self) -> None:
        for end in (self.client, self.server):
            with suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            with suppress(OSError):
                end.close()


def _receive(end: socket.socket) -> bytes:
    try:
        return end.recv(65536)
    except OSError:
        return b""
