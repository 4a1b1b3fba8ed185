"""A tiny local HTTP server that plays recorded provider responses (and failures) for tests."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    delay: float = 0.0
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    # Hostile behaviours: send the body one byte every `drip` seconds (forever with `endless`);
    # `echo` answers with the request itself (line, headers, body), as some upstream errors do.
    drip: float = 0.0
    endless: bool = False
    echo: bool = False


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
        headers: dict[str, str] | None = None,
        drip: float = 0.0,
        endless: bool = False,
        echo: bool = False,
    ) -> str:
        """Answer `path` (any query string) with this response; returns the full URL."""
        data = body.encode() if isinstance(body, str) else body
        self.routes[path] = Route(
            status, data, delay, content_type, dict(headers or {}), drip, endless, echo
        )
        return self.url + path


_BOILERPLATE = frozenset(
    {"host", "accept", "accept-encoding", "connection", "user-agent", "content-length"}
)


class _Handler(BaseHTTPRequestHandler):
    server: FeedServer

    def _answer(self) -> None:
        path = self.path.split("?", 1)[0]
        self.server.hits.append(self.path)
        # Read the request body first: closing a socket with unread input makes the kernel send
        # a reset, and the client can lose the response (a flaky ReadError on big answers).
        length = int(self.headers.get("Content-Length") or 0)
        request_body = self.rfile.read(length) if length else b""
        route = self.server.routes.get(path, Route(404, b"not found"))
        if route.delay:
            time.sleep(route.delay)
        body = route.body
        if route.echo:
            # What a careless upstream puts in an error: the request line, the headers that are
            # not boilerplate, and the body.
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _BOILERPLATE}
            body = json.dumps(
                {
                    "rejected": f"{self.command} {self.path}",
                    "headers": headers,
                    "body": request_body.decode("utf-8", "replace"),
                }
            ).encode()
        try:
            self.send_response(route.status)
            self.send_header("Content-Type", route.content_type)
            for name, value in route.headers.items():
                self.send_header(name, value)
            if route.drip:
                self.end_headers()
                self._drip(body, route)
                return
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def _drip(self, body: bytes, route: Route) -> None:
        # No Content-Length: the body ends when the connection closes, i.e. never if endless.
        index = 0
        while route.endless or index < len(body):
            self.wfile.write(body[index % len(body) : index % len(body) + 1] if body else b" ")
            self.wfile.flush()
            index += 1
            time.sleep(route.drip)

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
