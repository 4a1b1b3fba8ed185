"""Every row of a table view, in the view's order, streamed: the export behind
/export/offers.csv and .jsonl.

Rows come through a server-side cursor (Postgres; SQLite's cursor reads lazily anyway) in
batches, so memory stays flat however many rows a view has. Without a workload that is the
table's own ORDER BY; with one, the ranking's order (plans that fit, by rank, near misses, then
the rest), reading each batch's rows by id.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.fit import Workload
from app.queries.assess import Assessor, full_rows, rest_clause, rest_sort, vram_bounds
from app.queries.filters import effective_sort, order_by, where_clauses
from app.queries.in_memory import in_memory_head
from app.queries.output import csv_rows, json_lines, raw_csv_rows, raw_json_lines
from app.queries.params import OfferFilters, job_terms
from app.queries.ranking import limits_of
from app.queries.rows import TEXT_TIME_COLUMNS, RankedOffer, row_select, rows_of
from app.store.models import Offer

BATCH = 1000
_STREAM = {"stream_results": True, "yield_per": BATCH}


def export_lines(
    session: Session,
    *,
    filters: OfferFilters,
    workload: Workload | None,
    max_rows: int,
    fmt: str,
    link_query: str = "",
) -> Iterator[str]:
    """The whole view (no page, at most `max_rows` rows) as CSV ("csv", header first) or JSON
    Lines ("jsonl") text, a batch of rows at a time; `link_query` as in offer_dict."""
    with_fit = workload is not None
    if fmt == "csv":
        yield csv_rows([], with_fit=with_fit, header=True)
    if workload is None:
        # The plain table: raw rows straight to text, no row objects (90k rows a request).
        encode = raw_csv_rows if fmt == "csv" else raw_json_lines
        for raws in _raw_batches(session, filters, max_rows):
            yield encode(raws)
        return
    for batch in export_batches(session, filters=filters, workload=workload, max_rows=max_rows):
        yield (
            csv_rows(batch, with_fit=True, link_query=link_query)
            if fmt == "csv"
            else json_lines(batch, link_query)
        )


def _raw_batches(session: Session, filters: OfferFilters, max_rows: int) -> Iterator[Sequence[Any]]:
    sort = effective_sort(filters, has_workload=False)
    stmt = (
        row_select(TEXT_TIME_COLUMNS)
        .where(*where_clauses(filters))
        .order_by(*order_by(sort, filters))
    )
    # Core execution through a server-side cursor: plain rows, BATCH at a time.
    result = session.connection().execute(stmt.execution_options(**_STREAM))
    left = max_rows
    try:
        for part in result.partitions():
            yield part[:left]
            left -= len(part)
            if left <= 0:
                return
    finally:
        result.close()


def export_batches(
    session: Session,
    *,
    filters: OfferFilters,
    workload: Workload | None,
    max_rows: int,
) -> Iterator[list[RankedOffer]]:
    """Batches of at most BATCH rows of the whole view (no page), at most `max_rows` in all."""
    if workload is None:
        sort = effective_sort(filters, has_workload=False)
        stmt = row_select().where(*where_clauses(filters)).order_by(*order_by(sort, filters))
        result = session.connection().execute(stmt.execution_options(**_STREAM))
        left = max_rows
        try:
            for part in result.partitions():
                yield [RankedOffer(row) for row in rows_of(part[:left])]
                left -= len(part)
                if left <= 0:
                    return
        finally:
            result.close()
        return
    assess = Assessor(workload, job_terms(filters))
    left = max_rows
    for ids in _ranked_id_batches(session, filters, workload, assess):
        ids = ids[:left]
        yield full_rows(session, ids, assess)
        left -= len(ids)
        if left <= 0:
            return


def _ranked_id_batches(
    session: Session, filters: OfferFilters, workload: Workload, assess: Assessor
) -> Iterator[list[int]]:
    """Ids in the ranked table's order, in batches: the ranking's head (plans that fit, by
    rank, then near misses) for the whole view, then the rest in price order.

    The head comes from the in-memory twin of the SQL ranking (same order, tested): it holds
    every candidate's sort keys, a few numbers an offer, which a whole-view export needs anyway.
    """
    sort = effective_sort(filters, has_workload=True)
    bounds = vram_bounds(workload, assess.estimate)
    everything = filters.model_copy(update={"offset": 0, "limit": 10**9, "after": None})
    head = in_memory_head(
        session,
        filters=everything,
        sort=sort,
        bounds=bounds,
        assess=assess,
        limits=limits_of(filters),
    )
    for i in range(0, len(head.ids), BATCH):
        yield head.ids[i : i + BATCH]
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


__all__ = ["BATCH", "export_batches", "export_lines"]
