"""Fit ranking in Python over every candidate: the fallback when shapes are too many for SQL."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import null, select
from sqlalchemy.orm import Session

from app.fit import OfferFacts, OfferFit
from app.queries.assess import Assessor, RankedHead, VramBounds, candidate_clause, job_price
from app.queries.filters import where_clauses
from app.queries.params import OfferFilters, Sort
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
    Offer.price_per_hour,
    Offer.spot_price_per_hour,
    Offer.vram_gib_total,
    Offer.first_seen,
)
_N_FACTS = 14  # the leading columns that, with prices None, are the price-free OfferFacts


def _price_free_facts(values: Sequence[Any]) -> OfferFacts:
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
    ) = values[:_N_FACTS]
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
        spot=spot,
        availability=availability,
        gpu_slug=slug,
    )


@dataclass(frozen=True)
class _Candidate:
    """One prefiltered offer's sort keys, computed without building its full row."""

    id: int
    fits: bool
    rank: tuple[float, ...]  # equals rank_key(assess_offer(...)) for the full offer
    cost: float
    row_key: tuple[Any, ...]


def _candidates(
    session: Session,
    *,
    filters: OfferFilters,
    bounds: VramBounds,
    assess: Assessor,
    sort: Sort,
) -> list[_Candidate]:
    """Sort keys of every prefiltered offer. Fit, time and tie-breaks do not depend on the
    price, so one price-free assessment per distinct machine shape serves all its offers and
    the job cost is billed hours × price (exactly what assess_offer computes)."""
    # first_seen costs a datetime conversion per row; only the "newest" order reads it.
    columns = _RANK_COLUMNS if sort == "newest" else (*_RANK_COLUMNS[:-1], null())
    stmt = (
        select(*columns)
        .outerjoin(GpuModel, GpuModel.slug == Offer.gpu_model_slug)
        .where(*where_clauses(filters), candidate_clause(bounds))
    )
    shapes: dict[tuple[Any, ...], OfferFit] = {}
    spot_market = filters.market == "spot"
    out = []
    # Core execution: these are plain tuples, no ORM bookkeeping per row.
    for raw in session.connection().execute(stmt).all():
        shape = raw[1:_N_FACTS]
        base = shapes.get(shape)
        if base is None:
            base = shapes[shape] = assess(_price_free_facts(raw))
        offer_id, gpu_count, spot = raw[0], raw[1], raw[11]
        on_demand, spot_price, vram_total, first_seen = raw[_N_FACTS : _N_FACTS + 4]
        price = job_price(
            price_per_hour=on_demand,
            spot_price_per_hour=spot_price,
            spot=spot,
            use_spot=assess.use_spot,
        )
        cost = math.inf
        if base.fits and base.billed_hours is not None and price is not None:
            cost = base.billed_hours * price
        hours = base.est_hours if base.est_hours is not None else math.inf
        rank = (0.0 if base.fits else 1.0, cost, *base.tiebreak, hours)
        shown = spot_price if spot_market else (on_demand if on_demand is not None else spot_price)
        out.append(
            _Candidate(
                offer_id,
                base.fits,
                rank,
                cost,
                _row_sort_key(sort, shown, gpu_count, vram_total, first_seen, offer_id),
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
    """The SQL order of `order_by` for values in memory (fit/cost fall back to per GPU-hour)."""
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
    if sort == "fit":
        return lambda c: (*c.rank, c.id)
    if sort == "cost":
        return lambda c: (c.cost, *c.rank, c.id)
    return lambda c: c.row_key


def in_memory_head(
    session: Session,
    *,
    filters: OfferFilters,
    sort: Sort,
    bounds: VramBounds,
    assess: Assessor,
) -> RankedHead:
    """The page's fitting offers and near misses, every candidate sorted in Python."""
    candidates = _candidates(session, filters=filters, bounds=bounds, assess=assess, sort=sort)
    fitting = sorted((c for c in candidates if c.fits), key=_fit_order(sort))
    # row_key is the rest order for fit and cost sorts (rest_sort): price per GPU-hour.
    missed = sorted((c for c in candidates if not c.fits), key=lambda c: c.row_key)
    head = fitting if filters.fits_only else [*fitting, *missed]
    window = head[filters.offset : filters.offset + filters.limit]
    return RankedHead([c.id for c in window], len(fitting), len(missed))
