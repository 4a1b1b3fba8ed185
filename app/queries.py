"""Offer queries: one declarative filter table drives the SQL, the form, the facets and the caption.

Every filter is a `FilterSpec` (query-string key, label, SQL clause built with bound parameters,
human caption). `search_offers` filters, sorts and paginates in SQL; with a workload it prefilters
in SQL to offers whose VRAM could hold the job, assesses only those candidates, ranks them and
appends the non-fitting rest. Facets are counted over the filtered query (each facet leaves out
its own filter, so every value's count is what toggling it would add or keep).
"""

from __future__ import annotations

import copy
import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from sqlalchemy import (
    ARRAY,
    Boolean,
    ColumnElement,
    Float,
    Select,
    String,
    and_,
    bindparam,
    case,
    cast,
    column,
    exists,
    func,
    literal,
    null,
    or_,
    select,
    values,
)
from sqlalchemy.orm import Session

from app import data_cache
from app.fit import (
    MemoryEstimate,
    OfferFacts,
    OfferFit,
    Workload,
    assess_offer,
    estimate_memory,
)
from app.fit.memory import per_gpu_breakdown
from app.fit.query import workload_from_query
from app.fit.serialize import fit_dict
from app.gpus.catalog import UNKNOWN, load_catalog
from app.models import (
    NO_GBPS,
    NO_SLUG,
    SHAPE_GBPS_SQL,
    SHAPE_SLUG_SQL,
    GpuModel,
    Offer,
    PricePoint,
    Provider,
    job_price_sql,
    per_gpu_sql,
)

Sort = Literal["fit", "cost", "price", "price_per_gpu", "vram", "newest"]
Market = Literal["any", "on_demand", "spot"]
InterconnectValue = Literal["nvswitch", "nvlink", "pcie", "unknown"]
NetworkValue = Literal["infiniband", "roce", "efa", "ethernet", "none", "unknown"]
BillingValue = Literal["second", "minute", "hour", "unknown"]
AvailabilityValue = Literal["in_stock", "limited", "out", "unknown"]

SORT_LABELS: dict[str, str] = {
    "fit": "Best fit",
    "cost": "Total job cost",
    "price": "Price per hour",
    "price_per_gpu": "Price per GPU-hour",
    "vram": "VRAM (most first)",
    "newest": "Newest",
}
WORKLOAD_SORTS = ("fit", "cost")
# The workload query parameters of /api/estimate (app.fit.query), shared by every table.
WORKLOAD_KEYS = (
    "model",
    "params_b",
    "method",
    "precision",
    "optimizer",
    "batch_size",
    "seq_len",
    "grad_checkpointing",
    "lora_rank",
    "sharding",
    "gpus",
    "tokens",
)
DEFAULT_SORT: Sort = "price_per_gpu"
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
LABELS: dict[str, str] = {
    "nvswitch": "NVSwitch",
    "nvlink": "NVLink",
    "pcie": "PCIe",
    "infiniband": "InfiniBand",
    "roce": "RoCE",
    "efa": "EFA",
    "ethernet": "Ethernet",
    "none": "none",
    "second": "per second",
    "minute": "per minute",
    "hour": "per hour",
    "in_stock": "in stock",
    "limited": "limited",
    "out": "out of stock",
    "unknown": "unknown",
    "on_demand": "on-demand",
    "spot": "spot",
    "nvidia": "NVIDIA",
    "amd": "AMD",
    "intel": "Intel",
}


def _blank_to_none(value: Any) -> Any:
    """An empty form field means "no filter", not an invalid number."""
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _drop_blanks(value: Any) -> Any:
    if isinstance(value, list):
        return [v for v in value if not (isinstance(v, str) and not v.strip())]
    return value


OptFloat = Annotated[
    Annotated[float, Field(ge=0, le=1_000_000)] | None, BeforeValidator(_blank_to_none)
]


def _strs(values: Any) -> Any:
    return [v.strip() for v in _drop_blanks(values)] if isinstance(values, list) else values


StrList = Annotated[list[Annotated[str, Field(max_length=200)]], BeforeValidator(_strs)]


