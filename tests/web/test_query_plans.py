"""The hot queries can use their indexes on both backends.

An expression index serves a query only when the query renders the very same expression, so a
harmless-looking change in how SQLAlchemy renders `/` or a NULL stand-in silently turns an
index lookup into a full scan (100k offers: 1 ms -> 100 ms). These tests read the plans.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session

from app.fit import Workload
from app.queries import OfferFilters, search_offers
from tests.web.helpers import QLORA_8B


@contextmanager
def captured(session: Session) -> Iterator[list[tuple[str, Any]]]:
    """Every (statement, driver parameters) the session's engine sends inside the block."""
    statements: list[tuple[str, Any]] = []
    engine = session.get_bind().engine

    def before(_conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        statements.append((statement, params))

    event.listen(engine, "before_cursor_execute", before)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", before)


def plan(session: Session, statement: str, params: Any) -> str:
    """The backend's plan for one captured statement, as one text."""
    conn = session.connection()
    if conn.dialect.name == "postgresql":
        # On a few hundred offers a scan, a sort or a hash join wins on cost; forbid them
        # to learn whether the index *can* serve the query, which the expressions decide.
        conn.exec_driver_sql("ANALYZE offers")  # as autovacuum would have by now
        for setting in ("seqscan", "bitmapscan", "sort", "hashjoin", "mergejoin", "material"):
            conn.exec_driver_sql(f"SET LOCAL enable_{setting} = off")
        rows = conn.exec_driver_sql("EXPLAIN " + statement, params).all()
        return "\n".join(str(r[0]) for r in rows)
    rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, tuple(params)).all()
    return "\n".join(str(r[-1]) for r in rows)


def test_default_sort_reads_the_price_per_gpu_index(session: Session, sample_loaded: int) -> None:
    with captured(session) as statements:
        page = search_offers(session, filters=OfferFilters())
    assert len(page.offers) == 50
    (statement, params) = next((s, p) for s, p in statements if "ORDER BY" in s)
    text_ = plan(session, statement, params)
    assert "ix_offers_active_effective_price" in text_, text_
    assert "TEMP B-TREE" not in text_ and "Sort Key" not in text_  # no sort of every offer


def test_fit_ranking_looks_up_each_shape_by_every_shape_column(
    session: Session, sample_loaded: int
) -> None:
    workload = Workload(**QLORA_8B)
    with captured(session) as statements:
        page = search_offers(session, filters=OfferFilters(sort="fit"), workload=workload)
    assert page.fitting and page.offers[0].fit is not None and page.offers[0].fit.fits
    (statement, params) = next((s, p) for s, p in statements if "shapes" in s and "ORDER BY" in s)
    text_ = plan(session, statement, params)
    assert "ix_offers_active_shape_job_price" in text_, text_
    if session.get_bind().dialect.name == "postgresql":
        condition = next(line for line in text_.splitlines() if "Index Cond" in line)
    else:
        condition = next(line for line in text_.splitlines() if "shape_job_price" in line)
    # The last shape column takes part in the lookup: no shape rescans its neighbours' offers.
    assert "availability" in condition, text_


SORT_INDEXES = [
    ({"sort": "price"}, "ix_offers_active_price_order"),
    ({"sort": "vram"}, "ix_offers_active_vram_order"),
    ({"sort": "newest"}, "ix_offers_active_newest"),
    ({"market": "spot"}, "ix_offers_active_spot_price_per_gpu"),
    ({}, "ix_offers_active_effective_price"),
]


def _page_plan(session: Session, filters: OfferFilters) -> tuple[str, str | None]:
    """The plan of the page query search_offers sends, and the page's next cursor."""
    with captured(session) as statements:
        page = search_offers(session, filters=filters)
    assert len(page.offers) == filters.limit
    (statement, params) = next((s, p) for s, p in statements if "ORDER BY" in s)
    return plan(session, statement, params), page.next_after


@pytest.mark.parametrize(("params", "index"), SORT_INDEXES)
def test_every_offered_sort_and_its_keyset_pages_read_an_index(
    session: Session, sample_loaded: int, params: dict[str, str], index: str
) -> None:
    filters = OfferFilters(limit=5, **params)
    first, after = _page_plan(session, filters)
    assert index in first, first
    assert "TEMP B-TREE" not in first and "Sort Key" not in first, first
    assert after is not None
    # The keyset page seeks into the same index: the cursor's bound is an index condition,
    # so no row before the page is read (offset 90,000 would walk 90,000 of them).
    keyset, _ = _page_plan(session, filters.model_copy(update={"after": after}))
    assert index in keyset, keyset
    assert "TEMP B-TREE" not in keyset and "Sort Key" not in keyset, keyset
    if session.get_bind().dialect.name == "postgresql":
        condition = next(line for line in keyset.splitlines() if "Index Cond" in line)
        assert ">=" in condition or "<=" in condition, keyset
    else:
        assert ">?" in keyset or "<?" in keyset, keyset


def test_include_inactive_pages_merge_two_index_scans(session: Session, sample_loaded: int) -> None:
    """Current and gone offers each read in index order up to the page's end, then merged."""
    with captured(session) as statements:
        page = search_offers(session, filters=OfferFilters(include_inactive=True, limit=5))
    assert len(page.offers) == 5
    (statement, params) = next((s, p) for s, p in statements if "UNION ALL" in s)
    text_ = plan(session, statement, params)
    assert text_.count("ix_offers_active_effective_price") == 2, text_


def test_grouping_a_page_probes_the_offer_key_index_per_listing(
    session: Session, sample_loaded: int
) -> None:
    """A page's sibling offers (its listings' other regions) are found listing by listing
    through the (provider, instance type, ...) key, never by reading every offer: joined
    plainly to the page's pairs, Postgres hashed all 90,000 active offers (85 ms a 1,000-row
    page at 100k offers)."""
    from app.queries.listings import group_offers

    filters = OfferFilters(limit=200)
    page = search_offers(session, filters=filters)
    with captured(session) as statements:
        listings = group_offers(session, page.offers, filters)
    assert listings
    (statement, params) = statements[0]
    conn = session.connection()
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("ANALYZE offers")
        text_ = "\n".join(str(r[0]) for r in conn.exec_driver_sql("EXPLAIN " + statement, params))
        assert "uq_offers_key" in text_, text_
        assert "Seq Scan on offers" not in text_ and "Hash" not in text_, text_
    else:
        text_ = plan(session, statement, params)
        assert "SCAN offers" not in text_, text_
        assert "USING INDEX" in text_, text_
