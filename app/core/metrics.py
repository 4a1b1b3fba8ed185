"""Prometheus metrics: scrape runs, scrape duration, offers per provider, request latency.

The `/metrics` route that reads offer counts from the database lives in app.api.metrics, so
this module stays free of the store.

Each uvicorn worker process keeps its own counters; scrape counters live in whichever process
ran the scrape, so scrape Prometheus every replica.
"""

from __future__ import annotations

import time

from prometheus_client import Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SCRAPE_RUNS = Counter(
    "gpufit_scrape_runs_total", "Scrape runs by provider and outcome", ["provider", "status"]
)
SCRAPE_DURATION = Histogram(
    "gpufit_scrape_duration_seconds",
    "Wall time of a scrape run",
    ["provider"],
    buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600),
)
OFFERS = Gauge("gpufit_offers_active", "Active offers per provider", ["provider"])
REQUEST_LATENCY = Histogram(
    "gpufit_http_request_duration_seconds",
    "HTTP request latency by route template",
    ["method", "route", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5),
)


def record_scrape(provider: str, status: str, seconds: float) -> None:
    SCRAPE_RUNS.labels(provider=provider, status=status).inc()
    SCRAPE_DURATION.labels(provider=provider).observe(seconds)


class LatencyMiddleware:
    """Time each request under its route template (raw paths with ids would explode labels).

    Pure ASGI rather than BaseHTTPMiddleware, whose task group would wrap errors raised while
    the body is read (the size limit's) in an ExceptionGroup.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_and_record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_record)
        finally:
            template = getattr(scope.get("route"), "path", "unmatched")
            REQUEST_LATENCY.labels(
                method=scope.get("method", ""), route=template, status=str(status)
            ).observe(time.perf_counter() - start)