class OfferFilters(BaseModel):
    """The table's query parameters (filters, sort, page); workload params live in app.fit."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False, extra="ignore")

    gpu: StrList = Field(default_factory=list, max_length=100)
    vendor: Annotated[list[Literal["nvidia", "amd", "intel"]], BeforeValidator(_drop_blanks)] = (
        Field(default_factory=list)
    )
    provider: StrList = Field(default_factory=list, max_length=100)
    continent: StrList = Field(default_factory=list, max_length=20)
    region: StrList = Field(default_factory=list, max_length=200)
    gpu_count: Annotated[
        list[Annotated[float, Field(gt=0, le=1024)]], BeforeValidator(_drop_blanks)
    ] = Field(default_factory=list, max_length=50)
    min_vram: OptFloat = None
    min_vram_total: OptFloat = None
    market: Annotated[Market, BeforeValidator(lambda v: _blank_to_none(v) or "any")] = "any"
    nvlink: bool = False
    interconnect: Annotated[list[InterconnectValue], BeforeValidator(_drop_blanks)] = Field(
        default_factory=list
    )
    network: Annotated[list[NetworkValue], BeforeValidator(_drop_blanks)] = Field(
        default_factory=list
    )
    billing: Annotated[list[BillingValue], BeforeValidator(_drop_blanks)] = Field(
        default_factory=list
    )
    availability: Annotated[list[AvailabilityValue], BeforeValidator(_drop_blanks)] = Field(
        default_factory=list
    )
    in_stock: bool = False
    max_price_per_hour: OptFloat = None
    max_price_per_gpu_hour: OptFloat = None
    q: Annotated[Annotated[str, Field(max_length=100)] | None, BeforeValidator(_blank_to_none)] = (
        None
    )
    include_inactive: bool = False
    fits_only: bool = False
    sort: Annotated[Sort | None, BeforeValidator(_blank_to_none)] = None
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    offset: int = Field(default=0, ge=0, le=10_000_000)


LIST_KEYS = frozenset(
    name for name, info in OfferFilters.model_fields.items() if get_origin(info.annotation) is list
)


def filters_from_args(args: Sequence[tuple[str, str]]) -> OfferFilters:
    """OfferFilters from query pairs (repeated keys for lists); raises pydantic ValidationError."""
    data: dict[str, Any] = {}
    for key, value in args:
        if key in LIST_KEYS:
            data.setdefault(key, []).append(value)
        elif key in OfferFilters.model_fields and key not in data:
            data[key] = value
    return OfferFilters.model_validate(data)


def workload_from_args(args: Sequence[tuple[str, str]]) -> Workload | None:
    """The workload a query names (model or params_b), else None; blank values mean default.

    Raises RequestValidationError naming the field, like the API's workload parameters.
    """
    values: dict[str, str] = {}
    for key, value in args:
        if key in WORKLOAD_KEYS and key not in values and value.strip():
            values[key] = value.strip()
    if "model" not in values and "params_b" not in values:
        return None
    return workload_from_query(**values)


# ---------------------------------------------------------------------------------------------
# Price expressions: spot listings have no on-demand price, so "the price" depends on the market.


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


def _label(value: str) -> str:
    return LABELS.get(value, value)


def _or_list(values: Iterable[str]) -> str:
    items = list(values)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _money(value: float) -> str:
    return f"${value:,.2f}"


# ---------------------------------------------------------------------------------------------
# The filter table


@dataclass(frozen=True)
class FilterSpec:
    """One filter: its query key, form label, SQL clause and caption for a given value."""

    key: str
    label: str
    clause: Callable[[Any, OfferFilters], ColumnElement[bool]]
    caption: Callable[[Any], str]
    # facet: the column grouped for counts, and a display label for each value
    facet: Callable[[], Any] | None = None
    facet_label: Callable[[str], str] = _label


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
        return Offer.price_per_hour.is_not(None)
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
        lambda v: "vendor is " + _or_list(_label(s) for s in v),
        facet=lambda: GpuModel.vendor,
    ),
    FilterSpec(
        "provider",
        "Provider",
        lambda v, f: Offer.provider_id.in_(v),
        lambda v: "provider is " + _or_list(v),
        facet=lambda: Offer.provider_id,
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
        lambda v: "interconnect is " + _or_list(_label(s) for s in v),
        facet=lambda: Offer.interconnect,
    ),
    FilterSpec(
        "network",
        "Inter-node network",
        lambda v, f: Offer.network.in_(v),
        lambda v: "network is " + _or_list(_label(s) for s in v),
        facet=lambda: Offer.network,
    ),
    FilterSpec(
        "billing",
        "Billing granularity",
        lambda v, f: Offer.billing.in_(v),
        lambda v: "billed " + _or_list(_label(s) for s in v),
        facet=lambda: Offer.billing,
    ),
    FilterSpec(
        "availability",
        "Availability",
        lambda v, f: Offer.availability.in_(v),
        lambda v: "availability is " + _or_list(_label(s) for s in v),
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


# ---------------------------------------------------------------------------------------------
# Rows


@dataclass(frozen=True)
class OfferRow:
    """One offer with its provider and GPU details: what tables and the fit engine need."""

    id: int
    provider: str
    provider_name: str
    source: str
    instance_type: str
    region: str
    continent: str | None
    spot: bool
    gpu_model: str
    gpu_name: str
    gpu_vendor: str | None
    gpu_raw_name: str
    gpu_count: float
    vram_gib_per_gpu: float | None
    vram_gib_total: float | None
    vcpus: float | None
    ram_gib: float | None
    disk_gib: float | None
    interconnect: str
    network: str
    network_gbps: float | None
    price_per_hour: float | None
    spot_price_per_hour: float | None
    price_per_gpu_hour: float | None
    currency: str
    billing: str
    availability: str
    availability_count: int | None
    first_seen: datetime
    last_seen: datetime
    active: bool
    bf16_tflops: float | None
    fp16_tflops: float | None
    memory_type: str | None
    nvlink_gbps: float | None

    @property
    def spot_price_per_gpu_hour(self) -> float | None:
        spot = self.spot_price_per_hour
        return None if spot is None else spot / self.gpu_count


_ROW_COLUMNS: tuple[Any, ...] = (
    Offer.id,
    Offer.provider_id,
    Provider.display_name,
    Offer.source,
    Offer.instance_type,
    Offer.region,
    Offer.continent,
    Offer.spot,
    Offer.gpu_model_slug,
    GpuModel.name,
    GpuModel.vendor,
    Offer.gpu_raw_name,
    Offer.gpu_count,
    Offer.vram_gib_per_gpu,
    Offer.vram_gib_total,
    Offer.vcpus,
    Offer.ram_gib,
    Offer.disk_gib,
    Offer.interconnect,
    Offer.network,
    Offer.network_gbps,
    Offer.price_per_hour,
    Offer.spot_price_per_hour,
    Offer.price_per_gpu_hour,
    Offer.currency,
    Offer.billing,
    Offer.availability,
    Offer.availability_count,
    Offer.first_seen,
    Offer.last_seen,
    Offer.active,
    GpuModel.bf16_tflops,
    GpuModel.fp16_tflops,
    GpuModel.memory_type,
    GpuModel.nvlink_gbps,
)


def _row_select() -> Select[Any]:
    return (
        select(*_ROW_COLUMNS)
        .join(Provider, Provider.id == Offer.provider_id)
        .outerjoin(GpuModel, GpuModel.slug == Offer.gpu_model_slug)
    )


def _to_row(raw: Sequence[Any]) -> OfferRow:
    values = list(raw)
    slug = values[8]
    values[8] = slug or UNKNOWN
    # An offer whose GPU is not in the catalog shows the provider's own spelling.
    values[9] = values[9] or values[11]
    return OfferRow(*values)


def _rows(session: Session, stmt: Select[Any]) -> list[OfferRow]:
    return [_to_row(r) for r in session.execute(stmt)]


def get_offer(session: Session, *, offer_id: int) -> OfferRow | None:
    """One offer by id (active or not), or None."""
    rows = _rows(session, _row_select().where(Offer.id == offer_id))
    return rows[0] if rows else None


# ---------------------------------------------------------------------------------------------
# Sorting


def effective_sort(filters: OfferFilters, *, has_workload: bool) -> Sort:
    """The sort in force: the requested one, fit when a workload is set, else price per GPU-hour."""
    if filters.sort is None:
        return "fit" if has_workload else DEFAULT_SORT
    if filters.sort in WORKLOAD_SORTS and not has_workload:
        return DEFAULT_SORT
    return filters.sort


def _order_by(sort: Sort, filters: OfferFilters) -> list[Any]:
    price = price_expr(filters)
    if sort == "price":
        keys = [price.asc().nulls_last()]
    elif sort == "vram":
        keys = [Offer.vram_gib_total.desc().nulls_last(), price_per_gpu_expr(filters).asc()]
    elif sort == "newest":
        keys = [Offer.first_seen.desc()]
    else:
        keys = [price_per_gpu_expr(filters).asc().nulls_last()]
    return [*keys, Offer.id.asc()]  # id last: a stable order makes pages not overlap


# ---------------------------------------------------------------------------------------------
# Facets


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
) -> dict[str, Counter[str]]:
    """Counts for every facet in `keys` from one GROUP BY over the filtered offers.

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
    for row in session.connection().execute(stmt).all():
        n = int(row[-1])
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
        total = sum(on_demand.values())
        counts["market"] = Counter({"any": total, "on_demand": on_demand[True], "spot": spot[True]})
    return counts


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


