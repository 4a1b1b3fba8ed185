"""Query latency: `GET /api/offers` and `GET /` through a real uvicorn, against the raw SQL.

The server is `gpufit serve --no-scheduler` in its own process on 127.0.0.1; requests are
sequential over one keep-alive httpx connection, timed around the full response read. The raw
baseline runs, on a driver connection in this process, the indexed SQL that returns the same
page of offers for the same filter (joined to providers and GPU models, as the ORM loads them).
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import psycopg
from sqlalchemy.engine import make_url

from app.fit import Workload, estimate_memory
from bench.dbs import OUT, BenchDb, psycopg_dsn, scrape_landing
from bench.loadgen import percentile

ROOT = Path(__file__).resolve().parent.parent
GPUFIT = Path(sys.executable).parent / "gpufit"
PAGE_SIZE = 50  # rows the raw query returns (the API's default page)
# Latency cells time building a view, which every view's first visitor in a data version (and
# every visitor after GPUFIT_PAGE_CACHE_SECONDS) waits for: repeated requests would otherwise
# time the micro-cache (app.web.page_cache). The load mixes run with it, as deployed.
NO_PAGE_CACHE = {"GPUFIT_PAGE_CACHE_SECONDS": "0"}


@dataclass(frozen=True)
class FilterSet:
    name: str
    params: dict[str, str]
    # (where clause over offers o, order by, bound parameters) for the raw SQL baseline
    sql: Callable[[], tuple[str, str, dict[str, Any]]]
    workload: bool = False

    @property
    def query(self) -> str:
        return urlencode(self.params)


_PRICE = "coalesce(o.price_per_hour, o.spot_price_per_hour)"
_PER_GPU = f"{_PRICE} / o.gpu_count"


def _candidate_sql(**workload: Any) -> tuple[str, str, dict[str, Any]]:
    """The fit ranking's SQL prefilter (offers whose VRAM could hold the job), per app.queries'
    `vram_bounds`; without it, total VRAM >= the need at the smallest layout."""
    w = Workload(**workload)
    est = estimate_memory(w)
    try:
        from app.queries import vram_bounds
    except ImportError:
        need = est.per_gpu_gib
        if est.gpus_needed is not None and est.layout_per_gpu_gib is not None:
            need = est.layout_per_gpu_gib * est.gpus_needed
        return "o.active AND o.vram_gib_total >= :total", _PER_GPU, {"total": need}
    bounds = vram_bounds(w, est)
    return (
        "o.active AND o.vram_gib_per_gpu >= :per_gpu "
        "AND (o.gpu_count < 1 OR o.vram_gib_total >= :total)",
        _PER_GPU,
        {"per_gpu": bounds.per_gpu_gib, "total": bounds.total_gib},
    )


def filter_sets() -> list[FilterSet]:
    """The five typical requests, in app.queries' parameter names (sort=price_per_gpu is the
    default sort, i.e. the brief's price_per_gpu_hour; min_vram is GiB per GPU)."""
    return [
        FilterSet("none", {}, lambda: ("o.active", _PER_GPU, {})),
        FilterSet(
            "gpu=h100-sxm sort=price_per_gpu",
            {"gpu": "h100-sxm", "sort": "price_per_gpu"},
            lambda: ("o.active AND o.gpu_model_slug = :gpu", _PER_GPU, {"gpu": "h100-sxm"}),
        ),
        FilterSet(
            "min_vram=48 max_price_per_hour=5",
            {"min_vram": "48", "max_price_per_hour": "5"},
            lambda: (
                f"o.active AND o.vram_gib_per_gpu >= :vram AND {_PRICE} <= :price",
                _PER_GPU,
                {"vram": 48, "price": 5},
            ),
        ),
        FilterSet(
            "model=llama-3.1-8b method=qlora",
            {"model": "llama-3.1-8b", "method": "qlora"},
            lambda: _candidate_sql(model="llama-3.1-8b", method="qlora"),
            workload=True,
        ),
        FilterSet(
            "model=llama-3.1-70b method=full sharding=zero3",
            {"model": "llama-3.1-70b", "method": "full", "sharding": "zero3"},
            lambda: _candidate_sql(model="llama-3.1-70b", method="full", sharding="zero3"),
            workload=True,
        ),
    ]


def raw_sql(fs: FilterSet, pg: bool) -> list[tuple[str, dict[str, Any]]]:
    """The page query and the total count, as the endpoint needs them, in plain SQL."""
    where, order, params = fs.sql()
    # As SQLAlchemy renders Offer.active.is_(True): the planners treat it like active = true.
    where = where.replace("o.active", "o.active IS true" if pg else "o.active IS 1", 1)
    page = (
        "SELECT o.*, p.display_name, g.name, g.vendor, g.bf16_tflops, g.fp16_tflops, "
        "g.memory_type, g.nvlink_gbps FROM offers o "
        "JOIN providers p ON p.id = o.provider_id "
        "LEFT JOIN gpu_models g ON g.slug = o.gpu_model_slug "
        f"WHERE {where} ORDER BY {order} NULLS LAST, o.id LIMIT {PAGE_SIZE}"
    )
    count = f"SELECT count(*) FROM offers o WHERE {where}"
    out = []
    for sql in (page, count):
        if pg:
            for key in params:
                sql = sql.replace(f":{key}", f"%({key})s")
        out.append((sql, params))
    return out


