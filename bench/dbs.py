"""The bench's own databases (SQLite file under bench/out/, Postgres `gpufit_bench`) and bulk load.

Both names are settings: GPUFIT_BENCH_PG_DB (or `python -m bench.run --pg-db NAME`) names the
Postgres database, whose size variants add a suffix (`_1m`), and GPUFIT_BENCH_PG_ADMIN_URL the
server; the SQLite files live in this checkout's bench/out/. Two benches on one server must use
different names: each drops and re-creates its databases.

Bulk load writes the offers table and the price history straight through the driver: Postgres
`COPY ... FROM STDIN` (psycopg `cursor.copy`), SQLite `executemany` in one transaction. Ids are
assigned by the loader (offers 1..n, history 1..m) and the Postgres sequences are moved past them.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from itertools import islice
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.gpus.catalog import load_catalog
from app.pipeline.catalog_sync import sync_gpu_catalog
from app.pipeline.ingest import offer_values
from app.records import OfferRecord
from app.store.data_cache import bump_data_version
from app.store.db import make_engine, make_session_factory, session_scope
from app.store.migrate import upgrade
from app.store.models import Provider
from bench.generate import (
    SEED,
    SyntheticOffer,
    generate_offers,
    gpu_price_points,
    history_points,
)

OUT = Path(__file__).resolve().parent / "out"
PG_ADMIN_URL = os.environ.get(
    "GPUFIT_BENCH_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
PG_DB = os.environ.get("GPUFIT_BENCH_PG_DB", "gpufit_bench")
BENCH_SOURCE = "bench"

OFFER_COLUMNS = (
    "id", "provider_id", "source", "instance_type", "region", "continent", "spot",
    "gpu_model_slug", "gpu_raw_name", "gpu_count", "vram_gib_per_gpu", "vram_gib_total", "vcpus",
    "ram_gib", "disk_gib", "interconnect", "network", "network_gbps", "price_per_hour",
    "spot_price_per_hour", "price_per_gpu_hour", "currency", "billing", "availability",
    "availability_count", "first_seen", "last_seen", "active",
)  # fmt: skip
HISTORY_COLUMNS = (
    "id", "offer_id", "observed_at", "price_per_hour", "spot_price_per_hour", "availability",
    "availability_count",
)  # fmt: skip
_DT_POS_OFFER = (OFFER_COLUMNS.index("first_seen"), OFFER_COLUMNS.index("last_seen"))
_BOOL_POS_OFFER = (OFFER_COLUMNS.index("spot"), OFFER_COLUMNS.index("active"))

Row = tuple[Any, ...]


@dataclass(frozen=True)
class BenchDb:
    name: str  # "sqlite" | "postgres"
    url: str  # SQLAlchemy URL

    @property
    def is_pg(self) -> bool:
        return self.name == "postgres"


def pg_url(database: str = PG_DB) -> str:
    return make_url(PG_ADMIN_URL).set(database=database).render_as_string(hide_password=False)


def psycopg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def postgres_available() -> str | None:
    """None when the bench can reach Postgres, else the reason it cannot."""
    try:
        with psycopg.connect(psycopg_dsn(PG_ADMIN_URL), connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return str(exc).splitlines()[0]


def reset_db(db: BenchDb) -> None:
    """Empty database at head with the GPU catalog synced."""
    if db.is_pg:
        database = make_url(db.url).database
        assert database and database != "test", "the bench never touches the test database"
        admin = make_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
            conn.execute(text(f'CREATE DATABASE "{database}"'))
        admin.dispose()
    else:
        path = Path(make_url(db.url).database or "")
        path.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    upgrade(db.url)
    engine = make_engine(db.url)
    with session_scope(make_session_factory(engine)) as session:
        sync_gpu_catalog(session)
    engine.dispose()


@contextmanager
def scrape_landing(db: BenchDb, *, warm: bool = True) -> Iterator[Callable[[], float]]:
    """Yields a function that does to the app's caches what every scrape does: a new
    data-version token (app.store.data_cache.bump_data_version) and, as the scrape runner's
    before-commit hook does (app.web.warm), the new version's views warmed, in one transaction.
    It returns the warm's seconds (0 with `warm=False`)."""
    from app.core.settings import Settings
    from app.web.warm import warm_data_version

    engine = make_engine(db.url)
    sessions = make_session_factory(engine)
    settings = Settings(database_url=db.url, _env_file=None)

    def land() -> float:
        with session_scope(sessions) as session:
            bump_data_version(session)
            session.flush()
            if not warm:
                return 0.0
            return warm_data_version(session, settings).seconds

    try:
        yield land
    finally:
        engine.dispose()


