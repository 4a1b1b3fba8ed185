"""Facet counts are cached per data version: fresh after every ingest, reused in between."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import ColumnElement, event, func, select
from sqlalchemy.orm import Session, sessionmaker

from app.fit import Workload, estimate_memory
from app.pipeline.ingest import ingest_records
from app.queries import OfferFilters, count_offers, count_where, facets, ranking, search_offers
from app.queries.assess import rest_clause, vram_bounds
from app.queries.filters import where_clauses
from app.store import data_cache
from app.store.models import Offer
from tests.test_ingest import rec
from tests.web.helpers import QLORA_8B, statements


def gpu_counts(session: Session) -> dict[str, int]:
    facet = next(f for f in facets(session, filters=OfferFilters()) if f.key == "gpu")
    return {v.value: v.count for v in facet.values}


def test_facets_follow_each_ingest(session_factory: sessionmaker[Session]) -> None:
    now = datetime(2026, 12, 2, tzinfo=UTC)
    with session_factory.begin() as session:
        ingest_records(session, source="lambdalabs", records=[rec("a")], now=now)
    with session_factory() as session:
        assert gpu_counts(session).get("h100-sxm") == 1
    with session_factory.begin() as session:
        ingest_records(session, source="lambdalabs", records=[rec("a"), rec("b")], now=now)
    with session_factory() as session:
        assert gpu_counts(session).get("h100-sxm") == 2


def test_facets_are_reused_until_the_next_ingest(
    session_factory: sessionmaker[Session], sample_loaded: int
) -> None:
    with session_factory() as session:
        first = gpu_counts(session)
        statements: list[str] = []
        engine = session.get_bind().engine

        def count(*args: object) -> None:
            statements.append(str(args[2]))

        event.listen(engine, "before_cursor_execute", count)
        try:
            assert gpu_counts(session) == first
            assert statements == []  # the token was read once in this transaction
            session.commit()
            assert gpu_counts(session) == first
        finally:
            event.remove(engine, "before_cursor_execute", count)
    # A new transaction reads the token again, and only the token.
    assert len(statements) == 1 and "data_version" in statements[0]


def _count_scans(statement: str) -> bool:
    return statement.lstrip().startswith("SELECT count(*)")


def _counted(session: Session, *clauses: ColumnElement[bool]) -> int:
    return int(session.scalar(select(func.count()).select_from(Offer).where(*clauses)) or 0)


@pytest.mark.parametrize(
    "filters",
    [
        OfferFilters(),
        OfferFilters(min_vram=48, max_price_per_hour=5),
        OfferFilters(gpu=["h100-sxm", "a100-80gb"], market="spot"),
        OfferFilters(gpu=["no-such-gpu"]),
    ],
    ids=["none", "vram+price", "gpus+spot", "nothing"],
)
def test_the_facet_scan_leaves_the_tables_count(
    session: Session, sample_loaded: int, filters: OfferFilters
) -> None:
    data_cache.clear()
    facets(session, filters=filters)
    with statements(session.get_bind().engine, _count_scans) as sent:
        total = count_offers(session, filters=filters)
    assert sent == []
    assert total == _counted(session, *where_clauses(filters))


@pytest.mark.parametrize(
    "job",
    [QLORA_8B, {"model": "llama-3.1-70b", "method": "full", "sharding": "zero3"}],
    ids=["8b-qlora", "70b-zero3"],
)
@pytest.mark.parametrize("filters", [OfferFilters(), OfferFilters(max_price_per_hour=20)])
@pytest.mark.parametrize("ranker", ["sql", "in_memory"])
def test_a_ranked_page_counts_the_rest_from_its_shapes(
    session: Session,
    sample_loaded: int,
    job: dict[str, str],
    filters: OfferFilters,
    ranker: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The offers too small for the job are the filtered ones less the candidates: equal to
    counting them, without the scan (both rankers)."""
    if ranker == "in_memory":
        monkeypatch.setattr(ranking, "MAX_SQL_SHAPES", 0)
        monkeypatch.setattr(ranking, "MAX_PG_SHAPES", 0)
    workload = Workload(**job)
    data_cache.clear()
    facets(session, filters=filters)  # as the page does first
    with statements(session.get_bind().engine, _count_scans) as sent:
        page = search_offers(session, filters=filters, workload=workload)
    assert sent == []
    bounds = vram_bounds(workload, estimate_memory(workload))
    rest = _counted(session, *where_clauses(filters), rest_clause(bounds))
    assert 0 < rest < page.total
    assert count_where(session, filters=filters, extra=[rest_clause(bounds)]) == rest
    assert page.total == _counted(session, *where_clauses(filters))
