"""The filter table: one `FilterSpec` per filter drives the SQL, the form and the caption.

Each filter has a query-string key, a label, an SQL clause built with bound parameters and a
human caption; the sorts' SQL order lives here too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, select

from app.gpus.catalog import UNKNOWN, load_catalog
from app.queries.params import (
    DEFAULT_SORT,
    LABELS,
    SORT_ALIASES,
    WORKLOAD_SORTS,
    OfferFilters,
    Sort,
)
from app.store.models import VRAM_SORT_SQL, GpuModel, Offer, per_gpu_sql


def price_expr(filters: OfferFilters) -> ColumnElement[Any]:
    """Hourly price the table compares: the spot price in the spot market, else on-demand."""
    if filters.market == "spot":
        return Offer.spot_price_per_hour.expression
    return func.coalesce(Offer.price_per_hour, Offer.spot_price_per_hour)


def price_per_gpu_expr(filters: OfferFilters) -> ColumnElement[Any]:
    return per_gpu_sql(price_expr(filters))


def _is_null_or_in(column: Any, values: Sequence[str]) -> ColumnElement[bool]:
    """`column IN values`, where the value "unknown" also matches NULL."""
    named = [v for v in values if v != UNKNOWN]
    parts: list[ColumnElement[bool]] = []
    if named:
        parts.append(column.in_(named))
    if UNKNOWN in values:
        parts.append(column.is_(None))
    return or_(*parts)


def _gpu_name(slug: str) -> str:
    spec = load_catalog().get(slug)
    return spec.name if spec else slug


def label_for(value: str) -> str:
    return LABELS.get(value, value)


def _provider_name(provider: str) -> str:
    """A provider id's display name ("do" -> "DigitalOcean"), from its facts file."""
    from scrapers.facts import display_name

    return display_name(provider)


def _or_list(values: Iterable[str]) -> str:
    items = list(values)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _money(value: float) -> str:
    return f"${value:,.2f}"


@dataclass(frozen=True)
class FilterSpec:
    """One filter: its query key, form label, SQL clause and caption for a given value."""

    key: str
    label: str
    clause: Callable[[Any, OfferFilters], ColumnElement[bool]]
    caption: Callable[[Any], str]
    # facet: the column grouped for counts, and a display label for each value
    facet: Callable[[], Any] | None = None
    facet_label: Callable[[str], str] = label_for


def _vendor_clause(values: list[str], _f: OfferFilters) -> ColumnElement[bool]:
    return Offer.gpu_model_slug.in_(select(GpuModel.slug).where(GpuModel.vendor.in_(values)))


def _q_clause(text: str, _f: OfferFilters) -> ColumnElement[bool]:
    # Escape LIKE wildcards so a "%" typed by a user is a literal percent sign.
    pattern = "%" + text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    return or_(
        func.lower(Offer.instance_type).like(pattern, escape="\\"),
        func.lower(Offer.gpu_raw_name).like(pattern, escape="\\"),
    )


def _market_clause(value: str, _f: OfferFilters) -> ColumnElement[bool]:
    if value == "on_demand":
        # A spot-only listing's price is a spot price, whichever column holds it.
        return and_(Offer.price_per_hour.is_not(None), Offer.spot.is_(False))
    return Offer.spot_price_per_hour.is_not(None)


def _num(value: float) -> str:
    return f"{value:g}"