def bench_dbs(pg: bool, tag: str = "", *, pg_db: str | None = None) -> list[BenchDb]:
    dbs = [BenchDb("sqlite", f"sqlite:///{OUT / f'bench{tag}.db'}")]
    if pg:
        dbs.append(BenchDb("postgres", pg_url((pg_db or PG_DB) + tag)))
    return dbs


@cache
def known_gpus() -> frozenset[str]:
    return frozenset(load_catalog())


def offer_row(
    offer_id: int,
    record: OfferRecord,
    first_seen: datetime,
    last_seen: datetime,
    active: bool,
    source: str = BENCH_SOURCE,
) -> Row:
    v = offer_values(record, known_gpus())
    return (
        offer_id, record.provider, source, record.instance_type, record.region, v["continent"],
        record.spot, v["gpu_model_slug"], v["gpu_raw_name"], v["gpu_count"],
        v["vram_gib_per_gpu"], v["vram_gib_total"], v["vcpus"], v["ram_gib"], v["disk_gib"],
        v["interconnect"], v["network"], v["network_gbps"], v["price_per_hour"],
        v["spot_price_per_hour"], v["price_per_gpu_hour"], v["currency"], v["billing"],
        v["availability"], v["availability_count"], first_seen, last_seen, active,
    )  # fmt: skip


def sqlite_dt(value: datetime) -> str:
    """SQLAlchemy's SQLite DATETIME storage format (UTC, no offset)."""
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")


def sqlite_offer_row(row: Row) -> Row:
    out = list(row)
    for i in _DT_POS_OFFER:
        out[i] = sqlite_dt(out[i])
    for i in _BOOL_POS_OFFER:
        out[i] = int(out[i])
    return tuple(out)


def sqlite_history_row(row: Row) -> Row:
    return (row[0], row[1], sqlite_dt(row[2]), *row[3:])


def sqlite_gpu_price_row(row: Row) -> Row:
    return (row[0], row[1], sqlite_dt(row[2]), *row[3:])


GPU_PRICE_COLUMNS = (
    "gpu_model_slug", "provider_id", "observed_at", "min_price_per_gpu", "max_price_per_gpu",
    "offers",
)  # fmt: skip


class Writer:
    """Bulk writer for one database, in one transaction; `close()` commits."""

    def __init__(self, db: BenchDb) -> None:
        self.db = db
        self.seconds = 0.0
        if db.is_pg:
            self.pg: psycopg.Connection[Any] | None = psycopg.connect(psycopg_dsn(db.url))
            self.lite: sqlite3.Connection | None = None
        else:
            self.pg = None
            self.lite = sqlite3.connect(make_url(db.url).database or "", isolation_level=None)
            self.lite.execute("PRAGMA foreign_keys=ON")
            self.lite.execute("PRAGMA journal_mode=WAL")
            self.lite.execute("BEGIN")

    def providers(self, names: Iterable[str]) -> None:
        rows = [(n, n, datetime.now().astimezone()) for n in sorted(set(names))]
        if self.pg is not None:
            self.pg.cursor().executemany(
                "INSERT INTO providers (id, display_name, created_at) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                rows,
            )
        else:
            assert self.lite is not None
            self.lite.executemany(
                "INSERT OR IGNORE INTO providers (id, display_name, created_at) VALUES (?, ?, ?)",
                [(a, b, sqlite_dt(c)) for a, b, c in rows],
            )

    def write(self, table: str, columns: Sequence[str], rows: Sequence[Row]) -> None:
        start = time.perf_counter()
        converters = {
            "offers": sqlite_offer_row,
            "price_history": sqlite_history_row,
            "gpu_price_points": sqlite_gpu_price_row,
        }
        if self.pg is not None:
            with self.pg.cursor() as cur:
                with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
        else:
            assert self.lite is not None
            convert = converters[table]
            marks = ", ".join("?" * len(columns))
            self.lite.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
                [convert(r) for r in rows],
            )
        self.seconds += time.perf_counter() - start

    def close(self) -> None:
        start = time.perf_counter()
        if self.pg is not None:
            with self.pg.cursor() as cur:
                for table in ("offers", "price_history"):
                    cur.execute(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"(SELECT coalesce(max(id), 0) + 1 FROM {table}), false)"
                    )
            self.pg.commit()
            self.pg.close()
        else:
            assert self.lite is not None
            self.lite.execute("COMMIT")
            self.lite.close()
        self.seconds += time.perf_counter() - start


