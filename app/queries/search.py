"""The table's one entry point: filter, sort and paginate, or rank by fit with a workload."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.fit import Workload
from app.queries.filters import caption, effective_sort, order_by, where_clauses
from app.queries.params import OfferFilters
from app.queries.ranking import ranked_page
from app.queries.rows import OfferPage, RankedOffer, count_offers, fetch_rows, row_select


def search_offers(
    session: Session, *, filters: OfferFilters, workload: Workload | None = None
) -> OfferPage:
    """Filter, sort and paginate offers; with a workload, rank them by fit (fitting ones first)."""
    sort = effective_sort(filters, has_workload=workload is not None)
    if workload is not None:
        return ranked_page(session, filters=filters, workload=workload, sort=sort)
    stmt = (
        row_select()
        .where(*where_clauses(filters))
        .order_by(*order_by(sort, filters))
        .limit(filters.limit)
        .offset(filters.offset)
    )
    return OfferPage(
        total=count_offers(session, filters=filters),
        offers=[RankedOffer(r) for r in fetch_rows(session, stmt)],
        limit=filters.limit,
        offset=filters.offset,
        sort=sort,
        caption=caption(filters),
    )