def _filters_key(filters: OfferFilters) -> str:
    """What selects the rows (not sort, page or fits_only): the key of cached aggregates."""
    return filters.model_dump_json(exclude={"sort", "limit", "offset", "fits_only"})


def facets(session: Session, *, filters: OfferFilters, max_values: int = 40) -> list[Facet]:
    """Counts per value for each facet over the filtered offers (leaving out its own filter).

    Cached per filter set until the next ingest (app.data_cache).
    """
    value = data_cache.cached(
        session,
        "facets",
        (_filters_key(filters), filters.model_dump_json(include={"sort"}), max_values),
        lambda: _compute_facets(session, filters=filters, max_values=max_values),
    )
    return copy.deepcopy(value)


def _compute_facets(session: Session, *, filters: OfferFilters, max_values: int) -> list[Facet]:
    active = _active_keys(filters)
    shared = [key for key in FACET_KEYS if key not in active]
    counts = _facet_counts_shared(session, filters, shared)
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
                _label(value) if value != "any" else "any",
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


def regions_by_continent(session: Session, *, filters: OfferFilters) -> list[RegionGroup]:
    """Region choices with counts, grouped by continent (for the region filter); cached."""
    return data_cache.cached(
        session, "regions", _filters_key(filters), lambda: _regions(session, filters)
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


# ---------------------------------------------------------------------------------------------
# Search


@dataclass(frozen=True)
class RankedOffer:
    """A table row: the offer, and its fit when a workload is set."""

    row: OfferRow
    fit: OfferFit | None = None


@dataclass(frozen=True)
class OfferPage:
    """A page of offers and what produced it."""

    total: int
    offers: list[RankedOffer]
    limit: int
    offset: int
    sort: Sort
    caption: str
    estimate: MemoryEstimate | None = None
    fitting: int | None = None  # how many offers fit, when a workload is set


def count_offers(session: Session, *, filters: OfferFilters) -> int:
    """How many offers the filters select (cached until the next ingest)."""
    return count_where(session, filters=filters, extra=[])


def search_offers(
    session: Session, *, filters: OfferFilters, workload: Workload | None = None
) -> OfferPage:
    """Filter, sort and paginate offers; with a workload, rank them by fit (fitting ones first)."""
    sort = effective_sort(filters, has_workload=workload is not None)
    if workload is not None:
        return _ranked_page(session, filters=filters, workload=workload, sort=sort)
    stmt = (
        _row_select()
        .where(*where_clauses(filters))
        .order_by(*_order_by(sort, filters))
        .limit(filters.limit)
        .offset(filters.offset)
    )
    return OfferPage(
        total=count_offers(session, filters=filters),
        offers=[RankedOffer(r) for r in _rows(session, stmt)],
        limit=filters.limit,
        offset=filters.offset,
        sort=sort,
        caption=caption(filters),
    )


# ---------------------------------------------------------------------------------------------
# Ranking by fit


def offer_facts(row: OfferRow) -> OfferFacts:
    """The fit engine's view of one offer."""
    return OfferFacts(
        gpu_count=row.gpu_count,
        vram_gib_per_gpu=row.vram_gib_per_gpu,
        bf16_tflops=row.bf16_tflops,
        fp16_tflops=row.fp16_tflops,
        memory_type=row.memory_type,
        interconnect=row.interconnect,
        nvlink_gbps=row.nvlink_gbps,
        network=row.network,
        network_gbps=row.network_gbps,
        billing=row.billing,
        price_per_hour=row.price_per_hour,
        spot_price_per_hour=row.spot_price_per_hour,
        spot=row.spot,
        availability=row.availability,
    )


@dataclass(frozen=True)
class VramBounds:
    """Lower bounds any fitting offer meets: per-GPU VRAM, and total VRAM of whole-GPU offers."""

    per_gpu_gib: float
    total_gib: float


# The SQL prefilter must never drop an offer that fits; shave a little off for float noise.
_BOUND_SLACK = 0.999
_MANY_GPUS = 1024


def vram_bounds(workload: Workload, estimate: MemoryEstimate) -> VramBounds:
    """Sound lower bounds on what a fitting offer needs (see assess_offer's layouts).

    Per GPU: no layout needs less than ZeRO-3 over very many GPUs (only activations, logits and
    overheads stay) or the job alone on one GPU. In total: n GPUs each holding their share need
    at least what one GPU holding everything needs, since sharding only splits model states.
    """
    arch = estimate.arch
    one = per_gpu_breakdown(workload, arch, 1, workload.sharding).total_gib
    spread = per_gpu_breakdown(workload, arch, _MANY_GPUS, "zero3").total_gib
    return VramBounds(per_gpu_gib=min(one, spread) * _BOUND_SLACK, total_gib=one * _BOUND_SLACK)


def _candidate_clause(bounds: VramBounds) -> ColumnElement[bool]:
    """Offers whose VRAM could hold the job (the fit ranking's SQL prefilter)."""
    return and_(Offer.vram_gib_per_gpu >= bounds.per_gpu_gib, _total_vram_clause(bounds))


def _total_vram_clause(bounds: VramBounds) -> ColumnElement[bool]:
    # Fractional (shared) GPUs count as one whole GPU for memory, so the total bound skips them.
    return or_(Offer.gpu_count < 1, Offer.vram_gib_total >= bounds.total_gib)


def _shape_member_clause(bounds: VramBounds) -> ColumnElement[bool]:
    """`_candidate_clause` for offers joined to candidate shapes by their exact VRAM per GPU.

    The shapes met the per-GPU bound already, so it is left out: beside the join's equality on
    that column, SQLite's planner would take the range instead and stop using the shape index
    after its fourth column.
    """
    return _total_vram_clause(bounds)


def _rest_clause(bounds: VramBounds) -> ColumnElement[bool]:
    """The complement of `_candidate_clause`, NULL-safe (unknown VRAM never fits)."""
    return or_(
        Offer.vram_gib_per_gpu.is_(None),
        Offer.vram_gib_per_gpu < bounds.per_gpu_gib,
        and_(
            Offer.gpu_count >= 1,
            or_(Offer.vram_gib_total.is_(None), Offer.vram_gib_total < bounds.total_gib),
        ),
    )


class _Assessor:
    """assess_offer with a cache: offers with identical facts (common in lists) share a result.

    The fit is a pure function of (workload, facts, market), so results outlive the data
    version: after an ingest only shapes never seen before are assessed again.
    """

    def __init__(self, workload: Workload, *, use_spot: bool) -> None:
        self.workload, self.use_spot = workload, use_spot
        self.estimate = estimate_memory(workload)

    def __call__(self, facts: OfferFacts) -> OfferFit:
        key = (self.workload, self.use_spot, facts)
        with _FIT_LOCK:
            fit = _FIT_CACHE.get(key)
            if fit is not None:
                _FIT_CACHE.move_to_end(key)
                return fit
        fit = assess_offer(self.workload, self.estimate, facts, use_spot=self.use_spot)
        with _FIT_LOCK:
            _FIT_CACHE[key] = fit
            while len(_FIT_CACHE) > _FIT_CACHE_SIZE:
                _FIT_CACHE.popitem(last=False)
        return fit


# A few hundred shapes per workload: room for the recent workloads of every visitor.
_FIT_CACHE_SIZE = 100_000
_FIT_CACHE: OrderedDict[tuple[Workload, bool, OfferFacts], OfferFit] = OrderedDict()
_FIT_LOCK = threading.Lock()


def forget_fit_assessments() -> None:
    """Empty the process-wide fit cache (tests)."""
    with _FIT_LOCK:
        _FIT_CACHE.clear()


def assess_row(row: OfferRow, workload: Workload, *, use_spot: bool = False) -> OfferFit:
    """The fit of `workload` on one offer (offer and detail pages)."""
    estimate = estimate_memory(workload)
    return assess_offer(workload, estimate, offer_facts(row), use_spot=use_spot)


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
    Offer.price_per_hour,
    Offer.spot_price_per_hour,
    Offer.vram_gib_total,
    Offer.first_seen,
)
_N_FACTS = 13  # the leading columns that, with prices None, are the price-free OfferFacts


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
    )


