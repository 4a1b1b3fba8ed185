"""Every row of a table view, in the view's order, streamed: the export behind
/export/offers.csv and .jsonl.

Rows come through a server-side cursor (Postgres; SQLite's cursor reads lazily anyway) in
batches, so memory stays flat however many rows a view has. Without a workload that is the
table's own ORDER BY; with one, the fit ranking's statements in turn (fitting offers by rank,
near misses, then the rest), streaming ids and reading each batch's rows by id.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.fit import Workload
from app.queries.assess import Assessor, offer_facts, rest_clause, rest_sort, vram_bounds
from app.queries.filters import effective_sort, order_by, where_clauses
from app.queries.in_memory import in_memory_head
from app.queries.params import WORKLOAD_SORTS, OfferFilters
from app.queries.ranking import MAX_SQL_SHAPES
from app.queries.rows import RankedOffer, get_offers, row_select, rows_of
from app.queries.shapes import assessed_shapes, member_stmt, ranked_stmt, shape_groups
from app.store.models import Offer

BATCH = 5000
_STREAM = {"stream_results": True, "yield_per": BATCH}


def export_batches(
    session: Session,
    *,
    filters: OfferFilters,
    workload: Workload | None,
    max_rows: int,
) -> Iterator[list[RankedOffer]]:
    """Batches of at most BATCH rows of the whole view (no page), at most `max_rows` in all."""
    sort = effective_sort(filters, has_workload=workload is not None)
    left = max_rows
    if workload is None:
        stmt = row_select().where(*where_clauses(filters)).order_by(*order_by(sort, filters))
        # Core execution: plain rows, no ORM bookkeeping per row.
        result = session.connection().execute(stmt.execution_options(**_STREAM))
        for part in result.partitions():
            rows = rows_of(part)[:left]
            left -= len(rows)
            yield [RankedOffer(r) for r in rows]
            if left <= 0:
                break
        result.close()
        return
    assess = Assessor(workload, use_spot=filters.market == "spot")
    for ids in _ranked_id_batches(session, filters, workload, assess):
        ids = ids[:left]
        by_id = get_offers(session, ids=ids)
        yield [RankedOffer(by_id[i], assess(offer_facts(by_id[i]))) for i in ids if i in by_id]
        left -= len(ids)
        if left <= 0:
            return


def _ranked_id_batches(
    session: Session, filters: OfferFilters, workload: Workload, assess: Assessor
) -> Iterator[list[int]]:
    """Ids in the ranked table's order, in batches: the page statements of app.queries.shapes
    without their page."""
    sort = effective_sort(filters, has_workload=True)
    bounds = vram_bounds(workload, assess.estimate)
    shapes = shape_groups(session, filters, bounds)
    if len(shapes) > MAX_SQL_SHAPES:
        # The in-memory ranking holds every candidate's sort keys anyway; take all of its head.
        everything = filters.model_copy(update={"offset": 0, "limit": 10**9})
        head = in_memory_head(session, filters=everything, sort=sort, bounds=bounds, assess=assess)
        for i in range(0, len(head.ids), BATCH):
            yield head.ids[i : i + BATCH]
    else:
        fitting, missed = assessed_shapes(session, filters=filters, assess=assess, shapes=shapes)
        if fitting:
            if sort in WORKLOAD_SORTS:
                stmt = ranked_stmt(session, filters=filters, bounds=bounds, fitting=fitting,
                                   use_spot=assess.use_spot)  # fmt: skip
            else:
                stmt = member_stmt(
                    session, filters=filters, bounds=bounds, members=fitting, others=missed
                ).order_by(*order_by(sort, filters))
            yield from _id_batches(session, stmt)
        if filters.fits_only:
            return
        if missed:
            stmt = member_stmt(
                session, filters=filters, bounds=bounds, members=missed, others=fitting
            ).order_by(*order_by(rest_sort(sort), filters))
            yield from _id_batches(session, stmt)
    if filters.fits_only:
        return
    rest = (
        select(Offer.id)
        .where(*where_clauses(filters), rest_clause(bounds))
        .order_by(*order_by(rest_sort(sort), filters))
    )
    yield from _id_batches(session, rest)


def _id_batches(session: Session, stmt: Select[Any]) -> Iterator[list[int]]:
    result = session.connection().execute(stmt.execution_options(**_STREAM))
    try:
        for part in result.partitions():
            yield [row[0] for row in part]
    finally:
        result.close()


__all__ = ["BATCH", "export_batches"]
