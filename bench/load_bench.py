"""Concurrency: a bounded closed-loop load from a second process against 2 uvicorn workers.

Uses `wrk` (Debian package) when it is on PATH, else `python -m bench.loadgen`. Targets are
127.0.0.1 only; the duration is capped at 60 s. `run_scrape_load_bench` runs the scheduler in
the web workers against a local feed (bench.feeds), so real scrapes (fetch, parse, ingest of a
moving catalog) land while the load runs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from sqlalchemy import func, select

from app.pipeline.scrape_runner import INTERRUPTED
from app.store.db import make_engine
from app.store.models import ScrapeRun, utcnow
from bench.dbs import OUT, BenchDb, scrape_landing
from bench.feeds import moving_feed
from bench.query_bench import NO_PAGE_CACHE, filter_sets, serve

MAX_DURATION_S = 60

_LUA = """
local paths = {%s}
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", paths[(i %% #paths) + 1])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '\\nRESULT {"requests": %%d, "duration_us": %%d, "status": %%d, "connect": %%d, ' ..
    '"read": %%d, "write": %%d, "timeout": %%d, "p50_us": %%d, "p95_us": %%d, ' ..
    '"p99_us": %%d, "max_us": %%d}\\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max))
end
"""


@dataclass
class LoadResult:
    mix: str
    tool: str
    workers: int
    connections: int
    duration_s: float
    paths: list[str]
    requests: int
    failures: int
    rps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    checked_ok: bool  # every path answered 200 before the run
    missing: list[str]  # paths left out: 404 (not in the tree)
    bumps: int = 0  # data-version bumps during the run (scrapes landing)
    page_cache: bool = True  # the rendered-view micro-cache on (the default), or off
    scrapes_failed: int = 0  # scheduled scrape runs not ok (real scrapes only)
    failure_kinds: dict[str, int] | None = None  # bench.loadgen only: what the failures were


def load_paths(include_page: bool = True) -> list[str]:
    """The filter sets' /api/offers (and /) paths."""
    paths = []
    for fs in filter_sets():
        suffix = f"?{fs.query}" if fs.query else ""
        paths.append(f"/api/offers{suffix}")
        if include_page:
            paths.append(f"/{suffix}")
    return paths


def _wrk(base: str, paths: list[str], duration: int, connections: int) -> dict[str, Any]:
    script = OUT / "load.lua"
    script.write_text(_LUA % ", ".join(json.dumps(p) for p in paths))
    cmd = ["wrk", "-t2", f"-c{connections}", f"-d{duration}s", "--timeout", "30s",
           "-s", str(script), base]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60, check=True)
    (OUT / "wrk.txt").write_text(out.stdout + out.stderr)
    line = next(li for li in out.stdout.splitlines() if li.startswith("RESULT "))
    raw = json.loads(line.removeprefix("RESULT "))
    failures = sum(raw[k] for k in ("status", "connect", "read", "write", "timeout"))
    seconds = raw["duration_us"] / 1e6
    return {
        "requests": raw["requests"],
        "failures": failures,
        "rps": raw["requests"] / seconds,
        "p50_ms": raw["p50_us"] / 1000,
        "p95_ms": raw["p95_us"] / 1000,
        "p99_ms": raw["p99_us"] / 1000,
    }


def _loadgen(base: str, paths: list[str], duration: int, connections: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.loadgen", "--base", base, "--duration", str(duration),
           "--concurrency", str(connections), *paths]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 120, check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@contextmanager
def _scrapes_landing(db: BenchDb, every_s: float | None) -> Iterator[list[int]]:
    """Land a scrape (bench.dbs.scrape_landing) every `every_s` seconds while the block runs;
    yields a one-item list that ends up holding the number landed."""
    count = [0]
    if every_s is None:
        yield count
        return
    stop = threading.Event()
    with scrape_landing(db) as land:

        def loop() -> None:
            while not stop.wait(every_s):
                land()
                count[0] += 1

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        try:
            yield count
        finally:
            stop.set()
            thread.join()


def run_load_bench(
    db: BenchDb,
    *,
    mix: str = "all",
    duration: int = 30,
    connections: int = 8,
    paths: list[str] | None = None,
    bump_every_s: float | None = None,
    page_cache: bool = True,
) -> LoadResult:
    """Closed-loop load over `paths`; with `bump_every_s`, cached aggregates are invalidated
    that often during the run (the app recomputes them on the next request)."""
    duration = min(duration, MAX_DURATION_S)
    paths = paths or load_paths()
    tool = "wrk" if shutil.which("wrk") else "bench.loadgen"
    env = None if page_cache else NO_PAGE_CACHE
    with serve(db, workers=2, log_name="load-server", env=env) as base:
        assert base.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=base, timeout=60) as client:
            statuses = {p: client.get(p).status_code for p in paths}
        missing = [p for p, status in statuses.items() if status == 404]
        paths = [p for p in paths if p not in missing]  # endpoints not in the tree yet
        checked = all(statuses[p] == 200 for p in paths)
        run = _wrk if tool == "wrk" else _loadgen
        with _scrapes_landing(db, bump_every_s) as bumps:
            raw = run(base, paths, duration, connections)
    return LoadResult(
        mix=mix,
        tool=tool,
        workers=2,
        connections=connections,
        duration_s=duration,
        paths=paths,
        requests=int(raw["requests"]),
        failures=int(raw["failures"]),
        rps=raw["rps"],
        p50_ms=raw["p50_ms"],
        p95_ms=raw["p95_ms"],
        p99_ms=raw["p99_ms"],
        checked_ok=checked,
        missing=missing,
        bumps=bumps[0],
        page_cache=page_cache,
    )