def job_price(
    *,
    price_per_hour: float | None,
    spot_price_per_hour: float | None,
    spot: bool,
    use_spot: bool,
) -> float | None:
    """The hourly price assess_offer bills a job at (kept in step with app.fit.offers)."""
    if spot or use_spot:
        if spot_price_per_hour is not None:
            return spot_price_per_hour
        return price_per_hour if spot else None
    return price_per_hour


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
    assess: _Assessor,
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
        .where(*where_clauses(filters), _candidate_clause(bounds))
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
        on_demand, spot_price, vram_total, first_seen = raw[13:17]
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
    """The SQL order of `_order_by` for values in memory (fit/cost fall back to per GPU-hour)."""
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


def _full(session: Session, ids: Sequence[int], assess: _Assessor) -> list[RankedOffer]:
    """Full rows with their full assessment, in the order of `ids`."""
    if not ids:
        return []
    by_id = {row.id: row for row in _rows(session, _row_select().where(Offer.id.in_(ids)))}
    return [RankedOffer(by_id[i], assess(offer_facts(by_id[i]))) for i in ids]


# Shapes: the offer columns that, with the GPU model's facts, decide an offer's price-free fit.
_SHAPE_COLUMNS: tuple[Any, ...] = (
    Offer.gpu_model_slug,
    Offer.gpu_count,
    Offer.vram_gib_per_gpu,
    Offer.interconnect,
    Offer.network,
    Offer.network_gbps,
    Offer.billing,
    Offer.spot,
    Offer.availability,
)
_GPU_FACT_COLUMNS: tuple[Any, ...] = (
    GpuModel.bf16_tflops,
    GpuModel.fp16_tflops,
    GpuModel.memory_type,
    GpuModel.nvlink_gbps,
)
# Each shape becomes one row of a VALUES list of about 17 bound parameters; SQLite allows 32,766
# per statement. Past this many shapes the ranking runs in Python instead (slower, same order).
MAX_SQL_SHAPES = 1500


