"""A scrape with 10,000 saved searches (1,000 distinct views) in the database.

Saved searches cost nothing per scrape: the ingest writes its change set once, and each view
reads it when someone looks at it. This runs a provider re-scrape (`ingest_records`, then the
before-commit warm the scrape runner does, then the commit) with and without the saved
searches, and counts the statements that touch the saved-search tables during it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import event, insert

from app.core.settings import Settings
from app.gpus.catalog import load_catalog
from app.pipeline.ingest import ingest_records
from app.records import OfferRecord
from app.saved import new_token, query_key
from app.store.data_cache import data_version
from app.store.db import make_engine, make_session_factory
from app.store.models import SavedQuery, SavedSearch, utcnow
from app.web.warm import warm_data_version
from bench.generate import FIXED_NOW, generate_scrape, reprice
from bench.ingest_bench import SCRAPE_PROVIDER, SCRAPE_SOURCE

SEARCHES_PER_OWNER = 3
SCRAPES = 3  # re-scrapes each way: one sample moved by +-25 % from run to run


@dataclass
class SavedScrapeResult:
    saved: int
    distinct: int
    scrape: int
    baseline_ingest_s: list[float]  # each re-scrape's ingest + commit, no saved searches
    ingest_s: list[float]  # the same with the saved searches
    warm_s: list[float]  # the before-commit warm of those (all the post-ingest work)
    statements: int  # sent during the scrapes with saved searches
    saved_statements: int  # of those, touching a saved-search table


def distinct_queries(n: int) -> list[str]:
    """`n` different saved views: GPU models with price ceilings, some with a job."""
    slugs = sorted(load_catalog())
    out = []
    for i in range(n):
        query = f"gpu={slugs[i % len(slugs)]}&max_price_per_hour={1 + i // len(slugs)}"
        if i % 4 == 3:
            query += "&model=llama-3.1-8b&method=qlora"
        out.append(query)
    return out


def _insert_saved(factory: Any, saved: int, distinct: int) -> None:
    queries = distinct_queries(distinct)
    now = utcnow()
    owners = [new_token() for _ in range(-(-saved // SEARCHES_PER_OWNER))]
    with factory.begin() as session:
        version = data_version(session)
        session.execute(
            insert(SavedQuery),
            [
                {"key": query_key(q), "query": q, "version": version, "computed_at": now,
                 "match_count": 0, "checked_change_id": 0, "created_at": now}
                for q in queries
            ],
        )  # fmt: skip
        session.execute(
            insert(SavedSearch),
            [
                {"share_token": new_token(), "owner_token": owners[i // SEARCHES_PER_OWNER],
                 "name": f"search {i}", "query": queries[i % distinct],
                 "query_key": query_key(queries[i % distinct]), "created_at": now,
                 "updated_at": now}
                for i in range(saved)
            ],
        )  # fmt: skip


def _scrape(
    factory: Any, records: list[OfferRecord], at: Any, settings: Settings, *, warm: bool
) -> tuple[float, float]:
    """(ingest + commit seconds, warm seconds) of one scrape, as the scrape runner runs it."""
    session = factory()
    try:
        start = time.perf_counter()
        ingest_records(session, source=SCRAPE_SOURCE, records=records, now=at)
        ingested = time.perf_counter() - start
        start = time.perf_counter()
        if warm:
            warm_data_version(session, settings)
        warm_s = time.perf_counter() - start
        start = time.perf_counter()
        session.commit()
        return ingested + time.perf_counter() - start, warm_s
    finally:
        session.close()


def run_saved_scrape_bench(
    url: str, *, scrape: int, saved: int = 10_000, distinct: int = 1_000
) -> SavedScrapeResult:
    """Needs the ingest bench's scrape provider in the database (bench.ingest_bench)."""
    engine = make_engine(url)
    factory = make_session_factory(engine)
    settings = Settings(database_url=url, _env_file=None)
    base = generate_scrape(SCRAPE_PROVIDER, scrape)
    # Every re-scrape re-prices another 20 % (seeds 11, 12, ...), 30 minutes after the last.
    scrapes = iter(reprice(base, 0.2, seed=11 + i)[0] for i in range(2 * SCRAPES))
    at = (FIXED_NOW + timedelta(hours=3, minutes=30 * i) for i in range(2 * SCRAPES))
    with engine.connect():
        pass  # the pool's connection, outside the timings
    baseline = [_scrape(factory, next(scrapes), next(at), settings, warm=False)[0]
                for _ in range(SCRAPES)]  # fmt: skip
    _insert_saved(factory, saved, distinct)
    sent: list[str] = []

    def before(_c: Any, _cur: Any, statement: str, *_: Any) -> None:
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", before)
    try:
        timed = [_scrape(factory, next(scrapes), next(at), settings, warm=True)
                 for _ in range(SCRAPES)]  # fmt: skip
    finally:
        event.remove(engine, "before_cursor_execute", before)
    engine.dispose()
    touching = [s for s in sent if "saved_" in s]
    return SavedScrapeResult(
        saved,
        distinct,
        scrape,
        baseline,
        [ingest for ingest, _ in timed],
        [warm for _, warm in timed],
        len(sent),
        len(touching),
    )
