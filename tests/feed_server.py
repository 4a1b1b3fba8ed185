"""A tiny local HTTP server that plays recorded provider responses (and failures) for tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    delay: float = 0.0
    content_type: str = "application/json"


class FeedServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes: dict[str, Route] = {}
        self.hits: list[str] = []

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def serve(
        self,
        path: str,
        body: bytes | str,
        *,
        status: int = 200,
        delay: float = 0.0,
        content_type: str = "application/json",
    ) -> str:
        """Answer `path` (any query string) with this response; returns the full URL."""
        data = body.encode() if isinstance(body, str) else body
        self.routes[path] = Route(status, data, delay, content_type)
        return self.url + path


class _Handler(BaseHTTPRequestHandler):
    server: FeedServer

    def _answer(self) -> None:
        path = self.path.split("?", 1)[0]
        self.server.hits.append(self.path)
        # Read the request body first: closing a socket with unread input makes the kernel send
        # a reset, and the client can lose the response (a flaky ReadError on big answers).
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        route = self.server.routes.get(path, Route(404, b"not found"))
        if route.delay:
            time.sleep(route.delay)
        try:
            self.send_response(route.status)
            self.send_header("Content-Type", route.content_type)
            self.send_header("Content-Length", str(len(route.body)))
            self.end_headers()
            self.wfile.write(route.body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    do_GET = _answer
    do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        del format, args


@contextmanager
def feed_server() -> Iterator[FeedServer]:
    server = FeedServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