@dataclass
class Timing:
    p50_ms: float
    p95_ms: float
    n: int
    failures: int = 0
    rows: int | None = None
    bytes: int | None = None
    status: int | None = None  # of the last response

    @property
    def missing(self) -> bool:
        """Every request failed with 404: the endpoint is not in the tree."""
        return self.status == 404 and self.failures == self.n

    def cell(self) -> str:
        if self.missing:
            return "not present (404)"
        fails = f" ({self.failures}/{self.n} failed, {self.status})" if self.failures else ""
        return f"{self.p50_ms:.1f} / {self.p95_ms:.1f}{fails}"


@dataclass
class QueryRow:
    filter: str
    workload: bool
    api: Timing
    page: Timing
    sql: Timing
    api_cold: Timing  # the first request after an ingest (cached aggregates invalidated)
    page_cold: Timing
    explain: list[str] = field(default_factory=list)

    @property
    def api_ratio(self) -> float:
        return self.api.p50_ms / self.sql.p50_ms

    @property
    def page_ratio(self) -> float:
        return self.page.p50_ms / self.sql.p50_ms


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def serve(
    db: BenchDb,
    workers: int = 1,
    log_name: str = "server",
    *,
    scheduler_env: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[str]:
    """`gpufit serve --no-scheduler` on a free loopback port; yields its base URL.

    With `scheduler_env` (GPUFIT_* settings for the scrapes), the scheduler runs in the workers;
    `env` adds other GPUFIT_* settings.
    """
    with serve_process(db, workers, log_name, scheduler_env=scheduler_env, env=env) as (
        base,
        _pid,
    ):
        yield base


def _wait_for_start_up_warm(base: str, limit_s: float = 90.0) -> None:
    """Let the server's start-up warm (app.web.warm) finish before timing it, as a deploy
    would before taking traffic (/healthz says `running` meanwhile); go on after `limit_s`."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=5).json().get("start_up_warm") != "running":
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)


@contextmanager
def serve_process(
    db: BenchDb,
    workers: int = 1,
    log_name: str = "server",
    *,
    scheduler_env: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[tuple[str, int]]:
    """`serve`, yielding the base URL and the server's pid (with 1 worker, the process that
    serves the requests)."""
    port = free_port()
    env = {
        **os.environ,
        "GPUFIT_DATABASE_URL": db.url,
        "GPUFIT_LOG_LEVEL": "WARNING",
        "GPUFIT_SCHEDULER_ENABLED": "false" if scheduler_env is None else "true",
        # A stale editable install can map `app` as a namespace package (then
        # importlib.resources.files("app") fails); the source tree on sys.path wins over it.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        **(scheduler_env or {}),
        **(env or {}),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    log = (OUT / f"{log_name}.log").open("w")
    scheduler = ["--no-scheduler"] if scheduler_env is None else []
    cmd = [str(GPUFIT), "serve", *scheduler, "--workers", str(workers),
           "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited ({proc.returncode}); see {log.name}")
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not come up; see {log.name}")
            time.sleep(0.2)
        _wait_for_start_up_warm(base)
        yield base, proc.pid
    finally:
        _stop(proc)
        log.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's own process group (uvicorn and its workers), then SIGKILL."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _rows_in(response: httpx.Response) -> int | None:
    if not response.headers.get("content-type", "").startswith("application/json"):
        return None
    body = response.json()
    if isinstance(body, dict):
        for key in ("offers", "items", "results"):
            if isinstance(body.get(key), list):
                return len(body[key])
    return len(body) if isinstance(body, list) else None


MIN_SAMPLES = 5


def time_http(
    client: httpx.Client, path: str, repeat: int, *, warmup: int = 2, max_seconds: float = 6.0
) -> Timing:
    """Sequential requests: `repeat` of them, or fewer (at least MIN_SAMPLES) when slow."""
    latencies: list[float] = []
    failures = 0
    last: httpx.Response | None = None
    began = time.perf_counter()
    for i in range(warmup + repeat):
        if i >= warmup + MIN_SAMPLES and time.perf_counter() - began > max_seconds:
            break
        if i == 1 and i < warmup and time.perf_counter() - began > 1.0:
            continue  # a slow endpoint: one warm-up request is enough
        start = time.perf_counter()
        try:
            response: httpx.Response | None = client.get(path)
            assert response is not None
            _ = response.content
        except httpx.HTTPError:
            response = None
        elapsed = time.perf_counter() - start
        if i >= warmup:
            latencies.append(elapsed)
            failures += response is None or response.status_code >= 400
        last = response or last
    if last is None:
        return Timing(float("nan"), float("nan"), len(latencies), failures)
    return Timing(
        p50_ms=percentile(latencies, 50) * 1000,
        p95_ms=percentile(latencies, 95) * 1000,
        n=len(latencies),
        failures=failures,
        rows=_rows_in(last) if last.status_code < 400 else None,
        bytes=len(last.content),
        status=last.status_code,
    )


class RawConnection:
    def __init__(self, db: BenchDb) -> None:
        self.db = db
        if db.is_pg:
            self.pg: psycopg.Connection[Any] | None = psycopg.connect(
                psycopg_dsn(db.url), autocommit=True
            )
            self.lite: sqlite3.Connection | None = None
        else:
            self.pg = None
            self.lite = sqlite3.connect(make_url(db.url).database or "")

    def run(self, fs: FilterSet) -> int:
        """Both statements; returns the page's row count."""
        (page, page_params), (count, count_params) = raw_sql(fs, self.db.is_pg)
        if self.pg is not None:
            rows = len(self.pg.execute(page, page_params).fetchall())
            self.pg.execute(count, count_params).fetchone()
            return rows
        assert self.lite is not None
        rows = len(self.lite.execute(page, page_params).fetchall())
        self.lite.execute(count, count_params).fetchone()
        return rows

    def explain(self, fs: FilterSet) -> list[str]:
        out: list[str] = []
        for sql, params in raw_sql(fs, self.db.is_pg):
            if self.pg is not None:
                rows = self.pg.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params).fetchall()
                out += [str(r[0]) for r in rows]
            else:
                assert self.lite is not None
                plan = self.lite.execute("EXPLAIN QUERY PLAN " + sql, params)
                out += [str(r[-1]) for r in plan]
        return out

    def close(self) -> None:
        if self.pg is not None:
            self.pg.close()
        if self.lite is not None:
            self.lite.close()


