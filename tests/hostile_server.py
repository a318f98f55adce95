"""A loopback HTTP server that misbehaves on purpose, for the HTTP-limit tests and bench.

Modes (every request gets the same treatment):

* ``drip-body``: a 200 with its headers at once, then the body one byte every ``interval_s``;
* ``drip-headers``: the status line, then the headers one byte every ``interval_s``;
* ``huge``: ``size`` bytes of a generated JSON-looking body as fast as the client reads, with or
  without a Content-Length; nothing is stored (one 1 MiB block is sent again and again).

Raw sockets, one daemon thread per connection: http.server would buffer and frame for us.
``sent`` counts the body bytes that left, ``requests`` the requests that arrived.
"""

from __future__ import annotations

import socket
import sys
import threading
from typing import Literal

Mode = Literal["drip-body", "drip-headers", "huge"]
_BLOCK = 1 << 20


class HostileServer:
    def __init__(self, mode: Mode, *, interval_s: float = 0.2, size: int = 600 << 20,
                 content_length: bool = False) -> None:
        self.mode = mode
        self.interval_s = interval_s
        self.size = size
        self.content_length = content_length
        self.sent = 0
        self.requests = 0
        self.got_request = threading.Event()
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                self._read_request(conn)
                self.requests += 1
                self.got_request.set()
                if self.mode == "huge":
                    self._huge(conn)
                else:
                    self._drip(conn)
            except OSError:
                pass  # the client hung up: what these tests expect it to do

    @staticmethod
    def _read_request(conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                raise ConnectionResetError
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                raise ConnectionResetError
            body += chunk

    def _drip(self, conn: socket.socket) -> None:
        if self.mode == "drip-body":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000000\r\n\r\n")
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        while not self._stop.wait(self.interval_s):
            conn.sendall(b" ")
            self.sent += 1

    def _huge(self, conn: socket.socket) -> None:
        length = f"Content-Length: {self.size}\r\n" if self.content_length else ""
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{length}"
                     "Connection: close\r\n\r\n".encode())
        block = (b'{"offers": [' + b" " * _BLOCK)[:_BLOCK]
        while self.sent < self.size and not self._stop.is_set():
            piece = block[: self.size - self.sent]
            conn.sendall(piece)
            self.sent += len(piece)


# A process's own ru_maxrss is no measure of it on Linux: exec keeps the high-water mark of the
# memory it replaces, so a command started from a large process (a long pytest run) "peaks" at
# that process's size. This small interpreter runs the command and reports its child's peak
# (RUSAGE_CHILDREN), which starts from the wrapper's own few MiB.
_PEAK_WRAPPER = ("import resource, subprocess, sys; rc = subprocess.call(sys.argv[1:]); "
                 "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss; "
                 "sys.stderr.write(f'\\npeak-rss-kib {peak}\\n'); sys.exit(rc)")


def measured(argv: list[str]) -> list[str]:
    """``argv`` run so that its peak RSS is the last stderr line (see :func:`peak_rss_mib`)."""
    return [sys.executable, "-c", _PEAK_WRAPPER, *argv]


def peak_rss_mib(stderr: str) -> float:
    """The peak RSS a :func:`measured` command reported, MiB (Linux: ru_maxrss is in KiB)."""
    return int(stderr.rstrip().rsplit("peak-rss-kib ", 1)[1]) / 1024