@dataclass(frozen=True)
class _Shape:
    key: tuple[Any, ...]  # _SHAPE_COLUMNS' values, NULLs replaced by the stand-ins
    facts: OfferFacts  # price-free
    count: int
    min_job_price: tuple[float | None, float | None]  # lowest job_price: (on demand, spot)


def _shape_groups(session: Session, filters: OfferFilters, bounds: VramBounds) -> list[_Shape]:
    """The distinct shapes among the prefiltered offers, with counts (cached until an ingest)."""

    def compute() -> list[_Shape]:
        # Group the offers alone, then join the GPU facts to the few groups: grouping by the
        # GPU columns too makes Postgres sort every candidate (spilling to disk at 100k).
        groups = (
            select(
                *_SHAPE_COLUMNS,
                func.count().label("n"),
                func.min(job_price_expr(use_spot=False)).label("min_on_demand"),
                func.min(job_price_expr(use_spot=True)).label("min_spot"),
            )
            .where(*where_clauses(filters), _candidate_clause(bounds))
            .group_by(*_SHAPE_COLUMNS)
            .subquery()
        )
        stmt = select(
            *(groups.c[c.key] for c in _SHAPE_COLUMNS),
            *_GPU_FACT_COLUMNS,
            groups.c.n,
            groups.c.min_on_demand,
            groups.c.min_spot,
        ).outerjoin(GpuModel, GpuModel.slug == groups.c.gpu_model_slug)
        out = []
        for row in session.connection().execute(stmt).all():
            slug, count_, vram, interconnect, network, gbps, billing, spot, availability = row[:9]
            bf16, fp16, memory, nvlink, n, min_on_demand, min_spot = row[9:]
            facts = OfferFacts(
                gpu_count=count_,
                vram_gib_per_gpu=vram,
                bf16_tflops=bf16,
                fp16_tflops=fp16,
                memory_type=memory,
                interconnect=interconnect,
                nvlink_gbps=nvlink,
                network=network,
                network_gbps=gbps,
                billing=billing,
                spot=bool(spot),
                availability=availability,
            )
            key = (
                NO_SLUG if slug is None else slug,
                count_,
                vram,
                interconnect,
                network,
                NO_GBPS if gbps is None else gbps,
                billing,
                bool(spot),
                availability,
            )
            out.append(_Shape(key, facts, int(n), (min_on_demand, min_spot)))
        return out

    cache_key = (_filters_key(filters), bounds.per_gpu_gib, bounds.total_gib)
    return data_cache.cached(session, "fit_shapes", cache_key, compute)


def job_price_expr(*, use_spot: bool) -> ColumnElement[Any]:
    """SQL twin of `job_price`: the hourly price a job on the offer is billed at."""
    expr: ColumnElement[Any] = job_price_sql(use_spot=use_spot)
    return expr


_KEY_VALUE_COLUMNS = (
    ("slug", String),
    ("gpu_count", Float),
    ("vram", Float),
    ("interconnect", String),
    ("network", String),
    ("gbps", Float),
    ("billing", String),
    ("spot", Boolean),
    ("availability", String),
)


# Slack on the per-shape price ceiling so float rounding of cost / hours never drops an offer
# the exact cost bound keeps (the relative rounding error is ~1e-16).
_CEILING_SLACK = 1 + 1e-9


def _shapes_table(
    session: Session,
    shapes: Sequence[tuple[_Shape, OfferFit]],
    *,
    with_rank: bool,
    max_cost: float | None = None,
) -> Any:
    """The shapes as a table (a CTE): their key columns, and with `with_rank` the price-free
    parts of rank_key (billed hours, tie-breaks, hours) and the highest price at which an
    offer of the shape stays within `max_cost`."""
    columns: list[tuple[str, Any]] = list(_KEY_VALUE_COLUMNS)
    if with_rank:
        n_ties = len(shapes[0][1].tiebreak)
        columns += [("billed_hours", Float), *((f"t{i}", Float) for i in range(n_ties))]
        columns += [("hours", Float), ("max_price", Float)]

        def ceiling(fit: OfferFit) -> float | None:
            if max_cost is None or not fit.billed_hours:
                return None
            return max_cost / fit.billed_hours * _CEILING_SLACK

        data = [(*s.key, f.billed_hours, *f.tiebreak, f.est_hours, ceiling(f)) for s, f in shapes]
    else:
        data = [s.key for s, _ in shapes]
    if session.get_bind().dialect.name == "postgresql":
        # One array per column, zipped by unnest: SQLAlchemy compiles a VALUES list at ~35 us
        # per bound value, which for a few hundred shapes costs more than the query itself.
        arrays = [
            func.unnest(
                bindparam(f"shape_{name}", [row[i] for row in data], type_=ARRAY(type_))
            ).label(name)
            for i, (name, type_) in enumerate(columns)
        ]
        return select(*arrays).cte("shapes")
    table = values(*(column(name, type_) for name, type_ in columns), name="shapes")
    return table.data(data).cte("shapes")


