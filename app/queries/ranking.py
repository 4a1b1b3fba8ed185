"""Offers ranked as plans for a workload: fitting ones first (with margin, then tight), near
misses, then the rest."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.fit import Workload
from app.fit.assumptions import job_assumptions
from app.queries.assess import (
    Assessor,
    RankedHead,
    VramBounds,
    full_rows,
    listing_bands,
    offer_facts,
    rest_clause,
    rest_sort,
    vram_bounds,
)
from app.queries.filters import fit_caption
from app.queries.in_memory import in_memory_head
from app.queries.params import OfferFilters, Sort, filters_key, job_terms
from app.queries.rows import OfferPage, RankedOffer, count_offers, count_where, page_rows
from app.queries.shapes import Limits, shape_groups, sql_head, values_per_shape
from app.queries.suggestions import FEW_FITTING, suggestions
from app.store import data_cache

# SQLite allows 32,766 bound values per statement and each shape of a VALUES list takes
# `values_per_shape()`; past this many shapes the ranking runs in Python there (slower, same
# order). Postgres binds one array per column, so only the assessment cost limits it.
SQLITE_MAX_VALUES = 32_766
MAX_SQL_SHAPES = SQLITE_MAX_VALUES // values_per_shape() - 1
MAX_PG_SHAPES = 50_000


def limits_of(filters: OfferFilters) -> Limits:
    """The deadline and budget the filters set."""
    return Limits(max_hours=filters.max_hours, max_cost=filters.max_cost)


def ranked_page(
    session: Session, *, filters: OfferFilters, workload: Workload, sort: Sort
) -> OfferPage:
    """Fitting plans first (ranked), then near misses and the rest (price order), paginated.

    One price-free assessment per machine shape (hundreds, where offers are tens of thousands)
    decides the plan, its hours and billed node-hours in each market; SQL then prices, orders
    and pages the offers.
    """
    assess = Assessor(workload, job_terms(filters))
    bounds = vram_bounds(workload, assess.estimate)
    head = ranked_head(session, filters=filters, sort=sort, bounds=bounds, assess=assess)
    common: dict[str, Any] = {
        "limit": filters.limit,
        "offset": filters.offset,
        "sort": sort,
        "caption": fit_caption(filters),
        "estimate": assess.estimate,
        "fitting": head.n_fit,
        "tight": head.n_tight,
        "terms": assess.terms,
    }
    if head.n_fit < FEW_FITTING:
        common["suggestions"] = suggestions(session, filters, workload, assess.terms)
    page = full_rows(session, head.ids, assess)
    if filters.fits_only:
        return OfferPage(total=head.n_fit, offers=page, **common)
    # The rest (too little VRAM by the bound) pages in SQL after the head.
    n_head = head.n_fit + head.n_missed
    # The rest are the filtered offers the prefilter left out: their count needs no scan of
    # its own once the filtered count is known (the facets of the same view leave it cached).
    rest_total = count_where(
        session,
        filters=filters,
        extra=[rest_clause(bounds)],
        derived=lambda: count_offers(session, filters=filters) - head.n_candidates,
    )
    if len(page) < filters.limit and rest_total:
        rest_rows = page_rows(
            session,
            filters=filters,
            sort=rest_sort(sort),
            extra=[rest_clause(bounds)],
            limit=filters.limit - len(page),
            offset=max(0, filters.offset - n_head),
        )
        bands = listing_bands(session)
        page += [RankedOffer(row, assess(offer_facts(row, bands))) for row in rest_rows]
    return OfferPage(total=n_head + rest_total, offers=page, **common)


def ranked_head(
    session: Session, *, filters: OfferFilters, sort: Sort, bounds: VramBounds, assess: Assessor
) -> RankedHead:
    """The page's fitting offers and near misses (ids and counts), cached per page of a ranked
    view until the data changes. Shared: the warm of a hot view (app.web.warm) spares every
    process its shapes, their assessment and the ranked query on the first request after an
    ingest, as the second request is spared them."""

    def compute() -> RankedHead:
        shapes = shape_groups(session, filters, bounds)
        limits = limits_of(filters)
        pg = session.get_bind().dialect.name == "postgresql"
        if len(shapes) > (MAX_PG_SHAPES if pg else MAX_SQL_SHAPES):
            return in_memory_head(
                session, filters=filters, sort=sort, bounds=bounds, assess=assess, limits=limits
            )
        return sql_head(
            session,
            filters=filters,
            sort=sort,
            bounds=bounds,
            assess=assess,
            shapes=shapes,
            limits=limits,
        )

    key = (
        filters_key(filters),
        assess.workload_key,
        assess.terms,
        limits_of(filters),
        sort,
        filters.limit,
        filters.offset,
        filters.fits_only,
    )
    return data_cache.cached(session, "ranked_head", key, compute)


data_cache.share("ranked_head", RankedHead)


def page_assumptions(page: OfferPage, workload: Workload) -> list[tuple[str, str]]:
    """The assumptions panel of a ranked page: the first fitting row's figures and the first
    row costed at a spot price stand for the rest."""
    assert page.estimate is not None and page.terms is not None
    fitting = [item for item in page.offers if item.fit is not None and item.fit.fits]
    top = fitting[0] if fitting else None
    spot = next((i for i in fitting if i.fit is not None and i.fit.market_used == "spot"), None)
    return job_assumptions(
        workload,
        page.estimate,
        page.terms,
        top=top.fit if top else None,
        top_gpu=top.row.gpu_model if top else None,
        spot=spot.fit if spot else None,
    )
