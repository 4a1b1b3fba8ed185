"""Plan ranking in Python over every candidate: the fallback when shapes are too many for SQL
(SQLite's bound-value limit). Same order as app.queries.shapes, key by key."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import null, select
from sqlalchemy.orm import Session

from app.fit import OfferFacts, OfferFit
from app.fit.market import market_profile
from app.fit.offer_facts import NO_FIT, TIGHT
from app.fit.plans import choose_market, listing_prices, listing_step
from app.queries.assess import (
    Assessor,
    RankedHead,
    VramBounds,
    candidate_clause,
    listing_bands,
)
from app.queries.filters import where_clauses
from app.queries.params import WORKLOAD_SORTS, OfferFilters, Sort
from app.queries.shapes import Limits
from app.store.models import GpuModel, Offer

# Ranking reads only these columns for every candidate; full rows are read for one page only.
_RANK_COLUMNS: tuple[Any, ...] = (
    Offer.id,
    Offer.gpu_count,
    Offer.vram_gib_per_gpu,
    GpuModel.bf16_tflops,
    GpuModel.fp16_tflops,
    GpuModel.memory_type,
    Offer.interconnect,
    GpuModel.nvlink_gbps,
    Offer.network,
    Offer.network_gbps,
    Offer.billing,
    Offer.spot,
    Offer.availability,
    Offer.gpu_model_slug,
    Offer.provider_id,
    Offer.availability_count,
    Offer.region,
    Offer.instance_type,
    Offer.price_per_hour,
    Offer.spot_price_per_hour,
    Offer.vram_gib_total,
    Offer.first_seen,
)
_N_FACTS = 14  # the leading columns that, with prices None, are the price-free OfferFacts


def _price_free_facts(values: Sequence[Any], bands: dict[tuple[str, str, str], str]) -> OfferFacts:
    (
        _id,
        gpu_count,
        vram,
        bf16,
        fp16,
        memory,
        interconnect,
        nvlink,
        network,
        network_gbps,
        billing,
        spot,
        availability,
        slug,
        provider,
        available_gpus,
        region,
        instance_type,
    ) = values[:18]
    return OfferFacts(
        gpu_count=gpu_count,
        vram_gib_per_gpu=vram,
        bf16_tflops=bf16,
        fp16_tflops=fp16,
        memory_type=memory,
        interconnect=interconnect,
        nvlink_gbps=nvlink,
        network=network,
        network_gbps=network_gbps,
        billing=billing,
        spot=bool(spot),
        availability=availability,
        gpu_slug=slug,
        provider=market_profile(provider),
        spot_band=bands.get((provider, region, instance_type)),
        listings_available=listing_step(available_gpus, gpu_count),
    )


@dataclass(frozen=True)
class _Candidate:
    """One prefiltered offer's sort keys, computed without building its full row."""

    id: int
    fit_class: int
    fit_key: tuple[float, ...]  # the workload sort's key (shapes.fit_order's twin)
    row_key: tuple[Any, ...]
    admitted: bool  # within the deadline and budget


def offer_keys(fit: OfferFit, facts: OfferFacts) -> tuple[float | None, float | None, float | None]:
    """(cost, hours, cost per million tokens) of one offer from its shape's price-free fit and
    its prices: shapes.offer_terms in Python."""
    on_demand, spot = listing_prices(facts)
    chosen = choose_market(fit.markets, on_demand, spot)
    if chosen is None:
        own = fit.markets.get("spot" if facts.spot else "on_demand")
        return None, own.wall_hours if own else None, None
    market, price, cost = chosen
    return cost, market.wall_hours, market.per_m_factor * price


def fit_sort_key(
    sort: Sort, fit: OfferFit, cost: float | None, hours: float | None, per_m: float | None
) -> tuple[float, ...]:
    """The fitting offers' order for a workload sort (NULLs last, as SQL's NULLS LAST)."""
    c = math.inf if cost is None else cost
    h = math.inf if hours is None else hours
    if sort == "time":
        return (h, c, *fit.tiebreak)
    if sort == "cost_per_m":
        return (math.inf if per_m is None else per_m, c, *fit.tiebreak, h)
    return (c, *fit.tiebreak, h)


