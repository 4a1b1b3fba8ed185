"""Run the whole benchmark and write bench/results.md.

    python -m bench.run            # full run (make bench): 10k, 100k and, if it fits, 1M offers
    python -m bench.run --quick    # smoke test, small sizes, < 60 s

Databases: a SQLite file under bench/out/ and the Postgres database `gpufit_bench` (dropped and
re-created; GPUFIT_BENCH_PG_ADMIN_URL / GPUFIT_BENCH_PG_DB or --pg-db override the server and
name, so two benches on one server do not drop each other's). Without a reachable Postgres only
SQLite runs, and results.md says so.

At the main size (100k) it also measures every page off the five filter sets (bench.page_bench:
sorts, deep pages, GPU page, /saved with 20 searches, a feed, a full CSV export) and a scrape
with 10,000 saved searches (bench.saved_bench); at 1M offers, a query point on Postgres alone.
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from statistics import median

from bench import generate
from bench.dbs import (
    OUT,
    BenchDb,
    LoadResult,
    bench_dbs,
    bulk_load,
    postgres_available,
    psycopg_dsn,
    reset_db,
)
from bench.ingest_bench import IngestResult, run_ingest_bench
from bench.load_bench import LoadResult as ConcurrencyResult
from bench.load_bench import load_paths, run_load_bench, run_scrape_load_bench
from bench.machine import machine_info
from bench.page_bench import PageBench, run_page_bench
from bench.query_bench import QueryBench, QueryRow, run_query_bench
from bench.saved_bench import SavedScrapeResult, run_saved_scrape_bench

RESULTS = Path(__file__).resolve().parent / "results.md"
TARGET_INGEST_S = 3.0
TARGET_API_P95_MS = 50.0
TARGET_PAGE_P95_MS = 150.0
BUDGET_S = 14 * 60  # the whole full run must end within 15 minutes
# Data-version bumps during the second concurrency mix: far more often than real scrapes
# (minutes apart per provider), so the load sees many cold recomputations.
SCRAPE_EVERY_S = 5.0
# The scrape-isolation mix (issue 16): the web workers' own scheduler scrapes a moving local feed
# this often while 64 connections load the same two workers for 60 s.
SCRAPE_LOAD_EVERY_S = 10.0
TARGET_SCRAPE_LOAD_P95_MS = 1500.0


TARGET_BIG_API_P95_MS = 100.0
TARGET_BIG_PAGE_P95_MS = 300.0
TARGET_POST_SCRAPE_S = 2.0
TARGET_EXPORT_S = 3.0
TARGET_EXPORT_RSS_MB = 50.0
TARGET_GPU_PAGE_BYTES = 200_000


@dataclass(frozen=True)
class Config:
    name: str
    query_sizes: tuple[int, ...]  # sizes loaded and queried (the last one is the main size)
    scrape: int  # offers in the ingest bench's provider scrape
    repeat: int  # sequential requests per (filter set, endpoint)
    load_seconds: int
    load_connections: int
    big: int | None  # Postgres only: generate, bulk load and a query point, if it fits
    diagnose: bool
    cold_samples: int = 5  # scrapes landed to time first requests after one
    page_repeat: int = 15  # sequential requests per page of bench.page_bench
    saved: int = 10_000  # saved searches in the database during the scrape bench
    distinct: int = 1_000  # distinct views among them
    big_repeat: int = 10
    big_cold_samples: int = 2
    scrape_load_seconds: int = 60  # the mix with real scrapes landing in the web workers
    scrape_load_connections: int = 64


# The 8-connection mixes run 15 s each and the 64-connection mix once, with the page cache on as
# deployed (`python -m bench.load_bench --no-page-cache` runs it without): on a 2-core machine
# half the speed of the first one measured, the whole run with the 1M point came to ~15 min.
FULL = Config("full", (10_000, 100_000), 10_000, 30, 15, 8, 1_000_000, True)
QUICK = Config("quick", (2_000,), 1_000, 5, 5, 4, None, False, cold_samples=2, page_repeat=5,
               saved=1_000, distinct=100, scrape_load_seconds=10,
               scrape_load_connections=16)  # fmt: skip
# Seconds the 1M query point takes beyond generate + load (warm, then two scrapes landing).
BIG_QUERY_S = 120


def _fmt_s(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 0.1 else f"{seconds * 1000:.1f} ms"


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.0f}" if seconds > 0 else "-"


def _ok(met: bool) -> str:
    return "met" if met else "**missed**"


class Report:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.targets: list[tuple[str, str, str]] = []  # (target, measured, met)

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        self.add("| " + " | ".join(header) + " |", "|" + "---|" * len(header))
        self.add(*("| " + " | ".join(r) + " |" for r in rows), "")


def _determinism_digest(n: int = 2_000) -> str:
    h = hashlib.sha256()
    for syn in islice(generate.generate_offers(n), n):
        h.update(syn.record.model_dump_json().encode())
        h.update(syn.first_seen.isoformat().encode())
    return h.hexdigest()[:16]


def _load_section(report: Report, loads: list[LoadResult]) -> None:
    report.add("## Bulk load (generation + COPY / executemany)", "")
    report.add(
        "Offers and their 30-day history generated from the sample's distributions, then bulk "
        "loaded: Postgres `COPY FROM STDIN` (psycopg `cursor.copy`), SQLite `executemany`, each "
        "in one transaction into the migrated schema (all indexes in place), then "
        "`VACUUM ANALYZE` / `ANALYZE`.",
        "",
    )
    rows = []
    for r in loads:
        for db, seconds in r.load_s.items():
            rows.append([
                f"{r.offers:,}", f"{r.providers}", f"{r.history:,}", db, _fmt_s(r.generate_s),
                _fmt_s(seconds), _rate(r.offers + r.history, seconds), _fmt_s(r.analyze_s[db]),
            ])  # fmt: skip
    report.table(
        ["offers", "providers", "history rows", "db", "generate", "bulk load", "rows/s",
         "analyze"],
        rows,
    )  # fmt: skip


def _ingest_section(report: Report, results: list[IngestResult]) -> None:
    report.add("## Ingest throughput (real `ingest_records` path vs bulk baseline)", "")
    if not results:
        report.add("(not run)", "")
        return
    r0 = results[0]
    report.add(
        f"One provider scrape of {r0.scrape:,} offers (shaped like the sample's vastai "
        f"listings) into a database already holding {r0.base_offers:,} offers. *First scrape*: "
        "all offers new (`ingest_records` in one session, then commit) against COPY (Postgres) /"
        " executemany (SQLite) of the same rows plus their first history point (INSERT ... "
        f"SELECT). *Re-scrape*: the same offers with {r0.changed:,} (20 %) at a new price, "
        "against a set-based upsert of a re-scrape with the same share of changes (bulk-load a "
        "staging table, INSERT history for changed rows, UPDATE ... FROM staging, deactivate "
        "missing). Times include the commit.",
        "",
    )
    rows = []
    for r in results:
        rows.append([
            r.db, "first scrape (insert)", _fmt_s(r.ingest_insert_s),
            _rate(r.scrape, r.ingest_insert_s), _fmt_s(r.baseline_insert_s),
            _rate(r.scrape, r.baseline_insert_s), f"{r.insert_ratio:.1f}x",
            f"{r.ingest_added:,} added",
        ])  # fmt: skip
        rows.append([
            r.db, "re-scrape (20 % changed)", _fmt_s(r.ingest_update_s),
            _rate(r.scrape, r.ingest_update_s), _fmt_s(r.baseline_upsert_s),
            _rate(r.scrape, r.baseline_upsert_s), f"{r.update_ratio:.1f}x",
            f"{r.ingest_updated:,} changed",
        ])  # fmt: skip
    report.table(
        ["db", "scrape", "ingest", "offers/s", "baseline", "baseline offers/s",
         "ingest / baseline", "ingest stats"],
        rows,
    )  # fmt: skip


def _query_section(report: Report, size: int, db: str, bench: QueryBench) -> None:
    rows = bench.rows
    report.add(f"### {size:,} offers, {db}", "")
    if bench.note:
        report.add(f"Note: {bench.note}.", "")
    if bench.warm_s:
        report.add(
            f"Each scrape landing's warm (the ingesting worker, before its commit): "
            f"{', '.join(f'{w:.2f} s' for w in bench.warm_s)}.",
            "",
        )
    table = []
    for r in rows:
        table.append([
            r.filter + (" (workload)" if r.workload else ""),
            r.api.cell(),
            r.page.cell(),
            f"{r.sql.p50_ms:.2f} / {r.sql.p95_ms:.2f}",
            ("-" if r.api.missing else f"{r.api_ratio:.0f}x")
            + " / "
            + ("-" if r.page.missing else f"{r.page_ratio:.0f}x"),
            f"{r.api.rows if r.api.rows is not None else '-'} / {r.sql.rows}",
            f"{r.api.n} / {r.page.n} / {r.sql.n}",
            r.api_cold.cell(),
            r.page_cold.cell(),
        ])  # fmt: skip
    report.table(
        ["filter", "/api/offers p50 / p95 ms", "/ p50 / p95 ms", "raw SQL p50 / p95 ms",
         "api / page vs SQL (p50)", "rows api / SQL", "samples",
         "cold /api/offers p50 / max ms", "cold / p50 / max ms"],
        table,
    )  # fmt: skip


def _load_test_section(report: Report, results: list[ConcurrencyResult], size: int) -> None:
    report.add("## Concurrency (second process, loopback, 2 uvicorn workers, Postgres)", "")
    if not results:
        report.add("(not run)", "")
        return
    r0 = results[0]
    report.add(
        f"`{r0.tool}`, {r0.connections} connections, {r0.duration_s:.0f} s closed loop per mix "
        f"against `gpufit serve --no-scheduler --workers 2` on 127.0.0.1 with {size:,} offers; "
        "the requests cycle through the mix's paths (the filter sets on /api/offers and on /).",
        "",
    )
    report.table(
        ["mix", "page cache", "requests", "failed", "requests/s", "p50 ms", "p95 ms", "p99 ms",
         "all paths 200 first", "data-version bumps (scrapes landed)"],
        [[r.mix, "on" if r.page_cache else "off", f"{r.requests:,}", f"{r.failures}",
          f"{r.rps:.1f}", f"{r.p50_ms:.1f}", f"{r.p95_ms:.1f}", f"{r.p99_ms:.1f}",
          "yes" if r.checked_ok else "**no**", f"{r.bumps}"]
         for r in results],
    )  # fmt: skip
    report.add(
        "Page cache: app.web.page_cache keeps each rendered view of `/` and `/api/offers` for "
        "GPUFIT_PAGE_CACHE_SECONDS (30 s) within one data version (on, as deployed); off, every "
        "request builds its view (GPUFIT_PAGE_CACHE_SECONDS=0). The latency tables above run "
        "with it off: they time building a view, which each view's first visitor waits for.",
        "",
    )
    shared = all(r.paths == r0.paths for r in results)
    for r in results[:1] if shared else results:
        label = "Paths (every mix)" if shared else f"Paths ({r.mix})"
        report.add(f"{label}: " + ", ".join(f"`{p}`" for p in r.paths), "")
        if r.missing:
            report.add(
                "Left out (404, not in the tree): " + ", ".join(f"`{p}`" for p in r.missing), ""
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--no-big", action="store_true", help="skip the 1M point")
    parser.add_argument("--pg-db", help="Postgres database name (default GPUFIT_BENCH_PG_DB)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    config = QUICK if args.quick else FULL
    began = time.perf_counter()
    OUT.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)

    pg_reason = postgres_available()
    dbs = bench_dbs(pg=pg_reason is None, pg_db=args.pg_db)
    pg = next((d for d in dbs if d.is_pg), None)
    stats = generate.sample_stats()
    digest = _determinism_digest()
    assert digest == _determinism_digest(), "the generator is not deterministic"
    print(f"[bench] {config.name}; sample: {stats.records} offers via {stats.parser}")

    res = Results()
    main_size = config.query_sizes[-1]
    pg_main_load_s = 0.0

    def step(name: str) -> None:
        print(f"[bench] {time.perf_counter() - began:6.1f}s {name}", flush=True)

    def attempt(what: str, run: Callable[[], None]) -> None:
        try:
            run()
        except Exception as exc:  # report and go on: one broken part must not hide the rest
            res.errors.append(f"{what}: {exc!r}")
            traceback.print_exc()

    for size in config.query_sizes:
        step(f"reset + bulk load {size:,}")
        for db in dbs:
            reset_db(db)
        load = bulk_load(dbs, size)
        res.loads.append(load)
        if size == main_size and pg is not None:
            pg_main_load_s = load.generate_s + load.load_s["postgres"] + load.analyze_s["postgres"]
        for db in dbs:
            step(f"queries {size:,} {db.name}")
            attempt(
                f"query bench {size:,} {db.name}",
                lambda db=db, size=size: res.queries.append(  # type: ignore[misc]
                    (size, db.name, run_query_bench(db, config.repeat, config.cold_samples))
                ),
            )
        if size != main_size:
            continue
        if pg is not None:
            step("pages off the main path")

            def pages() -> None:
                res.pages = run_page_bench(pg, config.page_repeat, cold_samples=config.cold_samples)

            attempt("page bench", pages)
            mixes = (
                ("all ten paths", None, True),
                ("all ten paths", None, False),
                (f"all ten paths, a scrape lands every {SCRAPE_EVERY_S:g} s", SCRAPE_EVERY_S, True),
            )
            for mix, bump_every, cache in mixes:
                step(f"concurrency: {mix}, page cache {'on' if cache else 'off'}")
                attempt(
                    f"concurrency ({mix})",
                    lambda mix=mix, bump_every=bump_every, cache=cache: res.concurrency.append(  # type: ignore[misc]
                        run_load_bench(
                            pg,
                            mix=mix,
                            duration=config.load_seconds,
                            connections=config.load_connections,
                            paths=load_paths(),
                            bump_every_s=bump_every,
                            page_cache=cache,
                        )
                    ),
                )
            scrape_mix = (
                f"{config.scrape_load_connections} connections, real scrapes every "
                f"{SCRAPE_LOAD_EVERY_S:g} s from the workers' own scheduler"
            )
            # As deployed (page cache on: the target).
            for cache in (True,):
                step(f"concurrency: {scrape_mix}, page cache {'on' if cache else 'off'}")
                attempt(
                    f"concurrency ({scrape_mix})",
                    lambda mix=scrape_mix, cache=cache: res.concurrency.append(  # type: ignore[misc]
                        run_scrape_load_bench(
                            pg,
                            mix=mix,
                            duration=config.scrape_load_seconds,
                            connections=config.scrape_load_connections,
                            scrape_every_s=SCRAPE_LOAD_EVERY_S,
                            paths=load_paths(),
                            page_cache=cache,
                        )
                    ),
                )
            if config.diagnose:
                step("diagnose slow endpoints")
                res.diagnoses = _diagnose(pg, res.queries, size, res.errors)
        for db in dbs:
            step(f"ingest {db.name}")
            res.ingests.append(run_ingest_bench(db, size, config.scrape))
        if pg is not None:
            step(f"scrape with {config.saved:,} saved searches")

            def saved() -> None:
                res.saved = run_saved_scrape_bench(
                    pg.url, scrape=config.scrape, saved=config.saved, distinct=config.distinct
                )

            attempt("saved-search scrape bench", saved)

    if config.big and not args.no_big and pg is not None:
        elapsed = time.perf_counter() - began
        projected = pg_main_load_s * config.big / main_size * 1.15 + BIG_QUERY_S
        if elapsed + projected < BUDGET_S:
            step(f"reset + bulk load {config.big:,}, Postgres (projected {projected:.0f} s)")
            reset_db(pg)
            res.loads.append(bulk_load([pg], config.big))
            step(f"queries {config.big:,} postgres")
            attempt(
                f"query bench {config.big:,} postgres",
                lambda: res.queries.append(
                    (
                        config.big or 0,
                        pg.name,
                        run_query_bench(pg, config.big_repeat, config.big_cold_samples),
                    )
                ),
            )
        else:
            res.big_note = (
                f"{config.big:,} offers skipped: projected {projected:.0f} s for generate, load "
                f"and queries after {elapsed:.0f} s would pass the {BUDGET_S // 60}-minute budget"
            )
    elif config.big:
        res.big_note = f"{config.big:,} offers skipped (--no-big or no Postgres)"

    total = time.perf_counter() - began
    step("writing results")
    report = _report(config, args, started, total, stats, digest, pg, pg_reason, res)
    args.out.write_text("\n".join(report.lines) + "\n")
    print("\n".join(report.lines[: 12 + len(report.targets)]))
    print(f"[bench] wrote {args.out} in {total:.0f} s")
    return 1 if res.errors else 0


@dataclass
class Results:
    loads: list[LoadResult] = field(default_factory=list)
    queries: list[tuple[int, str, QueryBench]] = field(default_factory=list)
    ingests: list[IngestResult] = field(default_factory=list)
    concurrency: list[ConcurrencyResult] = field(default_factory=list)
    diagnoses: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pages: PageBench | None = None
    saved: SavedScrapeResult | None = None
    big_note: str | None = None


def _diagnose(
    pg: BenchDb, queries: list[tuple[int, str, QueryBench]], size: int, errors: list[str],
) -> list[str]:  # fmt: skip
    from bench.diagnose import diagnose
    from bench.query_bench import filter_sets

    by_name = {fs.name: fs for fs in filter_sets()}
    out: list[str] = []
    for qsize, db, bench in queries:
        if qsize != size or db != "postgres":
            continue
        slow: list[tuple[float, str]] = []
        for r in bench.rows:
            suffix = f"?{by_name[r.filter].query}" if by_name[r.filter].query else ""
            if r.api.p95_ms > TARGET_API_P95_MS:
                slow.append((r.api.p95_ms, f"/api/offers{suffix}"))
            if r.page.p95_ms > TARGET_PAGE_P95_MS:
                slow.append((r.page.p95_ms, f"/{suffix}"))
        for _, path in sorted(slow, reverse=True)[:6]:  # the slowest first
            try:
                d = diagnose(pg, path, runs=1)
            except Exception as exc:
                errors.append(f"diagnose {path}: {exc!r}")
                continue
            out.append(f"### `{path}`: {d.request_ms:.0f} ms in-process, {len(d.statements)} "
                       f"SQL statements taking {d.sql_ms:.0f} ms")  # fmt: skip
            out.append("")
            out.append("| ms | statement |")
            out.append("|---|---|")
            for s in sorted(d.statements, key=lambda s: -s.ms)[:6]:
                sql = " ".join(s.sql.split())
                out.append(f"| {s.ms:.1f} | `{sql[:260]}{'...' if len(sql) > 260 else ''}` |")
            out.append("")
            if d.slowest_plan:
                out.append("Plan of the slowest statement:")
                out.append("")
                out.append("```")
                out.extend(d.slowest_plan[:25])
                out.append("```")
                out.append("")
            out.append("<details><summary>cProfile (cumulative)</summary>")
            out.append("")
            out.append("```")
            out.extend(d.profile_top)
            out.append("```")
            out.append("</details>")
            out.append("")
    return out


def _report(
    config: Config, args: argparse.Namespace, started: datetime, total: float,
    stats: generate.SampleStats, digest: str, pg: BenchDb | None, pg_reason: str | None,
    res: Results,
) -> Report:  # fmt: skip
    report = Report()
    main_size = config.query_sizes[-1]
    cmd = "python -m bench.run " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "make bench"
    report.add("# gpufit benchmark results", "")
    report.add(f"- date: {started:%Y-%m-%d %H:%M} UTC; run took {total:.0f} s ({config.name})")
    report.add(f"- command: `{cmd}`" + ("" if args.quick else " (= `python -m bench.run`)"))
    info = machine_info(psycopg_dsn(pg.url) if pg else None)
    report.add("- machine: " + "; ".join(f"{k} {v}" for k, v in info.items()))
    if pg is None:
        report.add(f"- Postgres: not reachable ({pg_reason}); SQLite only")
    report.add(
        f"- data: {stats.records} real sample offers ({len(stats.profiles)} providers) via "
        f"{stats.parser}; generator seed {generate.SEED}, digest of the first 2,000 offers "
        f"`{digest}` (same on every run)",
        "",
    )

    _targets(report, config, args, total, res)
    report.add("## Targets", "")
    report.table(["target", "measured", ""], [list(t) for t in report.targets])
    if res.errors:
        report.add("## Errors", "", *(f"- {e}" for e in res.errors), "")

    _load_section(report, res.loads)
    if res.big_note:
        report.add(f"Note: {res.big_note}.", "")
    elif config.big and not args.no_big:
        report.add(
            f"Note: at {config.big:,} offers only Postgres is loaded and queried (SQLite's 1M load "
            "alone takes ~3 minutes); concurrency, pages and ingest run at the main size only, "
            "to keep the run under 15 minutes.",
            "",
        )
    report.add(
        "History volume: every offer has its first-seen point; "
        f"{generate.VOLATILE_FRACTION:.0%} (marketplace-like re-pricing) also get a point every "
        f"{generate.HISTORY_STEP_HOURS[0]:g}-{generate.HISTORY_STEP_HOURS[1]:g} h over up to "
        f"{generate.HISTORY_DAYS} days; half the offers span the whole window, "
        f"{generate.INACTIVE_FRACTION:.0%} are inactive. Providers are cloned per "
        f"{generate.OFFERS_PER_PROVIDER_CLONE:,} offers. The GPU pages' per-scrape price "
        "snapshots (gpu_price_points) cover the same 30 days: one per provider and GPU model "
        "every hour for marketplaces, every 6 h for list-price clouds.",
        "",
    )
    _ingest_section(report, res.ingests)
    _saved_section(report, res.saved)
    report.add("## Query latency (real uvicorn, sequential requests, vs raw SQL)", "")
    report.add(
        "`gpufit serve --no-scheduler` (1 worker, page cache off) on 127.0.0.1; httpx, one "
        f"keep-alive connection, 2 warm-up requests, then up to {config.repeat} requests per "
        "cell (fewer, at least 5, once a cell passes 6 s; one warm-up when the first request "
        "takes over 1 s). The raw SQL is what the endpoint needs at minimum for the same filter "
        "and sort (the page of 50 rows joined to providers and GPU models, plus the total "
        "count), run on a driver connection; for workload filters it is the fit ranking's "
        "VRAM prefilter (app.queries `vram_bounds`: per-GPU and total VRAM lower bounds) "
        "sorted by $/GPU-h. Ratio = endpoint p50 / SQL p50. The cached aggregates "
        "(app.store.data_cache: counts, facets, machine shapes) make repeated requests cheap until "
        "the next ingest; the *cold* columns are the first request after one: a scrape lands "
        f"({config.cold_samples} times; {config.big_cold_samples} at {config.big or 0:,} offers) "
        "as the scrape runner lands one (a new data-version token, and its before-commit hook "
        "warming the views people opened, app.web.warm, in the same transaction), then every "
        "cell's path is requested once.",
        "",
    )
    for size, db, bench in res.queries:
        _query_section(report, size, db, bench)
    _pages_section(report, res.pages, config, main_size)
    _load_test_section(report, res.concurrency, main_size)
    if res.diagnoses:
        report.add(
            "## Where the slow requests spend their time (Postgres, "
            f"{main_size:,} offers, in-process)",
            "",
            *res.diagnoses,
        )
    return report


def _worst(cells: list[tuple[str, QueryRow, str]]) -> tuple[str, float]:
    name, row, attr = max(cells, key=lambda c: getattr(c[1], c[2]).p95_ms)
    return name, getattr(row, attr).p95_ms


def _query_targets(
    report: Report, size: int, rows: list[QueryRow], api_ms: float, page_ms: float
) -> None:
    for label, warm_attr, cold_attr, target in (
        ("/api/offers", "api", "api_cold", api_ms),
        ("/", "page", "page_cold", page_ms),
    ):
        for when, attr in (("warm", warm_attr), ("first after a scrape (warmed)", cold_attr)):
            timings = [(r.filter, getattr(r, attr)) for r in rows]
            if all(t.missing for _, t in timings):
                continue
            worst_name, worst = max(timings, key=lambda x: x[1].p95_ms)
            bad = [f for f, t in timings if t.p95_ms >= target or t.failures]
            tail = "p95" if when == "warm" else "max"
            report.targets.append((
                f"{label} {tail} < {target:.0f} ms at {size:,} offers, {when} (Postgres)",
                f"worst {worst.p95_ms:.0f} ms ({worst_name})"
                + (f"; over: {', '.join(bad)}" if bad else ""),
                _ok(not bad),
            ))  # fmt: skip


def _targets(
    report: Report, config: Config, args: argparse.Namespace, total: float, res: Results
) -> None:
    main_size = config.query_sizes[-1]
    pg_ingest = next((r for r in res.ingests if r.db == "postgres"), None)
    if pg_ingest:
        report.targets.append((
            f"ingest of a {pg_ingest.scrape:,}-offer scrape < {TARGET_INGEST_S:.0f} s (Postgres)",
            f"first scrape {pg_ingest.ingest_insert_s:.2f} s; re-scrape "
            f"{pg_ingest.ingest_update_s:.2f} s",
            _ok(max(pg_ingest.ingest_insert_s, pg_ingest.ingest_update_s) < TARGET_INGEST_S),
        ))  # fmt: skip
    for size, db, bench in res.queries:
        if db != "postgres" or size not in (main_size, config.big):
            continue
        big = size == config.big
        _query_targets(
            report,
            size,
            bench.rows,
            TARGET_BIG_API_P95_MS if big else TARGET_API_P95_MS,
            TARGET_BIG_PAGE_P95_MS if big else TARGET_PAGE_P95_MS,
        )
    if res.pages is not None:
        pages = res.pages
        for kind, target in (("page", TARGET_PAGE_P95_MS), ("api", TARGET_API_P95_MS)):
            rows = [r for r in pages.rows if r.kind == kind]
            worst = max(rows, key=lambda r: max(r.warm.p95_ms, r.cold.p95_ms if r.cold else 0))
            worst_ms = max(worst.warm.p95_ms, worst.cold.p95_ms if worst.cold else 0)
            bad = [r.name for r in rows if not r.met]
            report.targets.append((
                f"every other {'page' if kind == 'page' else '/api/...'} p95 < {target:.0f} ms "
                f"at {main_size:,} offers, warm and first after a scrape (Postgres)",
                f"worst {worst_ms:.0f} ms ({worst.name})"
                + (f"; over: {', '.join(bad)}" if bad else ""),
                _ok(not bad),
            ))  # fmt: skip
        gpu = next((r for r in pages.rows if r.path.startswith("/gpus/")), None)
        if gpu is not None:
            report.targets.append((
                f"GPU page < {TARGET_GPU_PAGE_BYTES // 1000} kB",
                f"{gpu.size_bytes / 1000:.0f} kB ({gpu.wire_bytes / 1000:.0f} kB gzipped)",
                _ok(gpu.size_bytes < TARGET_GPU_PAGE_BYTES),
            ))  # fmt: skip
        if pages.export is not None:
            e = pages.export
            report.targets.append((
                f"full CSV export in one request < {TARGET_EXPORT_S:.0f} s, server RSS growth "
                f"< {TARGET_EXPORT_RSS_MB:.0f} MB",
                f"{e.rows:,} rows in {e.seconds:.2f} s; RSS +{e.growth_mb:.1f} MB",
                _ok(e.seconds < TARGET_EXPORT_S and e.growth_mb < TARGET_EXPORT_RSS_MB),
            ))  # fmt: skip
    if res.saved is not None:
        r = res.saved
        report.targets.append((
            f"post-scrape work with {r.saved:,} saved searches ({r.distinct:,} distinct) "
            f"< {TARGET_POST_SCRAPE_S:.0f} s, ingest unchanged",
            f"{r.saved_statements} statements on saved searches; the whole post-ingest work "
            f"(warming) worst {max(r.warm_s):.2f} s of {len(r.warm_s)} scrapes; ingest median "
            f"{median(r.ingest_s):.2f} s vs {median(r.baseline_ingest_s):.2f} s without saved "
            "searches",
            _ok(r.saved_statements == 0 and max(r.warm_s) < TARGET_POST_SCRAPE_S),
        ))  # fmt: skip
    if res.concurrency:
        failures = sum(c.failures for c in res.concurrency)
        requests = sum(c.requests for c in res.concurrency)
        report.targets.append((
            "no failed request under concurrent load",
            f"{failures} of {requests:,} failed",
            _ok(failures == 0 and all(c.checked_ok for c in res.concurrency)),
        ))  # fmt: skip
    scrape_load = next(
        (c for c in res.concurrency if "real scrapes" in c.mix and c.page_cache), None
    )
    if scrape_load is not None:
        report.targets.append((
            f"{scrape_load.connections} connections for {scrape_load.duration_s:.0f} s on 2 "
            f"workers with a scrape landing every {SCRAPE_LOAD_EVERY_S:g} s: 0 failed, "
            f"p95 < {TARGET_SCRAPE_LOAD_P95_MS / 1000:g} s",
            f"{scrape_load.failures} of {scrape_load.requests:,} failed; p95 "
            f"{scrape_load.p95_ms:.0f} ms; {scrape_load.bumps} scrapes landed, "
            f"{scrape_load.scrapes_failed} failed",
            _ok(
                scrape_load.failures == 0
                and scrape_load.scrapes_failed == 0
                and scrape_load.bumps > 0
                and scrape_load.p95_ms < TARGET_SCRAPE_LOAD_P95_MS
            ),
        ))  # fmt: skip
    if not args.quick:
        report.targets.append(("full run < 15 min", f"{total / 60:.1f} min", _ok(total < 900)))


def _saved_section(report: Report, r: SavedScrapeResult | None) -> None:
    report.add("## A scrape with saved searches in the database (Postgres)", "")
    if r is None:
        report.add("(not run)", "")
        return
    report.add(
        f"{r.saved:,} saved searches of {r.distinct:,} distinct views (three per browser) in the "
        f"database; {len(r.ingest_s)} re-scrapes of the {r.scrape:,}-offer provider (each "
        "re-pricing 20 %) run as the scrape runner runs them: `ingest_records`, the before-commit "
        "warm (app.web.warm), commit. The baseline is as many re-scrapes of the same kind before "
        "the saved searches were inserted.",
        "",
    )

    def seconds(values: list[float]) -> str:
        return f"{median(values):.2f} s ({', '.join(f'{v:.2f}' for v in values)})"

    report.table(
        ["", "median seconds (each scrape) / count"],
        [
            ["ingest + commit, no saved searches", seconds(r.baseline_ingest_s)],
            [f"ingest + commit, {r.saved:,} saved searches", seconds(r.ingest_s)],
            ["post-ingest work (warming the views people open)", seconds(r.warm_s)],
            ["statements sent during the scrapes", f"{r.statements}"],
            ["... of which touch a saved-search table", f"{r.saved_statements}"],
        ],
    )


def _pages_section(report: Report, pages: PageBench | None, config: Config, size: int) -> None:
    report.add(f"## Pages off the main path ({size:,} offers, Postgres)", "")
    if pages is None:
        report.add("(not run)", "")
        return
    report.add(
        f"Same server and client as above; {config.page_repeat} sequential requests per path "
        f"after 2 warm-ups, then {config.cold_samples} scrapes landing (warmed as above), each "
        f"followed by one request per path. /saved is one browser's {pages.saved} saved "
        "searches (views, ranked jobs among them); after each scrape it brings up to date the "
        "views its time budget allows and hands the rest to the background. Sizes: the body "
        "as read, and on the wire (gzip).",
        "",
    )
    report.table(
        ["request", "kind", "p50 / p95 ms", "first after a scrape p50 / max ms", "size / gzip",
         "target", ""],
        [[f"{r.name} `{r.path[:70]}`", r.kind, f"{r.warm.p50_ms:.1f} / {r.warm.p95_ms:.1f}",
          r.cold.cell() if r.cold else "-",
          f"{r.size_bytes / 1000:.0f} / {r.wire_bytes / 1000:.0f} kB",
          f"< {r.target_ms:.0f} ms", _ok(r.met)]
         for r in pages.rows],
    )  # fmt: skip
    if pages.export is not None:
        e = pages.export
        report.add(
            f"Full CSV export (`/export/offers.csv`, every current offer in one request, "
            f"streamed from a server-side cursor): {e.rows:,} rows, {e.size_bytes / 1e6:.1f} MB "
            f"in {e.seconds:.2f} s; server RSS {e.rss_before_mb:.0f} MB before, "
            f"{e.rss_peak_mb:.0f} MB at its peak while streaming (+{e.growth_mb:.1f} MB).",
            "",
        )


if __name__ == "__main__":
    sys.exit(main())
