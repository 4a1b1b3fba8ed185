"""Offers ranked by fit to a workload: fitting ones first, near misses, then the rest."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.fit import Workload
from app.queries.assess import Assessor, full_rows, offer_facts, rest_clause, rest_sort, vram_bounds
from app.queries.filters import fit_caption
from app.queries.in_memory import in_memory_head
from app.queries.params import OfferFilters, Sort
from app.queries.rows import OfferPage, RankedOffer, count_where, page_rows
from app.queries.shapes import shape_groups, sql_head

# Each shape becomes one row of a VALUES list of about 17 bound parameters; SQLite allows 32,766
# per statement. Past this many shapes the ranking runs in Python instead (slower, same order).
MAX_SQL_SHAPES = 1500


def ranked_page(
    session: Session, *, filters: OfferFilters, workload: Workload, sort: Sort
) -> OfferPage:
    """Fitting offers first (ranked), then near misses and the rest (price order), paginated.

    One price-free assessment per machine shape (hundreds, where offers are tens of thousands)
    decides fit, billed hours and tie-breaks; SQL then orders and pages the offers.
    """
    assess = Assessor(workload, use_spot=filters.market == "spot")
    bounds = vram_bounds(workload, assess.estimate)
    shapes = shape_groups(session, filters, bounds)
    if len(shapes) > MAX_SQL_SHAPES:
        head = in_memory_head(session, filters=filters, sort=sort, bounds=bounds, assess=assess)
    else:
        head = sql_head(
            session, filters=filters, sort=sort, bounds=bounds, assess=assess, shapes=shapes
        )
    common: dict[str, Any] = {
        "limit": filters.limit,
        "offset": filters.offset,
        "sort": sort,
        "caption": fit_caption(filters),
        "estimate": assess.estimate,
        "fitting": head.n_fit,
    }
    page = full_rows(session, head.ids, assess)
    if filters.fits_only:
        return OfferPage(total=head.n_fit, offers=page, **common)
    # The rest (too little VRAM by the bound) pages in SQL after the head.
    n_head = head.n_fit + head.n_missed
    rest_total = count_where(session, filters=filters, extra=[rest_clause(bounds)])
    if len(page) < filters.limit and rest_total:
        rest_rows = page_rows(
            session,
            filters=filters,
            sort=rest_sort(sort),
            extra=[rest_clause(bounds)],
            limit=filters.limit - len(page),
            offset=max(0, filters.offset - n_head),
        )
        page += [RankedOffer(row, assess(offer_facts(row))) for row in rest_rows]
    return OfferPage(total=n_head + rest_total, offers=page, **common)
