"""A local provider feed for the bench: a skypilot-catalog vms.csv (the skypilot-cudo scraper's
format) whose prices move on every request, so each scheduled scrape updates every offer and
writes history, as a busy marketplace does. Loopback only."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HEADER = (
    "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice"
)
GPU_INFO = (
    "\"{{'Gpus': [{{'Name': 'A40', 'Manufacturer': 'NVIDIA', 'Count': '{n}.0', "
    "'MemoryInfo': {{'SizeInMiB': 49152}}}}], 'TotalGpuMemoryInMiB': {total}}}\""
)
REGIONS = ("ca-montreal-3", "no-luster-1", "se-smedjebacken-1", "us-newyork-1")


def catalog(rows: int, version: int) -> str:
    """`rows` A40 offers (1-8 GPUs, four regions) priced for scrape number `version`."""
    lines = [HEADER]
    for i in range(rows):
        n = 1 + i % 8
        price = 0.37 * n * (1 + 0.05 * math.sin(version + i))
        info = GPU_INFO.format(n=n, total=49152 * n)
        lines.append(
            f"bench-a40-{i}_{n}x,A40,{n}.0,{4 * n},{16 * n},{price:.4f},"
            f"{REGIONS[i % len(REGIONS)]},{info},"
        )
    return "\n".join(lines) + "\n"


class _Feed(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, rows: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.rows = rows
        self.requests = 0
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    server: _Feed

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        with self.server.lock:
            self.server.requests += 1
            version = self.server.requests
        body = catalog(self.server.rows, version).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/csv")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        del format, args


@contextmanager
def moving_feed(rows: int) -> Iterator[tuple[str, _Feed]]:
    """Serve the feed on a free loopback port; yields (its vms.csv URL, the server)."""
    server = _Feed(rows)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host!s}:{port}/cudo/vms.csv", server
    finally:
        server.shutdown()
        server.server_close()