def _matches(table: Any) -> ColumnElement[bool]:
    """An offer has the shape of a `_shapes_table` row (NULLs compared via their stand-ins)."""
    return and_(
        SHAPE_SLUG_SQL == table.c.slug,
        Offer.gpu_count == table.c.gpu_count,
        Offer.vram_gib_per_gpu == table.c.vram,
        Offer.interconnect == table.c.interconnect,
        Offer.network == table.c.network,
        SHAPE_GBPS_SQL == table.c.gbps,
        Offer.billing == table.c.billing,
        Offer.spot == table.c.spot,
        Offer.availability == table.c.availability,
    )


def _min_cost(shape: _Shape, fit: OfferFit, use_spot: bool) -> float | None:
    """The cheapest job cost among the shape's offers (billed hours x its lowest price)."""
    price = shape.min_job_price[use_spot]
    return None if fit.billed_hours is None or price is None else fit.billed_hours * price


def _ranked_ids(
    session: Session,
    *,
    filters: OfferFilters,
    bounds: VramBounds,
    fitting: Sequence[tuple[_Shape, OfferFit]],
    use_spot: bool,
    limit: int,
    offset: int,
) -> list[int]:
    """Ids of one page of the fitting offers in rank_key order, sorted by the database.

    Pruned first: each shape's cheapest offer costs `_min_cost`, so the k-th smallest of those
    (k = offset + limit) bounds the cost of the whole page; only shapes at or under it can
    contribute, and only their offers at or under it are sorted.
    """
    if limit <= 0 or not fitting:
        return []
    costs = sorted(c for s, f in fitting if (c := _min_cost(s, f, use_spot)) is not None)
    max_cost = costs[offset + limit - 1] if len(costs) >= offset + limit else None
    if max_cost is not None:
        fitting = [
            (s, f)
            for s, f in fitting
            if (c := _min_cost(s, f, use_spot)) is not None and c <= max_cost
        ]
    table = _shapes_table(session, fitting, with_rank=True, max_cost=max_cost)
    # A column that is NULL in every VALUES row has no type on Postgres: cast it.
    cost = cast(table.c.billed_hours, Float) * job_price_expr(use_spot=use_spot)
    ties = [cast(c, Float).asc() for c in table.c if c.name.startswith("t")]
    hours = cast(table.c.hours, Float)
    stmt = (
        select(Offer.id)
        .join(table, _matches(table))
        .where(*where_clauses(filters), _shape_member_clause(bounds))
        .order_by(cost.asc().nulls_last(), *ties, hours.asc().nulls_last(), Offer.id.asc())
        .limit(limit)
        .offset(offset)
    )
    if max_cost is not None:
        # The per-shape price ceiling is implied by the cost bound; it is what lets the
        # shape index (ix_offers_active_shape_job_price) read only the offers that can make it.
        price = job_price_expr(use_spot=use_spot)
        stmt = stmt.where(cost <= max_cost, price <= cast(table.c.max_price, Float))
    return list(session.scalars(stmt))


def _member_ids(
    session: Session,
    *,
    filters: OfferFilters,
    bounds: VramBounds,
    members: Sequence[tuple[_Shape, OfferFit]],
    others: Sequence[tuple[_Shape, OfferFit]],
    order: list[Any],
    limit: int,
    offset: int,
) -> list[int]:
    """Ids of one page of the prefiltered offers whose shape is among `members`, in `order`.

    The VALUES list holds the smaller of `members` and `others` (the remaining shapes): a join
    for the first, an anti-join for the second.
    """
    if limit <= 0 or not members:
        return []
    stmt = select(Offer.id).where(*where_clauses(filters))
    if len(members) <= len(others):
        table = _shapes_table(session, members, with_rank=False)
        stmt = stmt.join(table, _matches(table)).where(_shape_member_clause(bounds))
    else:
        stmt = stmt.where(_candidate_clause(bounds))
        table = _shapes_table(session, others, with_rank=False) if others else None
        if table is not None:
            stmt = stmt.where(~exists().where(_matches(table)))
    return list(session.scalars(stmt.order_by(*order).limit(limit).offset(offset)))