def analyze(db: BenchDb) -> float:
    start = time.perf_counter()
    if db.is_pg:
        with psycopg.connect(psycopg_dsn(db.url), autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
    else:
        with sqlite3.connect(make_url(db.url).database or "") as conn:
            conn.execute("ANALYZE")
    return time.perf_counter() - start


@dataclass
class LoadResult:
    offers: int
    history: int
    providers: int
    generate_s: float
    gpu_points: int = 0  # gpu_price_points rows (the GPU pages' per-scrape snapshots)
    load_s: dict[str, float] = field(default_factory=dict)
    analyze_s: dict[str, float] = field(default_factory=dict)


def bulk_load(
    dbs: Sequence[BenchDb], n: int, *, seed: int = SEED, chunk: int = 20_000
) -> LoadResult:
    """Generate `n` offers plus history and bulk-load them into every (freshly reset) db.

    Generation (records and history rows) is timed apart from each database's writes.
    """
    result = LoadResult(offers=0, history=0, providers=0, generate_s=0.0)
    # (provider, GPU) -> (cheapest, dearest on-demand price per GPU-hour, offers) now listed
    pairs: dict[tuple[str, str], tuple[float, float, int]] = {}
    writers = [Writer(db) for db in dbs]
    providers: set[str] = set()
    hist_rng = random.Random(seed + 100)
    offers = generate_offers(n, seed=seed)
    next_offer, next_point = 1, 1
    while True:
        start = time.perf_counter()
        batch: list[SyntheticOffer] = list(islice(offers, chunk))
        if not batch:
            break
        offer_rows: list[Row] = []
        history_rows: list[Row] = []
        for syn in batch:
            row = offer_row(next_offer, syn.record, syn.first_seen, syn.last_seen, syn.active)
            offer_rows.append(row)
            slug, per_gpu = row[7], syn.record.price_per_gpu_hour
            if syn.active and slug is not None and per_gpu is not None:
                low, high, n_pair = pairs.get((syn.record.provider, slug), (per_gpu, per_gpu, 0))
                pairs[(syn.record.provider, slug)] = (
                    min(low, per_gpu),
                    max(high, per_gpu),
                    n_pair + 1,
                )
            for point in history_points(syn, hist_rng):
                history_rows.append((next_point, next_offer, *point))
                next_point += 1
            next_offer += 1
        new_providers = {s.record.provider for s in batch} - providers
        providers |= new_providers
        result.generate_s += time.perf_counter() - start
        for w in writers:
            if new_providers:
                w.providers(new_providers)
            w.write("offers", OFFER_COLUMNS, offer_rows)
            w.write("price_history", HISTORY_COLUMNS, history_rows)
        result.offers += len(offer_rows)
        result.history += len(history_rows)
    start = time.perf_counter()
    points = list(gpu_price_points(pairs, seed=seed + 3))
    result.generate_s += time.perf_counter() - start
    for i in range(0, len(points), chunk):
        for w in writers:
            w.write("gpu_price_points", GPU_PRICE_COLUMNS, points[i : i + chunk])
    result.gpu_points = len(points)
    for w in writers:
        w.close()
        result.load_s[w.db.name] = w.seconds
    for db in dbs:
        result.analyze_s[db.name] = analyze(db)
    result.providers = len(providers)
    return result


def provider_rows(db: BenchDb) -> int:
    engine = make_engine(db.url)
    with make_session_factory(engine)() as session:
        count = session.query(Provider).count()
    engine.dispose()
    return count
