"""The table's one entry point: filter, sort and paginate, or rank by fit with a workload."""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError
from sqlalchemy import ColumnElement, select, union_all
from sqlalchemy.orm import Session

from app.fit import Workload
from app.queries.filters import caption, effective_sort, order_by, sort_keys, where_clauses
from app.queries.keyset import after_clause, decode_cursor, next_cursor
from app.queries.params import OfferFilters, Sort
from app.queries.ranking import ranked_page
from app.queries.rows import (
    OfferPage,
    OfferRow,
    RankedOffer,
    count_offers,
    fetch_rows,
    get_offers,
    row_select,
)
from app.store.models import Offer

# Past this offset the page's ids are found first and only its rows joined: the walk over the
# skipped offers then reads the sort's index alone, not 90,000 provider and GPU joins.
DEEP_OFFSET = 1000


def search_offers(
    session: Session, *, filters: OfferFilters, workload: Workload | None = None
) -> OfferPage:
    """Filter, sort and paginate offers; with a workload, rank them by fit (fitting ones first).

    Without a workload, `after` (a cursor from the previous page) pages by keyset: the next page
    is one range scan of the sort's index however deep it is; `offset` keeps working too.
    """
    sort = effective_sort(filters, has_workload=workload is not None)
    if workload is not None:
        if filters.after:
            raise RequestValidationError(
                [
                    {
                        "type": "bad_cursor",
                        "loc": ("query", "after"),
                        "msg": "a table ranked for a workload pages by offset, not after",
                        "input": filters.after,
                    }
                ]
            )
        return ranked_page(session, filters=filters, workload=workload, sort=sort)
    clauses = where_clauses(filters)
    position, offset = filters.offset, filters.offset
    if filters.after:
        cursor = decode_cursor(filters.after, sort=sort, filters=filters)
        clauses.append(after_clause(cursor, filters))
        position, offset = cursor.position, 0
    total = count_offers(session, filters=filters)
    rows = _page(session, clauses, sort, filters, offset)
    more = position + len(rows) < total and len(rows) == filters.limit
    return OfferPage(
        total=total,
        offers=[RankedOffer(r) for r in rows],
        limit=filters.limit,
        offset=position,
        sort=sort,
        caption=caption(filters),
        next_after=(
            next_cursor(rows, sort=sort, filters=filters, position=position) if more else None
        ),
    )


def _page(
    session: Session,
    clauses: list[ColumnElement[bool]],
    sort: Sort,
    filters: OfferFilters,
    offset: int,
) -> list[OfferRow]:
    if filters.include_inactive:
        return _merged_page(session, clauses, sort, filters, offset)
    order: list[Any] = order_by(sort, filters)
    if offset < DEEP_OFFSET:
        stmt = row_select().where(*clauses).order_by(*order).limit(filters.limit).offset(offset)
        return fetch_rows(session, stmt)
    ids = (
        select(Offer.id.label("page_id"))
        .where(*clauses)
        .order_by(*order)
        .limit(filters.limit)
        .offset(offset)
        .subquery()
    )
    return fetch_rows(session, row_select().join(ids, ids.c.page_id == Offer.id).order_by(*order))


def _merged_page(
    session: Session,
    clauses: list[ColumnElement[bool]],
    sort: Sort,
    filters: OfferFilters,
    offset: int,
) -> list[OfferRow]:
    """A page over current and gone offers alike: each kind read in its sort index's order (the
    indexes lead with `active`) up to the page's end, then merged, instead of sorting them all."""
    keys = sort_keys(sort, filters)[:-1]
    order: list[Any] = order_by(sort, filters)
    end = offset + filters.limit
    branches = []
    for active in (True, False):
        branch = (
            select(Offer.id.label("page_id"), *(k.label(f"k{i}") for i, (k, _) in enumerate(keys)))
            .where(*clauses, Offer.active.is_(active))
            .order_by(*order)
            .limit(end)
            .subquery()
        )
        branches.append(select(*branch.c))  # SQLite: no ORDER BY/LIMIT inside a UNION member
    merged = union_all(*branches).subquery()
    columns = [merged.c[f"k{i}"] for i in range(len(keys))]
    merged_order = [
        col.desc() if desc else (col.asc().nulls_last() if i == 0 else col.asc())
        for i, (col, (_, desc)) in enumerate(zip(columns, keys, strict=True))
    ]
    ids = list(
        session.scalars(
            select(merged.c.page_id)
            .order_by(*merged_order, merged.c.page_id.asc())
            .limit(filters.limit)
            .offset(offset)
        )
    )
    by_id = get_offers(session, ids=ids)
    return [by_id[i] for i in ids]