def time_sql(conn: RawConnection, fs: FilterSet, repeat: int, warmup: int = 2) -> Timing:
    latencies: list[float] = []
    rows = 0
    for i in range(warmup + repeat):
        start = time.perf_counter()
        rows = conn.run(fs)
        if i >= warmup:
            latencies.append(time.perf_counter() - start)
    return Timing(
        p50_ms=percentile(latencies, 50) * 1000,
        p95_ms=percentile(latencies, 95) * 1000,
        n=repeat,
        rows=rows,
    )


COLD_SAMPLES = 5


def cold_timings(
    client: httpx.Client, land: Callable[[], float], paths: list[str], samples: int
) -> tuple[dict[str, Timing], list[float]]:
    """First requests after a scrape: `samples` times, a scrape lands (new data version, its
    views warmed by the worker that ingested, as app.web.warm does before the commit), then each
    path is requested once. Returns per path (p50, max) and the warms' seconds."""
    latencies: dict[str, list[float]] = {p: [] for p in paths}
    failures: dict[str, int] = dict.fromkeys(paths, 0)
    status: dict[str, int | None] = dict.fromkeys(paths)
    warms = []
    for _ in range(samples):
        warms.append(land())
        for path in paths:
            start = time.perf_counter()
            try:
                response = client.get(path)
                _ = response.content
                status[path] = response.status_code
                failures[path] += response.status_code >= 400
            except httpx.HTTPError:
                failures[path] += 1
            latencies[path].append(time.perf_counter() - start)
    return {
        path: Timing(
            p50_ms=percentile(times, 50) * 1000,
            p95_ms=max(times) * 1000,  # with a few samples the max is the honest tail
            n=samples,
            failures=failures[path],
            status=status[path],
        )
        for path, times in latencies.items()
    }, warms


@dataclass
class QueryBench:
    rows: list[QueryRow]
    note: str | None  # endpoints not in the tree
    warm_s: list[float]  # each landing's warm (the ingesting worker's before-commit work)


def run_query_bench(db: BenchDb, repeat: int, cold_samples: int = COLD_SAMPLES) -> QueryBench:
    """Latency rows per filter set, warm and first-after-a-scrape."""
    rows: list[QueryRow] = []
    conn = RawConnection(db)
    note = None
    with (
        serve(db, workers=1, log_name=f"query-{db.name}", env=NO_PAGE_CACHE) as base,
        scrape_landing(db) as land,
        httpx.Client(base_url=base, timeout=120) as client,
    ):
        if client.get("/api/offers").status_code == 404:
            note = "GET /api/offers is not in the tree yet (404)"
        warm: list[tuple[FilterSet, Timing, Timing, Timing]] = []
        for fs in filter_sets():
            suffix = f"?{fs.query}" if fs.query else ""
            api = time_http(client, f"/api/offers{suffix}", repeat)
            page = time_http(client, f"/{suffix}", repeat)
            warm.append((fs, api, page, time_sql(conn, fs, repeat)))
        paths = [p for fs, *_ in warm for p in _paths(fs)]
        cold, warms = cold_timings(client, land, paths, cold_samples)
        for fs, api, page, sql in warm:
            api_path, page_path = _paths(fs)
            rows.append(
                QueryRow(fs.name, fs.workload, api, page, sql, cold[api_path], cold[page_path],
                         conn.explain(fs))
            )  # fmt: skip
    conn.close()
    return QueryBench(rows, note, warms)


def _paths(fs: FilterSet) -> tuple[str, str]:
    suffix = f"?{fs.query}" if fs.query else ""
    return f"/api/offers{suffix}", f"/{suffix}"
