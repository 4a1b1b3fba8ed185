"""Ingest throughput: the real `ingest_records` path against a driver-level bulk baseline.

Per database (already holding the base offers), with one synthetic provider scrape of `n` offers
shaped like the sample's vastai listings:

1. baseline insert: COPY (Postgres) / executemany (SQLite) of the same offer rows, plus the
   first-seen history point per offer (INSERT ... SELECT), provider row, commit. Then removed.
2. ingest, first time: `ingest_records` in one session + commit (all offers new).
3. ingest, re-scrape: the same offers, 20 % with a new price (history points for those), commit.
4. baseline upsert: the same kind of re-scrape done set-based: bulk-load a staging table, append
   history for changed rows, UPDATE ... FROM staging, deactivate missing offers, commit.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from app.pipeline.ingest import ingest_records
from app.records import OfferRecord
from app.store.db import make_engine, make_session_factory
from bench.dbs import (
    OFFER_COLUMNS,
    BenchDb,
    Row,
    offer_row,
    psycopg_dsn,
    sqlite_dt,
    sqlite_offer_row,
)
from bench.generate import FIXED_NOW, generate_scrape, reprice

SCRAPE_PROVIDER = "bench-scrape"
SCRAPE_SOURCE = "bench-scrape"
_VALUE_COLUMNS = OFFER_COLUMNS[5:25]  # continent .. availability_count (what a scrape sets)
_KEY = ("provider_id", "instance_type", "region", "spot")
_HISTORY_VALUES = ("price_per_hour", "spot_price_per_hour", "availability", "availability_count")


@dataclass
class IngestResult:
    db: str
    base_offers: int
    scrape: int
    changed: int
    baseline_insert_s: float
    ingest_insert_s: float
    ingest_added: int
    ingest_update_s: float
    ingest_updated: int
    baseline_upsert_s: float

    @property
    def insert_ratio(self) -> float:
        return self.ingest_insert_s / self.baseline_insert_s

    @property
    def update_ratio(self) -> float:
        return self.ingest_update_s / self.baseline_upsert_s


def _rows(records: list[OfferRecord], now: datetime) -> list[Row]:
    return [offer_row(0, r, now, now, True, SCRAPE_SOURCE) for r in records]


def _pg_insert(db: BenchDb, records: list[OfferRecord], now: datetime) -> float:
    rows = [r[1:] for r in _rows(records, now)]  # no id: the serial assigns it
    cols = ", ".join(OFFER_COLUMNS[1:])
    with psycopg.connect(psycopg_dsn(db.url)) as conn:
        start = time.perf_counter()
        with conn.cursor() as cur:
            cur.execute(
                "INSERT INTO providers (id, display_name, created_at) VALUES (%s, %s, %s)",
                (SCRAPE_PROVIDER, SCRAPE_PROVIDER, now),
            )
            with cur.copy(f"COPY offers ({cols}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            cur.execute(
                "INSERT INTO price_history (offer_id, observed_at, price_per_hour, "
                "spot_price_per_hour, availability, availability_count) SELECT id, %s, "
                "price_per_hour, spot_price_per_hour, availability, availability_count "
                "FROM offers WHERE provider_id = %s",
                (now, SCRAPE_PROVIDER),
            )
        conn.commit()
        elapsed = time.perf_counter() - start
        conn.execute("DELETE FROM offers WHERE provider_id = %s", (SCRAPE_PROVIDER,))
        conn.execute("DELETE FROM providers WHERE id = %s", (SCRAPE_PROVIDER,))
        conn.commit()
    with psycopg.connect(psycopg_dsn(db.url), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE offers")
        conn.execute("VACUUM ANALYZE price_history")
    return elapsed


def _lite(db: BenchDb) -> sqlite3.Connection:
    conn = sqlite3.connect(make_url(db.url).database or "", isolation_level=None)
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


def _sqlite_insert(db: BenchDb, records: list[OfferRecord], now: datetime) -> float:
    rows = [sqlite_offer_row(r)[1:] for r in _rows(records, now)]
    cols = ", ".join(OFFER_COLUMNS[1:])
    marks = ", ".join("?" * (len(OFFER_COLUMNS) - 1))
    stamp = sqlite_dt(now)
    conn = _lite(db)
    start = time.perf_counter()
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO providers (id, display_name, created_at) VALUES (?, ?, ?)",
        (SCRAPE_PROVIDER, SCRAPE_PROVIDER, stamp),
    )
    conn.executemany(f"INSERT INTO offers ({cols}) VALUES ({marks})", rows)
    conn.execute(
        "INSERT INTO price_history (offer_id, observed_at, price_per_hour, spot_price_per_hour, "
        "availability, availability_count) SELECT id, ?, price_per_hour, spot_price_per_hour, "
        "availability, availability_count FROM offers WHERE provider_id = ?",
        (stamp, SCRAPE_PROVIDER),
    )
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.execute("BEGIN")
    conn.execute("DELETE FROM offers WHERE provider_id = ?", (SCRAPE_PROVIDER,))
    conn.execute("DELETE FROM providers WHERE id = ?", (SCRAPE_PROVIDER,))
    conn.execute("COMMIT")
    conn.close()
    return elapsed


def _upsert_sql(pg: bool) -> tuple[str, str, str]:
    """(history for changed rows, update all, deactivate missing) with `staging` joined by key."""
    distinct = "IS DISTINCT FROM" if pg else "IS NOT"
    on = " AND ".join(f"o.{k} = s.{k}" for k in _KEY)
    ph = "%s" if pg else "?"
    changed = " OR ".join(f"o.{c} {distinct} s.{c}" for c in _HISTORY_VALUES)
    history = (
        "INSERT INTO price_history (offer_id, observed_at, price_per_hour, spot_price_per_hour, "
        f"availability, availability_count) SELECT o.id, {ph}, s.price_per_hour, "
        "s.spot_price_per_hour, s.availability, s.availability_count "
        f"FROM offers o JOIN staging s ON {on} WHERE NOT o.active OR {changed}"
    )
    sets = ", ".join(f"{c} = s.{c}" for c in (*_VALUE_COLUMNS, "source", "last_seen"))
    where = " AND ".join(f"offers.{k} = s.{k}" for k in _KEY)
    update = f"UPDATE offers SET {sets}, active = true FROM staging s WHERE {where}"
    gone_on = " AND ".join(f"s.{k} = offers.{k}" for k in _KEY)
    deactivate = (
        f"UPDATE offers SET active = false WHERE provider_id = {ph} AND active "
        f"AND NOT EXISTS (SELECT 1 FROM staging s WHERE {gone_on})"
    )
    return history, update, deactivate


def _pg_upsert(db: BenchDb, records: list[OfferRecord], now: datetime) -> float:
    rows = _rows(records, now)
    history, update, deactivate = _upsert_sql(True)
    with psycopg.connect(psycopg_dsn(db.url)) as conn:
        # Planner statistics as autovacuum would have them after the ingest runs (untimed).
        conn.execute("ANALYZE offers")
        conn.commit()
        start = time.perf_counter()
        with conn.cursor() as cur:
            cur.execute("CREATE TEMP TABLE staging (LIKE offers) ON COMMIT DROP")
            with cur.copy(f"COPY staging ({', '.join(OFFER_COLUMNS)}) FROM STDIN") as copy:
                for i, row in enumerate(rows):
                    copy.write_row((i, *row[1:]))
            cur.execute("ANALYZE staging")
            cur.execute(history, (now,))
            cur.execute(update)
            cur.execute(deactivate, (SCRAPE_PROVIDER,))
        conn.commit()
        return time.perf_counter() - start


def _sqlite_upsert(db: BenchDb, records: list[OfferRecord], now: datetime) -> float:
    rows = [sqlite_offer_row(r) for r in _rows(records, now)]
    stamp = sqlite_dt(now)
    history, update, deactivate = _upsert_sql(False)
    marks = ", ".join("?" * len(OFFER_COLUMNS))
    conn = _lite(db)
    start = time.perf_counter()
    conn.execute("BEGIN")
    conn.execute("CREATE TEMP TABLE staging AS SELECT * FROM offers WHERE 0")
    conn.execute(
        "CREATE INDEX temp.staging_key ON staging (provider_id, instance_type, region, spot)"
    )
    conn.executemany(
        f"INSERT INTO staging ({', '.join(OFFER_COLUMNS)}) VALUES ({marks})",
        [(i, *row[1:]) for i, row in enumerate(rows)],
    )
    conn.execute(history, (stamp,))
    conn.execute(update)
    conn.execute(deactivate, (SCRAPE_PROVIDER,))
    conn.execute("DROP TABLE staging")
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def _ingest(db: BenchDb, records: list[OfferRecord], now: datetime) -> tuple[float, Any]:
    engine = make_engine(db.url)
    factory = make_session_factory(engine)
    with engine.connect():
        pass  # open the pool's connection outside the timing
    session = factory()
    start = time.perf_counter()
    stats = ingest_records(session, source=SCRAPE_SOURCE, records=records, now=now)
    session.commit()
    elapsed = time.perf_counter() - start
    session.close()
    engine.dispose()
    return elapsed, stats


def run_ingest_bench(db: BenchDb, base_offers: int, n: int) -> IngestResult:
    scrape = generate_scrape(SCRAPE_PROVIDER, n)
    rescrape, changed = reprice(scrape, 0.2)
    upsert_records, _ = reprice(rescrape, 0.2, seed=7)
    t0 = FIXED_NOW + timedelta(minutes=5)
    t1, t2 = t0 + timedelta(minutes=30), t0 + timedelta(minutes=60)
    baseline_insert = (_pg_insert if db.is_pg else _sqlite_insert)(db, scrape, t0)
    ingest_insert, stats1 = _ingest(db, scrape, t0)
    ingest_update, stats2 = _ingest(db, rescrape, t1)
    baseline_upsert = (_pg_upsert if db.is_pg else _sqlite_upsert)(db, upsert_records, t2)
    return IngestResult(
        db=db.name,
        base_offers=base_offers,
        scrape=n,
        changed=changed,
        baseline_insert_s=baseline_insert,
        ingest_insert_s=ingest_insert,
        ingest_added=stats1.added,
        ingest_update_s=ingest_update,
        ingest_updated=stats2.updated,
        baseline_upsert_s=baseline_upsert,
    )