def _scrape_runs(db: BenchDb, since: datetime, until: datetime) -> tuple[int, int]:
    """(ok, not ok) runs of the bench feed started between `since` and `until`; a run cut
    short by the bench stopping the server after `until` is neither."""
    engine = make_engine(db.url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(ScrapeRun.status, func.count())
                .where(
                    ScrapeRun.source == "skypilot-cudo",
                    ScrapeRun.started_at >= since,
                    ScrapeRun.started_at < until,
                    ~((ScrapeRun.error == INTERRUPTED) & (ScrapeRun.finished_at >= until)),
                )
                .group_by(ScrapeRun.status)
            ).all()
    finally:
        engine.dispose()
    counts = {status: int(n) for status, n in rows}
    ok = counts.pop("ok", 0)
    return ok, sum(counts.values())


def run_scrape_load_bench(
    db: BenchDb,
    *,
    mix: str,
    duration: int = 60,
    connections: int = 64,
    scrape_every_s: float = 10.0,
    feed_offers: int = 2000,
    paths: list[str] | None = None,
    page_cache: bool = True,
) -> LoadResult:
    """Closed-loop load while the web workers' own scheduler scrapes a moving feed of
    `feed_offers` offers every `scrape_every_s` (each scrape reprices every offer)."""
    duration = min(duration, MAX_DURATION_S)
    paths = paths or load_paths()
    tool = "wrk" if shutil.which("wrk") else "bench.loadgen"
    with moving_feed(feed_offers) as (feed_url, _feed):
        scheduler_env = {
            "GPUFIT_ENABLED_SCRAPERS": '["skypilot-cudo"]',
            "GPUFIT_PROVIDERS__SKYPILOT_CUDO__URL": feed_url,
            "GPUFIT_PROVIDERS__SKYPILOT_CUDO__INTERVAL_MINUTES": str(scrape_every_s / 60),
            "GPUFIT_INTERVAL_JITTER_SECONDS": "0",
            "GPUFIT_FIRST_RUN_SPREAD_SECONDS": "0",
        }
        env = None if page_cache else NO_PAGE_CACHE
        server = serve(
            db, workers=2, log_name="scrape-load-server", scheduler_env=scheduler_env, env=env
        )
        with server as base:
            assert base.startswith("http://127.0.0.1:")
            with httpx.Client(base_url=base, timeout=60) as client:
                statuses = {p: client.get(p).status_code for p in paths}
            missing = [p for p, status in statuses.items() if status == 404]
            paths = [p for p in paths if p not in missing]
            checked = all(statuses[p] == 200 for p in paths)
            began = utcnow()
            run = _wrk if tool == "wrk" else _loadgen
            raw = run(base, paths, duration, connections)
            ended = utcnow()
        landed, failed = _scrape_runs(db, began, ended)
    return LoadResult(
        mix=mix,
        tool=tool,
        workers=2,
        connections=connections,
        duration_s=duration,
        paths=paths,
        requests=int(raw["requests"]),
        failures=int(raw["failures"]),
        rps=raw["rps"],
        p50_ms=raw["p50_ms"],
        p95_ms=raw["p95_ms"],
        p99_ms=raw["p99_ms"],
        checked_ok=checked,
        missing=missing,
        bumps=landed,
        scrapes_failed=failed,
        page_cache=page_cache,
        failure_kinds=raw.get("failure_kinds"),
    )


def main() -> None:
    """`python -m bench.load_bench [--duration S] [--connections N] [--no-page-cache]`: only
    this mix, on the bench's Postgres database as the last `make bench` left it (or a fresh 10k
    load)."""
    import argparse

    from bench.dbs import bench_dbs, bulk_load, postgres_available, reset_db

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--duration", type=int, default=60)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--every", type=float, default=10.0)
    parser.add_argument("--offers", type=int, default=10_000, help="offers to load first")
    parser.add_argument("--reuse", action="store_true", help="keep the database of a last run")
    parser.add_argument(
        "--no-page-cache", action="store_true", help="every request builds its view"
    )
    args = parser.parse_args()
    reason = postgres_available()
    if reason:
        raise SystemExit(f"Postgres not reachable: {reason}")
    pg = next(d for d in bench_dbs(pg=True, tag="_scrapes") if d.is_pg)
    if not args.reuse:
        reset_db(pg)
        bulk_load([pg], args.offers)
    result = run_scrape_load_bench(
        pg, mix="scrapes in the web workers", duration=args.duration,
        connections=args.connections, scrape_every_s=args.every,
        page_cache=not args.no_page_cache,
    )  # fmt: skip
    print(json.dumps(result.__dict__, indent=1, default=str))


if __name__ == "__main__":
    main()
