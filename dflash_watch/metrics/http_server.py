"""``/metrics`` over HTTP on one thread: a connection costs a socket, not a thread.

prometheus-client's ``start_http_server`` starts a thread per connection,
and a connection that sends half a request and holds keeps its thread for
good: 300 half-open requests left 309 threads in a watcher meant to run
for days beside a training job. Here one thread serves every connection
through a selector, and each connection is bounded:

- ``read_timeout_s`` to send its request head (a few seconds: a scraper
  sends it at once), ``write_timeout_s`` to take the answer;
- a request head of at most ``MAX_REQUEST`` bytes;
- at most ``max_connections`` held at once; a new one beyond that closes
  the oldest (a client holding a connection open for nothing is let go,
  the scraper that just connected is answered).

Each answer closes its connection (``Connection: close``): Prometheus
reconnects per scrape at no real cost, and nothing idles between scrapes.
The body is prometheus-client's own encoders (text or OpenMetrics by
``Accept``, gzip by ``Accept-Encoding``, ``name[]`` filters), built on this
thread: a scrape reads the Monitor under its lock for a moment.
"""

from __future__ import annotations

import gzip
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.registry import CollectorRegistry

MAX_REQUEST = 16 * 1024
MAX_CONNECTIONS = 64


@dataclass(slots=True)
class _Conn:
    sock: socket.socket
    deadline: float
    head: bytearray = field(default_factory=bytearray)
    out: memoryview | None = None


class MetricsServer:
    """Serves ``registry`` on ``host:port``; raises ``OSError`` if it cannot listen."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int, *,
                 max_connections: int = MAX_CONNECTIONS, read_timeout_s: float = 5.0,
                 write_timeout_s: float = 10.0) -> None:
        self.registry = registry
        self.max_connections = max_connections
        self.read_timeout_s = read_timeout_s
        self.write_timeout_s = write_timeout_s
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, sockaddr = infos[0]
        self._listen = socket.create_server(sockaddr[:2], family=family, backlog=128)
        self._listen.setblocking(False)
        self.server_address = self._listen.getsockname()
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listen, selectors.EVENT_READ)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        # Held connections, oldest first (dicts keep insertion order).
        self._conns: dict[socket.socket, _Conn] = {}
        self._stop = False
        self.served = 0
        self.thread = threading.Thread(target=self._serve, name="dflash-metrics-http", daemon=True)
        self.thread.start()

    def connections(self) -> int:
        return len(self._conns)

    # -- the loop ------------------------------------------------------------------
    def _serve(self) -> None:
        try:
            while not self._stop:
                for key, mask in self._sel.select(timeout=0.5):
                    if key.fileobj is self._listen:
                        self._accept()
                    elif key.fileobj is self._wake_r:
                        return
                    else:
                        conn = self._conns.get(key.fileobj)  # type: ignore[call-overload]
                        if conn is not None:
                            if mask & selectors.EVENT_READ:
                                self._read(conn)
                            elif mask & selectors.EVENT_WRITE:
                                self._write(conn)
                self._expire(time.monotonic())
        finally:
            for conn in list(self._conns.values()):
                self._drop(conn)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listen.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # EMFILE and the like: try again on the next wake
                return
            if len(self._conns) >= self.max_connections:
                self._drop(next(iter(self._conns.values())))
            sock.setblocking(False)
            conn = _Conn(sock, time.monotonic() + self.read_timeout_s)
            self._conns[sock] = conn
            self._sel.register(sock, selectors.EVENT_READ)

    def _expire(self, now: float) -> None:
        for conn in [c for c in self._conns.values() if c.deadline <= now]:
            self._drop(conn)

    def _drop(self, conn: _Conn) -> None:
        if self._conns.pop(conn.sock, None) is None:
            return
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        conn.head += data
        end = conn.head.find(b"\r\n\r\n")
        if end < 0:
            end = conn.head.find(b"\n\n")
        if end < 0:
            if len(conn.head) > MAX_REQUEST:
                self._answer(conn, 431, b"request header too large\n", "text/plain; charset=utf-8")
            return
        self._respond(conn, bytes(conn.head[:end]).decode("latin-1"))

    def _respond(self, conn: _Conn, head: str) -> None:
        lines = head.splitlines()
        parts = lines[0].split() if lines else []
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            self._answer(conn, 400, b"bad request\n", "text/plain; charset=utf-8")
            return
        method, target = parts[0], parts[1]
        if method not in ("GET", "HEAD"):
            self._answer(conn, 405, b"only GET and HEAD\n", "text/plain; charset=utf-8")
            return
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        url = urlsplit(target)
        if url.path == "/favicon.ico":
            self._answer(conn, 404, b"", "text/plain; charset=utf-8")
            return
        try:
            encoder, content_type = choose_encoder(headers.get("accept", ""))
            names = parse_qs(url.query).get("name[]")
            body = encoder(self.registry.restricted_registry(names) if names else self.registry)
        except Exception as exc:  # noqa: BLE001 - a collector bug is a 500, never a dead server
            self._answer(conn, 500, f"{type(exc).__name__}\n".encode(), "text/plain; charset=utf-8")
            return
        extra: tuple[tuple[str, str], ...] = ()
        if gzip_accepted(headers.get("accept-encoding", "")):
            body = gzip.compress(body)
            extra = (("Content-Encoding", "gzip"),)
        self.served += 1
        self._answer(conn, 200, body, content_type, extra, head_only=method == "HEAD")

    def _answer(self, conn: _Conn, status: int, body: bytes, content_type: str,
                extra: tuple[tuple[str, str], ...] = (), head_only: bool = False) -> None:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
                  431: "Request Header Fields Too Large", 500: "Internal Server Error"}[status]
        lines = [f"HTTP/1.1 {status} {reason}", f"Content-Type: {content_type}",
                 f"Content-Length: {len(body)}", "Connection: close", *(f"{k}: {v}" for k, v in extra)]
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else body)
        conn.out = memoryview(data)
        conn.deadline = time.monotonic() + self.write_timeout_s
        self._sel.modify(conn.sock, selectors.EVENT_WRITE)
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        assert conn.out is not None
        try:
            sent = conn.sock.send(conn.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn)
            return
        conn.out = conn.out[sent:]
        if not conn.out:
            try:
                conn.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            self._drop(conn)

    # -- leaving -------------------------------------------------------------------
    def close(self, timeout: float = 5.0) -> None:
        self._stop = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self.thread.join(timeout)
        for sock in (self._listen, self._wake_r, self._wake_w):
            sock.close()
        self._sel.close()