def _ranked_page(
    session: Session, *, filters: OfferFilters, workload: Workload, sort: Sort
) -> OfferPage:
    """Fitting offers first (ranked), then the rest (price order), paginated.

    One price-free assessment per machine shape (hundreds, where offers are tens of thousands)
    decides fit, billed hours and tie-breaks; SQL then orders and pages the offers.
    """
    assess = _Assessor(workload, use_spot=filters.market == "spot")
    estimate = assess.estimate
    bounds = vram_bounds(workload, estimate)
    shapes = _shape_groups(session, filters, bounds)
    if len(shapes) > MAX_SQL_SHAPES:
        return _ranked_page_in_memory(
            session, filters=filters, sort=sort, estimate=estimate, bounds=bounds, assess=assess
        )
    # Assessing hundreds of shapes takes tens of ms; the result changes only with the data.
    assessed: list[tuple[_Shape, OfferFit]] = data_cache.cached(
        session,
        "fit_assessed",
        (_filters_key(filters), workload.model_dump_json(), assess.use_spot),
        lambda: [(shape, assess(shape.facts)) for shape in shapes],
    )
    fitting = [(s, f) for s, f in assessed if f.fits]
    missed = [(s, f) for s, f in assessed if not f.fits]
    n_fit, n_missed = sum(s.count for s, _ in fitting), sum(s.count for s, _ in missed)
    # Non-fitting offers keep the price order (fit and cost mean nothing for them).
    rest_sort: Sort = "price_per_gpu" if sort in WORKLOAD_SORTS else sort
    start, stop = filters.offset, filters.offset + filters.limit
    wanted = min(stop, n_fit) - start
    if sort in WORKLOAD_SORTS:
        # cost orders fitting offers exactly as fit does: the cost is rank_key's lead.
        ids = _ranked_ids(
            session,
            filters=filters,
            bounds=bounds,
            fitting=fitting,
            use_spot=assess.use_spot,
            limit=wanted,
            offset=start,
        )
    else:
        ids = _member_ids(
            session,
            filters=filters,
            bounds=bounds,
            members=fitting,
            others=missed,
            order=_order_by(sort, filters),
            limit=wanted,
            offset=start,
        )
    common: dict[str, Any] = {
        "limit": filters.limit,
        "offset": filters.offset,
        "sort": sort,
        "caption": _fit_caption(filters),
        "estimate": estimate,
        "fitting": n_fit,
    }
    if filters.fits_only:
        return OfferPage(total=n_fit, offers=_full(session, ids, assess), **common)
    # Near misses (enough VRAM by the bound, but no layout fits) come before the rest.
    ids += _member_ids(
        session,
        filters=filters,
        bounds=bounds,
        members=missed,
        others=fitting,
        order=_order_by(rest_sort, filters),
        limit=min(stop, n_fit + n_missed) - max(start, n_fit),
        offset=max(0, start - n_fit),
    )
    page = _full(session, ids, assess)
    head = n_fit + n_missed
    rest_total = count_where(session, filters=filters, extra=[_rest_clause(bounds)])
    if len(page) < filters.limit and rest_total:
        rest_rows = page_rows(
            session,
            filters=filters,
            sort=rest_sort,
            extra=[_rest_clause(bounds)],
            limit=filters.limit - len(page),
            offset=max(0, start - head),
        )
        page += [RankedOffer(row, assess(offer_facts(row))) for row in rest_rows]
    return OfferPage(total=head + rest_total, offers=page, **common)


def _ranked_page_in_memory(
    session: Session,
    *,
    filters: OfferFilters,
    sort: Sort,
    estimate: MemoryEstimate,
    bounds: VramBounds,
    assess: _Assessor,
) -> OfferPage:
    """The ranking done in Python over every candidate: the fallback for very many shapes."""
    candidates = _candidates(session, filters=filters, bounds=bounds, assess=assess, sort=sort)
    fitting = sorted((c for c in candidates if c.fits), key=_fit_order(sort))
    # Non-fitting offers keep the price order (fit and cost mean nothing for them).
    rest_sort: Sort = "price_per_gpu" if sort in WORKLOAD_SORTS else sort
    missed = sorted((c for c in candidates if not c.fits), key=lambda c: c.row_key)
    start, stop = filters.offset, filters.offset + filters.limit
    common: dict[str, Any] = {
        "limit": filters.limit,
        "offset": filters.offset,
        "sort": sort,
        "caption": _fit_caption(filters),
        "estimate": estimate,
        "fitting": len(fitting),
    }
    if filters.fits_only:
        page = _full(session, [c.id for c in fitting[start:stop]], assess)
        return OfferPage(total=len(fitting), offers=page, **common)
    head = [*fitting, *missed]
    page = _full(session, [c.id for c in head[start:stop]], assess)
    rest_total = count_where(session, filters=filters, extra=[_rest_clause(bounds)])
    if len(page) < filters.limit and rest_total:
        rest_rows = page_rows(
            session,
            filters=filters,
            sort=rest_sort,
            extra=[_rest_clause(bounds)],
            limit=filters.limit - len(page),
            offset=max(0, start - len(head)),
        )
        page += [RankedOffer(row, assess(offer_facts(row))) for row in rest_rows]
    return OfferPage(total=len(head) + rest_total, offers=page, **common)


def _fit_caption(filters: OfferFilters) -> str:
    text = caption(filters)
    return text + ("; only offers the job fits" if filters.fits_only else "")


def all_rows(
    session: Session, *, filters: OfferFilters, extra: Sequence[ColumnElement[bool]] = ()
) -> list[OfferRow]:
    """Every filtered offer (no pagination), e.g. the fit candidates; `extra` narrows further."""
    stmt = _row_select().where(*where_clauses(filters), *extra)
    return _rows(session, stmt)


def page_rows(
    session: Session,
    *,
    filters: OfferFilters,
    sort: Sort,
    extra: Sequence[ColumnElement[bool]] = (),
    limit: int,
    offset: int,
) -> list[OfferRow]:
    """One SQL-sorted page of filtered offers narrowed by `extra`."""
    if limit <= 0:
        return []
    stmt = (
        _row_select()
        .where(*where_clauses(filters), *extra)
        .order_by(*_order_by(sort, filters))
        .limit(limit)
        .offset(offset)
    )
    return _rows(session, stmt)


