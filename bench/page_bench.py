"""Every page a user reaches off the five filter sets: each offered sort, deep pages (offset and
keyset), a GPU page, /saved with 20 saved searches and a saved search's feed, an offer page, a
1,000-row ranked page; warm and first-after-a-scrape. And a full CSV export: time, size and the
server's memory growth while it streams.

Same server and client set-up as bench.query_bench (one uvicorn worker, sequential keep-alive
requests that accept gzip, as a browser does).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import httpx

from app.saved import OWNER_COOKIE, create_saved_search, new_token
from app.store.db import make_engine, make_session_factory, session_scope
from bench.dbs import BenchDb, scrape_landing
from bench.query_bench import NO_PAGE_CACHE, Timing, cold_timings, serve_process, time_http

TARGET_PAGE_MS = 150.0
TARGET_API_MS = 50.0
DEEP_OFFSET = 90_000
QLORA = {"model": "llama-3.1-8b", "method": "qlora"}

# Twenty saved searches of one browser: filters alone, and jobs.
SAVED_QUERIES = [
    "gpu=h100-sxm", "gpu=a100-80gb", "gpu=rtx-4090", "gpu=l40s&in_stock=true",
    "provider=vastai", "provider=lambdalabs&gpu_count=8", "min_vram=80&max_price_per_hour=20",
    "min_vram=48&market=spot", "nvlink=true&gpu_count=8", "continent=Europe",
    "billing=second&min_vram=24", "q=h100", "vendor=amd",
    "model=llama-3.1-8b&method=qlora", "model=llama-3.1-8b&method=lora&gpus=1",
    "model=llama-3.1-70b&method=qlora", "model=llama-3.1-70b&method=full&sharding=zero3",
    "model=mistral-7b&method=full", "params_b=1&method=pretrain&tokens=20000000000",
    "model=llama-3.1-8b&method=qlora&market=spot",
]  # fmt: skip


@dataclass
class PageRow:
    name: str
    path: str
    kind: str  # "page" or "api"
    warm: Timing
    cold: Timing | None
    size_bytes: int  # the body as the client reads it
    wire_bytes: int  # as sent (gzip)

    @property
    def target_ms(self) -> float:
        return TARGET_API_MS if self.kind == "api" else TARGET_PAGE_MS

    @property
    def met(self) -> bool:
        worst = max(self.warm.p95_ms, self.cold.p95_ms if self.cold else 0.0)
        failed = self.warm.failures + (self.cold.failures if self.cold else 0)
        return worst < self.target_ms and not failed


@dataclass
class ExportResult:
    rows: int
    seconds: float
    size_bytes: int
    rss_before_mb: float
    rss_peak_mb: float

    @property
    def growth_mb(self) -> float:
        return self.rss_peak_mb - self.rss_before_mb


@dataclass
class PageBench:
    rows: list[PageRow]
    export: ExportResult | None
    saved: int  # saved searches of the browser measured on /saved


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _save_searches(db: BenchDb) -> tuple[str, str]:
    """The bench browser's 20 saved searches; returns (owner token, a share token)."""
    owner = new_token()
    engine = make_engine(db.url)
    share = ""
    with session_scope(make_session_factory(engine)) as session:
        for i, query in enumerate(SAVED_QUERIES):
            search = create_saved_search(session, owner_token=owner, name=f"s{i}", query=query)
            share = share or search.share_token
    engine.dispose()
    return owner, share


def _paths(client: httpx.Client, share: str) -> list[tuple[str, str, str]]:
    """(name, kind, path) of every measured request."""
    out: list[tuple[str, str, str]] = []
    sorts: list[tuple[str, dict[str, str]]] = [
        ("sort=price", {"sort": "price"}),
        ("sort=vram", {"sort": "vram"}),
        ("sort=newest", {"sort": "newest"}),
        ("market=spot (spot price per GPU-hour)", {"market": "spot"}),
        ("include_inactive=true", {"include_inactive": "true"}),
        ("workload, sort=cost", {**QLORA, "sort": "cost"}),
        ("workload, sort=price", {**QLORA, "sort": "price"}),
        ("workload, sort=newest", {**QLORA, "sort": "newest"}),
    ]
    total = client.get("/api/offers", params={"limit": 1}).json()["total"]
    deep = max(0, min(DEEP_OFFSET, total - 50))
    cursor = client.get("/api/offers", params={"offset": deep - 50, "limit": 50}).json()
    deep_pages = [
        (f"offset={deep:,}", {"offset": str(deep)}),
        (f"after= (keyset, row {deep:,})", {"after": cursor["next_after"] or ""}),
    ]
    for name, params in [*sorts, *deep_pages]:
        query = urlencode(params)
        out.append((name, "page", f"/?{query}"))
        out.append((name, "api", f"/api/offers?{query}"))
    out.append(("workload, limit=1000", "page", "/?" + urlencode({**QLORA, "limit": 1000})))
    offer_id = client.get("/api/offers", params={"limit": 1}).json()["offers"][0]["id"]
    out += [
        ("GPU page h100-sxm", "page", "/gpus/h100-sxm"),
        ("GPU page h100-sxm", "api", "/api/gpus/h100-sxm"),
        ("offer page", "page", f"/offers/{offer_id}"),
        (f"/saved, {len(SAVED_QUERIES)} searches", "page", "/saved"),
        (f"/saved, {len(SAVED_QUERIES)} searches", "api", "/api/saved"),
        ("saved search feed (Atom)", "page", f"/saved/{share}.atom"),
    ]
    return out


def _export(client: httpx.Client, pid: int) -> ExportResult:
    """One full CSV export of the default view; the server's RSS sampled while it streams."""
    before = _rss_mb(pid)
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], _rss_mb(pid))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    start = time.perf_counter()
    rows = size = 0
    with client.stream("GET", "/export/offers.csv") as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            size += len(chunk)
            rows += chunk.count(b"\n")
    seconds = time.perf_counter() - start
    done.set()
    thread.join()
    return ExportResult(rows - 1, seconds, size, before, max(peak[0], _rss_mb(pid)))


def run_page_bench(
    db: BenchDb, repeat: int, *, cold_samples: int, export: bool = True
) -> PageBench:
    owner, share = _save_searches(db)
    with (
        serve_process(db, workers=1, log_name=f"pages-{db.name}", env=NO_PAGE_CACHE) as (
            base,
            pid,
        ),
        scrape_landing(db) as land,
        httpx.Client(base_url=base, timeout=120, cookies={OWNER_COOKIE: owner}) as client,
    ):
        paths = _paths(client, share)
        warm: dict[str, Timing] = {}
        sizes: dict[str, tuple[int, int]] = {}
        for _name, _kind, path in paths:
            warm[path] = time_http(client, path, repeat)
            response = client.get(path)
            sizes[path] = (len(response.content), response.num_bytes_downloaded)
        cold, _ = cold_timings(client, land, [p for _, _, p in paths], cold_samples)
        rows = [
            PageRow(name, path, kind, warm[path], cold.get(path), *sizes[path])
            for name, kind, path in paths
        ]
        result = _export(client, pid) if export else None
    return PageBench(rows, result, len(SAVED_QUERIES))