FILTERS: tuple[FilterSpec, ...] = (
    FilterSpec(
        "gpu",
        "GPU model",
        lambda v, f: _is_null_or_in(Offer.gpu_model_slug, v),
        lambda v: "GPU model is " + _or_list(_gpu_name(s) for s in v),
        facet=lambda: Offer.gpu_model_slug,
        facet_label=lambda s: "unknown" if s == UNKNOWN else _gpu_name(s),
    ),
    FilterSpec(
        "vendor",
        "Vendor",
        _vendor_clause,
        lambda v: "vendor is " + _or_list(label_for(s) for s in v),
        facet=lambda: GpuModel.vendor,
    ),
    FilterSpec(
        "provider",
        "Provider",
        lambda v, f: Offer.provider_id.in_(v),
        lambda v: "provider is " + _or_list(_provider_name(p) for p in v),
        facet=lambda: Offer.provider_id,
        facet_label=lambda p: _provider_name(p),
    ),
    FilterSpec(
        "continent",
        "Continent",
        lambda v, f: _is_null_or_in(Offer.continent, v),
        lambda v: "continent is " + _or_list(v),
        facet=lambda: Offer.continent,
    ),
    FilterSpec(
        "region",
        "Region",
        lambda v, f: Offer.region.in_(v),
        lambda v: "region is " + _or_list(v),
    ),
    FilterSpec(
        "gpu_count",
        "GPU count",
        lambda v, f: Offer.gpu_count.in_(v),
        lambda v: "GPU count is " + _or_list(_num(n) for n in v),
        facet=lambda: Offer.gpu_count,
        facet_label=lambda s: f"{float(s):g}× GPU",
    ),
    FilterSpec(
        "min_vram",
        "Min VRAM per GPU (GiB)",
        lambda v, f: Offer.vram_gib_per_gpu >= v,
        lambda v: f"VRAM per GPU ≥ {v:g} GiB",
    ),
    FilterSpec(
        "min_vram_total",
        "Min total VRAM (GiB)",
        lambda v, f: Offer.vram_gib_total >= v,
        lambda v: f"total VRAM ≥ {v:g} GiB",
    ),
    FilterSpec(
        "market",
        "Market",
        _market_clause,
        lambda v: "spot price available" if v == "spot" else "on-demand price available",
    ),
    FilterSpec(
        "nvlink",
        "NVLink/NVSwitch required",
        lambda v, f: Offer.interconnect.in_(["nvlink", "nvswitch"]),
        lambda v: "GPUs linked by NVLink or NVSwitch",
    ),
    FilterSpec(
        "interconnect",
        "Interconnect",
        lambda v, f: Offer.interconnect.in_(v),
        lambda v: "interconnect is " + _or_list(label_for(s) for s in v),
        facet=lambda: Offer.interconnect,
    ),
    FilterSpec(
        "network",
        "Inter-node network",
        lambda v, f: Offer.network.in_(v),
        lambda v: "network is " + _or_list(label_for(s) for s in v),
        facet=lambda: Offer.network,
    ),
    FilterSpec(
        "billing",
        "Billing granularity",
        lambda v, f: Offer.billing.in_(v),
        lambda v: "billed " + _or_list(label_for(s) for s in v),
        facet=lambda: Offer.billing,
    ),
    FilterSpec(
        "availability",
        "Availability",
        lambda v, f: Offer.availability.in_(v),
        lambda v: "availability is " + _or_list(label_for(s) for s in v),
        facet=lambda: Offer.availability,
    ),
    FilterSpec(
        "in_stock",
        "In stock only",
        lambda v, f: Offer.availability.in_(["in_stock", "limited"]),
        lambda v: "in stock",
    ),
    FilterSpec(
        "max_price_per_hour",
        "Max price per hour ($)",
        lambda v, f: price_expr(f) <= v,
        lambda v: f"price ≤ {_money(v)}/h",
    ),
    FilterSpec(
        "max_price_per_gpu_hour",
        "Max price per GPU-hour ($)",
        lambda v, f: price_per_gpu_expr(f) <= v,
        lambda v: f"price ≤ {_money(v)} per GPU-hour",
    ),
    FilterSpec(
        "q",
        "Search",
        _q_clause,
        lambda v: f"instance or GPU name contains “{v}”",
    ),
)
FILTERS_BY_KEY = {spec.key: spec for spec in FILTERS}
FACET_KEYS = tuple(spec.key for spec in FILTERS if spec.facet is not None)