def count_where(
    session: Session, *, filters: OfferFilters, extra: Sequence[ColumnElement[bool]]
) -> int:
    """How many filtered offers also satisfy `extra` (cached until the next ingest)."""
    stmt = select(func.count()).select_from(Offer).where(*where_clauses(filters), *extra)
    # The compiled SQL with its literal parameters names exactly what is counted.
    key = str(stmt.compile(compile_kwargs={"literal_binds": True}))
    return data_cache.cached(session, "count", key, lambda: int(session.scalar(stmt) or 0))


# ---------------------------------------------------------------------------------------------
# Offer detail, GPU page, history


@dataclass(frozen=True)
class HistoryPoint:
    observed_at: datetime
    price_per_hour: float | None
    spot_price_per_hour: float | None
    availability: str


def price_history(session: Session, *, offer_id: int, limit: int = 5000) -> list[HistoryPoint]:
    """The recorded price/availability points of one offer, oldest first."""
    stmt = (
        select(
            PricePoint.observed_at,
            PricePoint.price_per_hour,
            PricePoint.spot_price_per_hour,
            PricePoint.availability,
        )
        .where(PricePoint.offer_id == offer_id)
        .order_by(PricePoint.observed_at.desc(), PricePoint.id.desc())
        .limit(limit)
    )
    points = [HistoryPoint(*r) for r in session.execute(stmt)]
    points.reverse()
    return points


@dataclass(frozen=True)
class ProviderHistory:
    provider: str
    points: list[tuple[datetime, float]]  # (time, cheapest price per GPU-hour then)


def gpu_price_history(
    session: Session, *, slug: str, max_points: int = 20000
) -> list[ProviderHistory]:
    """Per provider, the cheapest recorded on-demand price per GPU-hour at each observation."""
    per_gpu = per_gpu_sql(PricePoint.price_per_hour.expression)
    stmt = (
        select(Offer.provider_id, PricePoint.observed_at, func.min(per_gpu))
        .join(Offer, Offer.id == PricePoint.offer_id)
        .where(Offer.gpu_model_slug == slug, PricePoint.price_per_hour.is_not(None))
        .group_by(Offer.provider_id, PricePoint.observed_at)
        .order_by(Offer.provider_id, PricePoint.observed_at)
        .limit(max_points)
    )
    series: dict[str, list[tuple[datetime, float]]] = {}
    for provider, observed, price in session.execute(stmt):
        if price is not None:
            series.setdefault(provider, []).append((observed, float(price)))
    return [ProviderHistory(p, pts) for p, pts in series.items()]


def cheapest_per_provider(session: Session, *, slug: str) -> list[OfferRow]:
    """For one GPU model, each provider's cheapest active offer by price per GPU-hour."""
    per_gpu = per_gpu_sql(func.coalesce(Offer.price_per_hour, Offer.spot_price_per_hour))
    ranked = (
        select(
            Offer.id.label("id"),
            func.row_number()
            .over(partition_by=Offer.provider_id, order_by=(per_gpu.asc(), Offer.id.asc()))
            .label("rn"),
        )
        .where(Offer.gpu_model_slug == slug, Offer.active.is_(True))
        .subquery()
    )
    stmt = (
        _row_select()
        .join(ranked, and_(ranked.c.id == Offer.id, ranked.c.rn == literal(1)))
        .order_by(per_gpu.asc(), Offer.id)
    )
    return _rows(session, stmt)


# ---------------------------------------------------------------------------------------------
# Output: one dict per offer feeds JSON and CSV alike.

OFFER_FIELDS = (
    "id",
    "provider",
    "provider_name",
    "instance_type",
    "region",
    "continent",
    "spot",
    "gpu_model",
    "gpu_name",
    "gpu_vendor",
    "gpu_raw_name",
    "gpu_count",
    "vram_gib_per_gpu",
    "vram_gib_total",
    "vcpus",
    "ram_gib",
    "disk_gib",
    "interconnect",
    "network",
    "network_gbps",
    "price_per_hour",
    "price_per_gpu_hour",
    "spot_price_per_hour",
    "currency",
    "billing",
    "availability",
    "availability_count",
    "first_seen",
    "last_seen",
    "active",
)
FIT_FIELDS = (  # fit_dict's keys, minus the nested `factors` (JSON only)
    "fits",
    "per_gpu_gib_needed",
    "headroom_pct",
    "est_hours",
    "billed_hours",
    "est_total_cost",
    "cost_per_m_tokens",
    "score",
    "explanation",
    "reason",
    "sharding_used",
)


def offer_dict(item: RankedOffer) -> dict[str, Any]:
    """JSON-ready fields of one offer (plus its fit when ranked); datetimes as ISO 8601."""
    row = item.row
    out: dict[str, Any] = {}
    for name in OFFER_FIELDS:
        value = getattr(row, name)
        out[name] = value.isoformat() if isinstance(value, datetime) else value
    out["url"] = f"/offers/{row.id}"
    if item.fit is not None:
        out.update(fit_dict(item.fit))
    return out


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> Any:
    """Blank for None; scraped text that a spreadsheet would run as a formula gets a quote."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def to_csv(items: Sequence[RankedOffer], *, with_fit: bool) -> str:
    """CSV text with a header row; the columns are the JSON fields in the same order."""
    import csv
    import io

    columns = [*OFFER_FIELDS, "url", *(FIT_FIELDS if with_fit else ())]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for item in items:
        data = offer_dict(item)
        writer.writerow([_csv_cell(data.get(c)) for c in columns])
    return buffer.getvalue()
