"""A real HTTP server on 127.0.0.1 (ephemeral port, its own thread) for sink tests.

Each request gets the next scripted answer: a status code, or ``"hang"``
(read the request, then answer nothing until the server closes). Every
request is recorded with its headers, body and arrival time, and waiters
are woken, so a test asks "did the POST come, and when" without sleeping.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True, slots=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when the body was read


class LoopbackServer:
    def __init__(self, answers: list[int | str] | None = None, default: int | str = 200) -> None:
        self.answers = list(answers or [])
        self.default = default
        self.received: list[Received] = []
        self._cond = threading.Condition()
        self._closing = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with owner._cond:
                    owner.received.append(Received(self.path, dict(self.headers.items()), body, time.monotonic()))
                    answer = owner.answers.pop(0) if owner.answers else owner.default
                    owner._cond.notify_all()
                if answer == "hang":
                    owner._closing.wait(30)
                    return
                self.send_response(int(answer))
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def wait_for(self, count: int, timeout: float = 5.0) -> list[Received]:
        """The first ``count`` requests, once they came (or what came by the timeout)."""
        with self._cond:
            self._cond.wait_for(lambda: len(self.received) >= count, timeout)
            return list(self.received)


def refused_url() -> str:
    """A loopback URL nobody listens on: a port bound and closed again."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"
