"""Run the whole benchmark and write bench/results.md.

    python -m bench.run            # full run (make bench): 10k, 100k and, if it fits, 1M offers
    python -m bench.run --quick    # smoke test, small sizes, < 60 s

Databases: a SQLite file under bench/out/ and the Postgres database `gpufit_bench` (dropped and
re-created; GPUFIT_BENCH_PG_ADMIN_URL / GPUFIT_BENCH_PG_DB override the server and name). Without a
reachable Postgres only SQLite runs, and results.md says so.
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
import sys
import time
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path

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
from bench.query_bench import COLD_SAMPLES, QueryRow, run_query_bench

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


@dataclass(frozen=True)
class Config:
    name: str
    query_sizes: tuple[int, ...]  # sizes loaded and queried (the last one is the main size)
    scrape: int  # offers in the ingest bench's provider scrape
    repeat: int  # sequential requests per (filter set, endpoint)
    load_seconds: int
    load_connections: int
    big: int | None  # generate + bulk load only, when it fits the budget
    diagnose: bool
    scrape_load_seconds: int = 60  # the mix with real scrapes landing in the web workers
    scrape_load_connections: int = 64


FULL = Config("full", (10_000, 100_000), 10_000, 30, 25, 8, 1_000_000, True)
QUICK = Config("quick", (2_000,), 1_000, 5, 5, 4, None, False, 10, 16)


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


def _query_section(
    report: Report, size: int, db: str, rows: list[QueryRow], note: str | None
) -> None:
    report.add(f"### {size:,} offers, {db}", "")
    if note:
        report.add(f"Note: {note}.", "")
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
        ["mix", "requests", "failed", "requests/s", "p50 ms", "p95 ms", "p99 ms",
         "all paths 200 first", "data-version bumps (scrapes landed)"],
        [[r.mix, f"{r.requests:,}", f"{r.failures}", f"{r.rps:.1f}", f"{r.p50_ms:.1f}",
          f"{r.p95_ms:.1f}", f"{r.p99_ms:.1f}", "yes" if r.checked_ok else "**no**",
          f"{r.bumps}"]
         for r in results],
    )  # fmt: skip
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
    parser.add_argument("--no-big", action="store_true", help="skip the 1M generate + load")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    config = QUICK if args.quick else FULL
    began = time.perf_counter()
    OUT.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)

    pg_reason = postgres_available()
    dbs = bench_dbs(pg=pg_reason is None)
    pg = next((d for d in dbs if d.is_pg), None)
    stats = generate.sample_stats()
    digest = _determinism_digest()
    assert digest == _determinism_digest(), "the generator is not deterministic"
    print(f"[bench] {config.name}; sample: {stats.records} offers via {stats.parser}")

    loads: list[LoadResult] = []
    queries: list[tuple[int, str, list[QueryRow], str | None]] = []
    ingests: list[IngestResult] = []
    concurrency: list[ConcurrencyResult] = []
    diagnoses: list[str] = []
    errors: list[str] = []
    main_size = config.query_sizes[-1]
    main_load_s = 0.0

    def step(name: str) -> None:
        print(f"[bench] {time.perf_counter() - began:6.1f}s {name}", flush=True)

    for size in config.query_sizes:
        step(f"reset + bulk load {size:,}")
        t = time.perf_counter()
        for db in dbs:
            reset_db(db)
        loads.append(bulk_load(dbs, size))
        if size == main_size:
            main_load_s = time.perf_counter() - t
        for db in dbs:
            step(f"queries {size:,} {db.name}")
            try:
                rows, note = run_query_bench(db, config.repeat)
                queries.append((size, db.name, rows, note))
            except Exception as exc:  # report and go on: the endpoints are someone else's code
                errors.append(f"query bench {size:,} {db.name}: {exc!r}")
                traceback.print_exc()
        if size != main_size:
            continue
        if pg is not None:
            mixes = (
                ("all ten paths", None),
                (f"all ten paths, a scrape lands every {SCRAPE_EVERY_S:g} s", SCRAPE_EVERY_S),
            )
            for mix, bump_every in mixes:
                step(f"concurrency: {mix}")
                try:
                    concurrency.append(
                        run_load_bench(
                            pg,
                            mix=mix,
                            duration=config.load_seconds,
                            connections=config.load_connections,
                            paths=load_paths(),
                            bump_every_s=bump_every,
                        )
                    )
                except Exception as exc:
                    errors.append(f"concurrency ({mix}): {exc!r}")
                    traceback.print_exc()
            scrape_mix = (
                f"{config.scrape_load_connections} connections, real scrapes every "
                f"{SCRAPE_LOAD_EVERY_S:g} s from the workers' own scheduler"
            )
            step(f"concurrency: {scrape_mix}")
            try:
                concurrency.append(
                    run_scrape_load_bench(
                        pg,
                        mix=scrape_mix,
                        duration=config.scrape_load_seconds,
                        connections=config.scrape_load_connections,
                        scrape_every_s=SCRAPE_LOAD_EVERY_S,
                        paths=load_paths(),
                    )
                )
            except Exception as exc:
                errors.append(f"concurrency ({scrape_mix}): {exc!r}")
                traceback.print_exc()
            if config.diagnose:
                step("diagnose slow endpoints")
                diagnoses = _diagnose(pg, queries, size, errors)
        for db in dbs:
            step(f"ingest {db.name}")
            ingests.append(run_ingest_bench(db, size, config.scrape))

    big_note = None
    if config.big and not args.no_big:
        elapsed = time.perf_counter() - began
        projected = main_load_s * config.big / main_size * 1.15
        if elapsed + projected < BUDGET_S:
            step(f"reset + bulk load {config.big:,} (projected {projected:.0f} s)")
            for db in dbs:
                reset_db(db)
            loads.append(bulk_load(dbs, config.big))
        else:
            big_note = (
                f"{config.big:,} offers skipped: projected {projected:.0f} s for generate + load "
                f"after {elapsed:.0f} s would pass the {BUDGET_S // 60}-minute budget"
            )
    elif config.big:
        big_note = f"{config.big:,} offers skipped (--no-big)"

    total = time.perf_counter() - began
    step("writing results")
    report = _report(
        config, args, started, total, stats, digest, pg, pg_reason, loads, ingests, queries,
        concurrency, diagnoses, big_note, errors,
    )  # fmt: skip
    args.out.write_text("\n".join(report.lines) + "\n")
    print("\n".join(report.lines[: 12 + len(report.targets)]))
    print(f"[bench] wrote {args.out} in {total:.0f} s")
    return 1 if errors else 0


def _diagnose(
    pg: BenchDb, queries: list[tuple[int, str, list[QueryRow], str | None]], size: int,
    errors: list[str],
) -> list[str]:  # fmt: skip
    from bench.diagnose import diagnose
    from bench.query_bench import filter_sets

    by_name = {fs.name: fs for fs in filter_sets()}
    out: list[str] = []
    for qsize, db, rows, _ in queries:
        if qsize != size or db != "postgres":
            continue
        slow: list[tuple[float, str]] = []
        for r in rows:
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
    loads: list[LoadResult], ingests: list[IngestResult],
    queries: list[tuple[int, str, list[QueryRow], str | None]],
    concurrency: list[ConcurrencyResult], diagnoses: list[str],
    big_note: str | None, errors: list[str],
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

    # Targets
    pg_ingest = next((r for r in ingests if r.db == "postgres"), None)
    if pg_ingest:
        report.targets.append((
            f"ingest of a {pg_ingest.scrape:,}-offer scrape < {TARGET_INGEST_S:.0f} s (Postgres)",
            f"first scrape {pg_ingest.ingest_insert_s:.2f} s; re-scrape "
            f"{pg_ingest.ingest_update_s:.2f} s",
            _ok(max(pg_ingest.ingest_insert_s, pg_ingest.ingest_update_s) < TARGET_INGEST_S),
        ))  # fmt: skip
    for size, db, rows, _ in queries:
        if size != main_size or db != "postgres":
            continue
        for label, attr, target in (
            ("/api/offers", "api", TARGET_API_P95_MS),
            ("/", "page", TARGET_PAGE_P95_MS),
        ):
            timings = [(r.filter, getattr(r, attr)) for r in rows]
            name = f"{label} p95 < {target:.0f} ms at {size:,} offers (Postgres)"
            if all(t.missing for _, t in timings):
                report.targets.append((name, "endpoint not in the tree (404)", "not measured"))
                continue
            worst_name, worst = max(timings, key=lambda x: x[1].p95_ms)
            bad = [f for f, t in timings if t.p95_ms >= target or t.failures]
            failed = sum(t.failures for _, t in timings)
            report.targets.append((
                name,
                f"worst {worst.p95_ms:.0f} ms ({worst_name})"
                + (f"; over: {', '.join(bad)}" if bad else "")
                + (f"; {failed} failed requests" if failed else ""),
                _ok(not bad),
            ))  # fmt: skip
        cold = [
            (r.filter, label, t)
            for r in rows
            for label, t in (("/api/offers", r.api_cold), ("/", r.page_cold))
            if not t.missing
        ]
        if cold:
            f_name, label, worst = max(cold, key=lambda x: x[2].p95_ms)
            report.targets.append((
                f"(no target) first request after an ingest at {size:,} offers (Postgres)",
                f"worst {worst.p95_ms:.0f} ms ({label} {f_name}); median of the worst cell "
                f"{worst.p50_ms:.0f} ms",
                "reported",
            ))  # fmt: skip
    if concurrency:
        failures = sum(c.failures for c in concurrency)
        requests = sum(c.requests for c in concurrency)
        report.targets.append((
            "no failed request under concurrent load",
            f"{failures} of {requests:,} failed",
            _ok(failures == 0 and all(c.checked_ok for c in concurrency)),
        ))  # fmt: skip
    scrape_load = next((c for c in concurrency if "real scrapes" in c.mix), None)
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
    report.add("## Targets", "")
    report.table(["target", "measured", ""], [list(t) for t in report.targets])
    if errors:
        report.add("## Errors", "", *(f"- {e}" for e in errors), "")

    _load_section(report, loads)
    if big_note:
        report.add(f"Note: {big_note}.", "")
    elif config.big and not args.no_big:
        report.add(
            f"Note: at {config.big:,} offers only generation and bulk load run (the query, "
            "concurrency and ingest parts at that size would not fit the 15-minute budget).",
            "",
        )
    report.add(
        "History volume: every offer has its first-seen point; "
        f"{generate.VOLATILE_FRACTION:.0%} (marketplace-like re-pricing) also get a point every "
        f"{generate.HISTORY_STEP_HOURS[0]:g}-{generate.HISTORY_STEP_HOURS[1]:g} h over up to "
        f"{generate.HISTORY_DAYS} days; half the offers span the whole window, "
        f"{generate.INACTIVE_FRACTION:.0%} are inactive. Providers are cloned per "
        f"{generate.OFFERS_PER_PROVIDER_CLONE:,} offers.",
        "",
    )
    _ingest_section(report, ingests)
    report.add("## Query latency (real uvicorn, sequential requests, vs raw SQL)", "")
    report.add(
        "`gpufit serve --no-scheduler` (1 worker) on 127.0.0.1; httpx, one keep-alive "
        f"connection, 2 warm-up requests, then up to {config.repeat} requests per cell (fewer, "
        "at least 5, once a cell passes 6 s; one warm-up when the first request takes over "
        "1 s). The raw SQL is what the endpoint needs at minimum for the same filter and sort "
        "(the page of 50 rows joined to providers and GPU models, plus the total count), run on "
        "a driver connection; for workload filters it is the fit ranking's VRAM prefilter "
        "(app.queries `vram_bounds`: per-GPU and total VRAM lower bounds) "
        "sorted by $/GPU-h. Ratio = endpoint p50 / SQL p50. The cached aggregates "
        "(app.store.data_cache: counts, facets, machine shapes) make repeated requests cheap until "
        "the next ingest; the *cold* columns are the first request after one, measured "
        f"{COLD_SAMPLES} times per cell, each right after the data-version token was changed "
        "as an ingest changes it (fit assessments, pure functions of workload and machine "
        "shape, are kept across ingests as in production).",
        "",
    )
    for size, db, rows, note in queries:
        _query_section(report, size, db, rows, note)
    _load_test_section(report, concurrency, main_size)
    if diagnoses:
        report.add(
            "## Where the slow requests spend their time (Postgres, "
            f"{main_size:,} offers, in-process)",
            "",
            *diagnoses,
        )
    return report


if __name__ == "__main__":
    sys.exit(main())