def _candidates(
    session: Session,
    *,
    filters: OfferFilters,
    bounds: VramBounds,
    assess: Assessor,
    sort: Sort,
    limits: Limits,
) -> list[_Candidate]:
    """Sort keys of every prefiltered offer: one price-free assessment per distinct machine
    shape serves all its offers, priced exactly as the SQL path prices them."""
    # first_seen costs a datetime conversion per row; only the "newest" order reads it.
    columns = _RANK_COLUMNS if sort == "newest" else (*_RANK_COLUMNS[:-1], null())
    stmt = (
        select(*columns)
        .outerjoin(GpuModel, GpuModel.slug == Offer.gpu_model_slug)
        .where(*where_clauses(filters), candidate_clause(bounds))
    )
    bands = listing_bands(session)
    shapes: dict[OfferFacts, OfferFit] = {}
    spot_market = filters.market == "spot"
    out = []
    # Core execution: these are plain tuples, no ORM bookkeeping per row.
    for raw in session.connection().execute(stmt).all():
        base = _price_free_facts(raw, bands)
        fit = shapes.get(base)
        if fit is None:
            fit = shapes[base] = assess(base)
        offer_id, gpu_count = raw[0], raw[1]
        on_demand, spot_price, vram_total, first_seen = raw[18:22]
        priced = replace(base, price_per_hour=on_demand, spot_price_per_hour=spot_price)
        admitted = True
        key: tuple[float, ...] = ()
        if fit.fits:
            cost, hours, per_m = offer_keys(fit, priced)
            admitted = limits.admits(cost, hours)
            key = fit_sort_key(sort, fit, cost, hours, per_m)
        shown = spot_price if spot_market else (on_demand if on_demand is not None else spot_price)
        out.append(
            _Candidate(
                offer_id,
                fit.fit_class,
                key,
                _row_sort_key(sort, shown, gpu_count, vram_total, first_seen, offer_id),
                admitted,
            )
        )
    return out


def _row_sort_key(
    sort: Sort,
    price: float | None,
    gpu_count: float,
    vram_total: float | None,
    first_seen: datetime,
    offer_id: int,
) -> tuple[Any, ...]:
    """The SQL order of `order_by` for values in memory (workload sorts: per GPU-hour)."""
    p = math.inf if price is None else price
    if sort == "price":
        return (p, offer_id)
    if sort == "vram":
        total = -math.inf if vram_total is None else vram_total
        return (-total, p / gpu_count, offer_id)
    if sort == "newest":
        return (-first_seen.timestamp(), offer_id)
    return (p / gpu_count, offer_id)


def _fit_order(sort: Sort) -> Callable[[_Candidate], tuple[Any, ...]]:
    if sort in WORKLOAD_SORTS:
        return lambda c: (*c.fit_key, c.id)
    return lambda c: c.row_key


def in_memory_head(
    session: Session,
    *,
    filters: OfferFilters,
    sort: Sort,
    bounds: VramBounds,
    assess: Assessor,
    limits: Limits,
) -> RankedHead:
    """The page's fitting offers (margin, then tight) and near misses, sorted in Python."""
    candidates = _candidates(
        session, filters=filters, bounds=bounds, assess=assess, sort=sort, limits=limits
    )
    order = _fit_order(sort)
    fitting = sorted(
        (c for c in candidates if c.fit_class != NO_FIT and c.admitted),
        key=lambda c: (c.fit_class, *order(c)),
    )
    # row_key is the rest order for workload sorts (rest_sort): price per GPU-hour.
    missed = sorted((c for c in candidates if c.fit_class == NO_FIT), key=lambda c: c.row_key)
    head = fitting if filters.fits_only else [*fitting, *missed]
    window = head[filters.offset : filters.offset + filters.limit]
    n_tight = sum(1 for c in fitting if c.fit_class == TIGHT)
    return RankedHead([c.id for c in window], len(fitting), len(missed), n_tight, len(candidates))
