"""Facet counts are cached per data version: fresh after every ingest, reused in between."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from app.pipeline.ingest import ingest_records
from app.queries import OfferFilters, facets
from tests.test_ingest import rec


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
