"""Facet counts: per value of each facet over the filtered offers, leaving out its own filter
(so every count is what toggling that value would add or keep); region choices by continent."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.gpus.catalog import UNKNOWN
from app.queries.filters import FACET_KEYS, FILTERS_BY_KEY, active_filters, label_for, where_clauses
from app.queries.params import OfferFilters, filters_key
from app.queries.rows import count_offers
from app.store import data_cache
from app.store.models import GpuModel, Offer


@dataclass(frozen=True)
class FacetValue:
    value: str
    label: str
    count: int
    selected: bool


@dataclass(frozen=True)
class Facet:
    key: str
    label: str
    values: list[FacetValue]


def _selected_strings(filters: OfferFilters, key: str) -> set[str]:
    value = getattr(filters, key)
    if key == "gpu_count":
        return {f"{v:g}" for v in value}
    return {str(v) for v in value}


def _facet_value_str(key: str, raw: Any) -> str:
    if raw is None:
        return UNKNOWN
    if key == "gpu_count":
        return f"{float(raw):g}"
    return str(raw)


def _facet_column(key: str) -> Any:
    facet = FILTERS_BY_KEY[key].facet
    assert facet is not None, key
    return facet()


def _facet_counts_shared(
    session: Session, filters: OfferFilters, keys: Sequence[str]
) -> tuple[dict[str, Counter[str]], int]:
    """Counts for every facet in `keys` from one GROUP BY over the filtered offers, and how
    many offers the filters select in all.

    Facets whose own filter is unset all count over the same rows, so one scan grouped by all
    their columns replaces a scan per facet (the combinations are few: shapes, not offers).
    """
    columns: list[Any] = []
    index: dict[str, int] = {}
    for key in keys:
        # vendor is looked up from the GPU slug below: no join needed.
        column = Offer.gpu_model_slug if key == "vendor" else _facet_column(key)
        for i, existing in enumerate(columns):
            if existing is column:
                index[key] = i
                break
        else:
            index[key] = len(columns)
            columns.append(column)
    with_market = "market" not in _active_keys(filters)
    if with_market:
        # Whether each listing has an on-demand and a spot price, for the market facet.
        columns += [Offer.price_per_hour.is_not(None), Offer.spot_price_per_hour.is_not(None)]
    stmt = select(*columns, func.count()).where(*where_clauses(filters)).group_by(*columns)
    vendors: dict[str, str] = {  # noqa: C416 - dict(rows) loses the row types for mypy
        slug: vendor for slug, vendor in session.execute(select(GpuModel.slug, GpuModel.vendor))
    }
    # Sum per raw column value first (the rows are thousands, the values per column dozens),
    # then turn the few distinct values into facet strings.
    per_column: list[Counter[Any]] = [Counter() for _ in columns]
    total = 0
    for row in session.connection().execute(stmt).all():
        n = int(row[-1])
        total += n
        for i, raw in enumerate(row[:-1]):
            per_column[i][raw] += n
    counts: dict[str, Counter[str]] = {key: Counter() for key in keys}
    for key in keys:
        for raw, n in per_column[index[key]].items():
            if key == "vendor":
                if raw is None or raw not in vendors:
                    continue  # an unmapped GPU has no vendor
                raw = vendors[raw]
            counts[key][_facet_value_str(key, raw)] += n
    if with_market:
        on_demand, spot = per_column[-2], per_column[-1]
        counts["market"] = Counter({"any": total, "on_demand": on_demand[True], "spot": spot[True]})
    return counts, total


def _active_keys(filters: OfferFilters) -> set[str]:
    return {spec.key for spec, _ in active_filters(filters)}


def _facet_counts_own(session: Session, filters: OfferFilters, key: str) -> Counter[str]:
    """Counts for one facet whose own filter is set (it counts without that filter)."""
    column = _facet_column(key)
    stmt = select(column, func.count()).select_from(Offer)
    if key == "vendor":
        stmt = stmt.join(GpuModel, GpuModel.slug == Offer.gpu_model_slug)
    stmt = stmt.where(*where_clauses(filters, exclude=key)).group_by(column)
    return Counter({_facet_value_str(key, raw): int(n) for raw, n in session.execute(stmt)})


def facets(session: Session, *, filters: OfferFilters, max_values: int = 40) -> list[Facet]:
    """Counts per value for each facet over the filtered offers (leaving out its own filter).

    Cached per filter set until the next ingest (app.store.data_cache).
    """
    value = data_cache.cached(
        session,
        "facets",
        (filters_key(filters), max_values),  # the sort and page change no count
        lambda: _compute_facets(session, filters=filters, max_values=max_values),
    )
    return copy.deepcopy(value)


def _compute_facets(session: Session, *, filters: OfferFilters, max_values: int) -> list[Facet]:
    active = _active_keys(filters)
    shared = [key for key in FACET_KEYS if key not in active]
    counts, total = _facet_counts_shared(session, filters, shared)
    # The scan counted every filtered offer: the table's total needs no scan of its own.
    count_offers(session, filters=filters, derived=lambda: total)
    for key in FACET_KEYS:
        if key in active:
            counts[key] = _facet_counts_own(session, filters, key)
    out: list[Facet] = []
    for key in FACET_KEYS:
        spec = FILTERS_BY_KEY[key]
        selected = _selected_strings(filters, key)
        top = sorted(counts[key].items(), key=lambda item: (-item[1], item[0]))[:max_values]
        values = [
            FacetValue(value, spec.facet_label(value), count, value in selected)
            for value, count in top
        ]
        # A selected value with no matches still needs a way to be un-ticked.
        for value in sorted(selected - {v.value for v in values}):
            values.append(FacetValue(value, spec.facet_label(value), 0, True))
        if key == "gpu_count":
            values.sort(key=lambda v: float(v.value))
        out.append(Facet(key, spec.label, values))
    out.append(_market_facet(session, filters, counts.get("market")))
    return out


def _market_facet(session: Session, filters: OfferFilters, counts: Counter[str] | None) -> Facet:
    # An on-demand listing may carry a spot price too, so the two counts overlap.
    if counts is None:
        stmt = select(
            func.count(),
            func.sum(case((Offer.price_per_hour.is_not(None), 1), else_=0)),
            func.sum(case((Offer.spot_price_per_hour.is_not(None), 1), else_=0)),
        ).where(*where_clauses(filters, exclude="market"))
        total, on_demand, spot = session.execute(stmt).one()
        counts = Counter(
            {"any": int(total or 0), "on_demand": int(on_demand or 0), "spot": int(spot or 0)}
        )
    return Facet(
        "market",
        "Market",
        [
            FacetValue(
                value,
                label_for(value) if value != "any" else "any",
                counts[value],
                filters.market == value,
            )
            for value in ("any", "on_demand", "spot")
        ],
    )


@dataclass(frozen=True)
class RegionGroup:
    continent: str
    regions: list[FacetValue]


# Kept in the shared aggregate cache too, so every process reads what an ingest warmed.
data_cache.share("facets", Facet, FacetValue)
data_cache.share("regions", RegionGroup, FacetValue)


def regions_by_continent(session: Session, *, filters: OfferFilters) -> list[RegionGroup]:
    """Region choices with counts, grouped by continent (for the region filter); cached."""
    return data_cache.cached(
        session, "regions", filters_key(filters), lambda: _regions(session, filters)
    )


def _regions(session: Session, filters: OfferFilters) -> list[RegionGroup]:
    stmt = (
        select(Offer.continent, Offer.region, func.count())
        .where(*where_clauses(filters, exclude="region"))
        .group_by(Offer.continent, Offer.region)
        .order_by(Offer.continent, Offer.region)
    )
    selected = set(filters.region)
    groups: dict[str, list[FacetValue]] = {}
    for continent, region, count in session.execute(stmt):
        groups.setdefault(continent or "Other", []).append(
            FacetValue(region, region, int(count), region in selected)
        )
    return [RegionGroup(c, groups[c]) for c in sorted(groups, key=lambda c: (c == "Other", c))]