def _is_active(value: Any) -> bool:
    """Whether a parsed filter value restricts anything (defaults and empty lists do not)."""
    if value is None or value is False:
        return False
    if isinstance(value, list | tuple):
        return bool(value)
    return bool(value != "any")


def active_filters(filters: OfferFilters) -> list[tuple[FilterSpec, Any]]:
    """The filters that restrict the query, with their values, in table order."""
    return [
        (spec, getattr(filters, spec.key))
        for spec in FILTERS
        if _is_active(getattr(filters, spec.key))
    ]


def where_clauses(
    filters: OfferFilters, *, exclude: str | None = None
) -> list[ColumnElement[bool]]:
    """SQL conditions for the filters (minus `exclude`, for its own facet) and activeness."""
    clauses = [
        spec.clause(value, filters)
        for spec, value in active_filters(filters)
        if spec.key != exclude
    ]
    if not filters.include_inactive:
        clauses.append(Offer.active.is_(True))
    return clauses


def caption(filters: OfferFilters) -> str:
    """The "showing offers where ..." sentence for the active filters."""
    parts = [spec.caption(value) for spec, value in active_filters(filters)]
    if filters.include_inactive:
        parts.append("including offers no longer listed")
    if not parts:
        return "showing all current offers"
    return "showing offers where " + "; ".join(parts)


def effective_sort(filters: OfferFilters, *, has_workload: bool) -> Sort:
    """The sort in force: the requested one, total job cost when a workload is set, else price
    per GPU-hour."""
    if filters.sort is None:
        return "cost" if has_workload else DEFAULT_SORT
    if filters.sort in WORKLOAD_SORTS and not has_workload:
        return DEFAULT_SORT
    return SORT_ALIASES.get(filters.sort, filters.sort)


def sort_keys(sort: Sort, filters: OfferFilters) -> list[tuple[ColumnElement[Any], bool]]:
    """The SQL sort keys of a (non-fit) sort as (expression, descending), id last.

    Each matches an index of app.store.models expression for expression (the default and the
    spot market's price per GPU-hour, price, most VRAM, newest), so a first page or a keyset page
    is a short index range scan.
    """
    price = price_expr(filters)
    keys: list[tuple[ColumnElement[Any], bool]]
    if sort == "price":
        keys = [(price, False)]
    elif sort == "vram":
        keys = [(VRAM_SORT_SQL, True), (price_per_gpu_expr(filters), False)]
    elif sort == "newest":
        keys = [(Offer.first_seen.expression, True)]
    else:
        keys = [(price_per_gpu_expr(filters), False)]
    return [*keys, (Offer.id.expression, False)]  # id last: pages never overlap


def order_by(sort: Sort, filters: OfferFilters) -> list[Any]:
    """ORDER BY clauses of `sort_keys`; a leading ascending price puts a missing one last.

    Only the leading key says NULLS LAST: SQLite cannot read it from an index for a later key.
    """
    (lead, lead_desc), *rest = sort_keys(sort, filters)
    return [
        lead.desc() if lead_desc else lead.asc().nulls_last(),
        *(key.desc() if desc else key.asc() for key, desc in rest),
    ]


MARKET_RULE = {
    "any": (
        "each listing is costed in every market it has a price in (spot with its expected "
        "interruption losses) and shown at the lower expected total"
    ),
    "on_demand": "every listing is costed at its on-demand price",
    "spot": "every listing is costed at its spot price, with its expected interruption losses",
}


def fit_caption(filters: OfferFilters) -> str:
    """The caption of a ranked table: the filters, the market rule, the deadline and budget,
    and whether non-fitting offers are hidden."""
    text = caption(filters)
    limits = []
    if filters.max_hours is not None:
        limits.append(f"finishing within {filters.max_hours:g} h")
    if filters.max_cost is not None:
        limits.append(f"costing at most {_money(filters.max_cost)}")
    if limits:
        text += "; plans " + " and ".join(limits)
    text += "; " + MARKET_RULE[filters.market]
    return text + ("; only offers the job fits" if filters.fits_only else "")
