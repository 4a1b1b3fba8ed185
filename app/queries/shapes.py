"""Plan ranking in SQL: candidate offers grouped by machine shape, one assessment per shape (its
plan, hours and billed node-hours in each market), then the database prices, orders and pages
the offers joined to their shapes' rank columns.

A shape is what decides an offer's price-free plan: GPU model, count, VRAM, links, billing, the
listing flag, stock, the provider's market profile (set-up, billing minimum, spot default), the
listings available and the spot advisor band. Each offer's expected cost is then
`node_hours(market) × price(market)`, the lower of its markets under `market=any`, in SQL
exactly as app.fit.plans.choose_market computes it.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    case,
    cast,
    column,
    exists,
    func,
    or_,
    select,
    union_all,
    values,
)
from sqlalchemy.orm import Session

from app.fit import OfferFacts, OfferFit
from app.fit.offer_facts import FITS, NO_FIT, TIGHT
from app.queries.assess import (
    Assessor,
    RankedHead,
    VramBounds,
    candidate_clause,
    hold_bands,
    listing_bands,
    rest_sort,
    shape_member_clause,
)
from app.queries.filters import order_by, where_clauses
from app.queries.params import WORKLOAD_SORTS, OfferFilters, Sort, filters_key
from app.queries.plan_sql import (
    NO_BAND,
    NO_LISTINGS,
    band_sql,
    join_advisor,
    listing_step_sql,
    on_demand_price_sql,
    profile_sql,
    spot_price_sql,
)
from app.queries.sql_types import BOOLEAN, FLOAT, INTEGER, STRING, unnest_rows
from app.store import data_cache
from app.store.models import (
    NO_GBPS,
    NO_SLUG,
    PAIRED_SPOT_SQL,
    SHAPE_GBPS_SQL,
    SHAPE_SLUG_SQL,
    GpuModel,
    Offer,
    job_price_sql,
)

# The offer columns that, with the GPU model's facts and the three plan facts below, decide an
# offer's price-free plan.
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
MARKETS = ("on_demand", "spot")


@dataclass(frozen=True)
class Shape:
    """One machine shape among the candidates: its offers share a price-free plan."""

    key: tuple[Any, ...]  # the key columns' values, NULLs replaced by the stand-ins
    facts: OfferFacts  # price-free
    count: int
    min_price: tuple[float | None, float | None]  # lowest (on-demand, spot) listing price
    max_price: tuple[float | None, float | None] = (None, None)  # highest of each
    priced: int = 0  # offers with a price in either market


_FACT_FIELDS = tuple(f.name for f in dataclasses.fields(OfferFacts))
_fact_values = operator.attrgetter(*_FACT_FIELDS)

# One OfferFacts object per distinct facts in this process, across data versions: an ingest
# changes prices and counts far more often than shapes, so decoding a new version's shapes
# mostly finds its facts here (a dict lookup against a dataclass built per field), and the fit
# cache, keyed by facts, then matches them by identity (app.queries.assess.Assessor).
_INTERNED_MAX = 200_000
_interned: dict[tuple[Any, ...], OfferFacts] = {}


def interned_facts(values: tuple[Any, ...]) -> OfferFacts:
    """The process's OfferFacts of these field values (in field order)."""
    facts = _interned.get(values)
    if facts is None:
        if len(_interned) >= _INTERNED_MAX:
            _interned.clear()  # shapes churned past any plausible catalogue: start over
        facts = _interned.setdefault(values, OfferFacts(*values))
    return facts


def _encode_shapes(value: tuple[list[Shape], dict[Any, str]]) -> Any:
    """(shapes, advisor bands) by column: a 100k-offer view has thousands of shapes, which the
    generic layout decoded in ~37 ms of Python per process and data version; columns, ~10 ms."""
    shapes, bands = value
    keys = [list(s.key) for s in shapes]
    facts = [[getattr(s.facts, name) for s in shapes] for name in _FACT_FIELDS]
    lows = [list(s.min_price) for s in shapes]
    highs = [list(s.max_price) for s in shapes]
    numbers = itertools.chain.from_iterable((*keys, *facts, *lows, *highs))
    if not all(math.isfinite(v) for v in numbers if isinstance(v, float)):
        return {"generic": data_cache.encode_data(value)}  # JSON has no Infinity: tagged
    return {
        "key": keys,
        "facts": facts,
        "count": [s.count for s in shapes],
        "min": lows,
        "max": highs,
        "priced": [s.priced for s in shapes],
        "bands": data_cache.encode_data(bands),
    }


def _decode_shapes(data: Any) -> tuple[list[Shape], dict[Any, str]]:
    if "generic" in data:
        shapes_, bands_ = data_cache.decode_data(data["generic"])
        return list(shapes_), bands_
    facts = map(interned_facts, zip(*data["facts"], strict=True))
    shapes = list(
        map(
            Shape,
            map(tuple, data["key"]),
            facts,
            data["count"],
            map(tuple, data["min"]),
            map(tuple, data["max"]),
            data["priced"],
        )
    )
    bands: dict[Any, str] = data_cache.decode_data(data["bands"])
    return shapes, bands


# Kept in the shared table too, so a worker that warmed a new data version spares every web
# process the grouping scan (app.web.warm).
data_cache.share(
    "plan_shapes",
    Shape,
    OfferFacts,
    codec=data_cache.Codec(
        _encode_shapes,
        _decode_shapes,
        version="columns",  # the fields of Shape and OfferFacts are in every shared key already
    ),
)
data_cache.share("plan_count")


@dataclass(frozen=True)
class Limits:
    """The deadline and budget a fitting plan must meet (None: no limit)."""

    max_hours: float | None = None
    max_cost: float | None = None

    @property
    def any(self) -> bool:
        return self.max_hours is not None or self.max_cost is not None

    def admits(self, cost: float | None, hours: float | None) -> bool:
        """Python's twin of the SQL conditions (unknown cost or time fails a set limit)."""
        if self.max_cost is not None and (cost is None or cost > self.max_cost):
            return False
        return self.max_hours is None or (hours is not None and hours <= self.max_hours)


def with_advisor_bands(session: Session) -> bool:
    """Whether any listing has a spot advisor band (else the advisor join is left out)."""
    return bool(listing_bands(session))


def shape_groups(session: Session, filters: OfferFilters, bounds: VramBounds) -> list[Shape]:
    """The distinct shapes among the prefiltered offers, with counts (cached until an ingest,
    together with the advisor bands, which the request then reuses)."""

    def compute() -> tuple[list[Shape], dict[tuple[str, str, str], str]]:
        bands = listing_bands(session)
        advisor = bool(bands)
        # Group the offers alone, then join the GPU facts to the few groups: grouping by the
        # GPU columns too makes Postgres sort every candidate (spilling to disk at 100k).
        keys = (
            *_SHAPE_COLUMNS,
            profile_sql().label("profile"),
            listing_step_sql().label("listings"),
            *([band_sql(advisor).label("band")] if advisor else []),
        )
        grouped = select(
            *keys,
            *([] if advisor else [band_sql(advisor).label("band")]),  # a constant
            func.count().label("n"),
            func.min(on_demand_price_sql()).label("min_on_demand"),
            func.min(spot_price_sql()).label("min_spot"),
            func.max(on_demand_price_sql()).label("max_on_demand"),
            func.max(spot_price_sql()).label("max_spot"),
            func.count(func.coalesce(on_demand_price_sql(), spot_price_sql())).label("priced"),
        ).select_from(Offer)
        groups = (
            join_advisor(grouped, advisor)
            .where(*where_clauses(filters), candidate_clause(bounds))
            .group_by(*keys)
            .subquery()
        )
        stmt = select(
            *(groups.c[c.key] for c in _SHAPE_COLUMNS),
            groups.c.profile,
            groups.c.listings,
            groups.c.band,
            *_GPU_FACT_COLUMNS,
            groups.c.n,
            groups.c.min_on_demand,
            groups.c.min_spot,
            groups.c.max_on_demand,
            groups.c.max_spot,
            groups.c.priced,
        ).outerjoin(GpuModel, GpuModel.slug == groups.c.gpu_model_slug)
        out = []
        for row in session.connection().execute(stmt).all():
            slug, count_, vram, interconnect, network, gbps, billing, spot, availability = row[:9]
            profile, listings, band = row[9:12]
            bf16, fp16, memory, nvlink, n, min_on_demand, min_spot = row[12:19]
            max_on_demand, max_spot, priced = row[19:]
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
                gpu_slug=slug,
                provider=profile,
                spot_band=band or None,
                listings_available=None if listings == NO_LISTINGS else int(listings),
            )
            facts = interned_facts(_fact_values(facts))
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
                profile,
                int(listings),
                band or NO_BAND,
            )
            out.append(
                Shape(
                    key,
                    facts,
                    int(n),
                    (min_on_demand, min_spot),
                    (max_on_demand, max_spot),
                    int(priced),
                )
            )
        return out, bands

    cache_key = (filters_key(filters), bounds.per_gpu_gib, bounds.total_gib)
    shapes, bands = data_cache.cached(session, "plan_shapes", cache_key, compute)
    hold_bands(session, bands)
    return shapes


_KEY_VALUE_COLUMNS = (
    ("slug", STRING),
    ("gpu_count", FLOAT),
    ("vram", FLOAT),
    ("interconnect", STRING),
    ("network", STRING),
    ("gbps", FLOAT),
    ("billing", STRING),
    ("spot", BOOLEAN),
    ("availability", STRING),
    ("profile", STRING),
    ("listings", INTEGER),
    ("band", STRING),  # only with advisor bands
)
# Rank columns a query may ask for, per shape: billed node-hours (cost = this × the market's
# price), expected wall-clock hours, the cost-per-million factor (per_m = this × the price).
_MARKET_COLUMNS = {"h": "node_hours", "w": "wall_hours", "m": "per_m_factor"}
COST_COLUMNS = ("h",)
HOURS_COLUMNS = ("h", "w")
ALL_COLUMNS = ("h", "w", "m")


def _key_columns(advisor: bool) -> tuple[tuple[str, Any], ...]:
    return _KEY_VALUE_COLUMNS if advisor else _KEY_VALUE_COLUMNS[:-1]


def tie_ranks(shapes: Sequence[tuple[Shape, OfferFit]]) -> list[int]:
    """Each shape's tie-breaks (OfferFit.tiebreak, shape-level) as one dense rank: ordering by
    it orders as by the tuple, in one column instead of five."""
    order = {tie: rank for rank, tie in enumerate(sorted({f.tiebreak for _, f in shapes}))}
    return [order[f.tiebreak] for _, f in shapes]


def _shapes_table(
    session: Session,
    shapes: Sequence[tuple[Shape, OfferFit]],
    *,
    advisor: bool,
    markets: Sequence[str] = (),
    extra: dict[str, Sequence[float | None]] | None = None,
) -> Any:
    """The shapes as a table (a CTE): their key columns, the `markets` columns (`h`, `w`, `m`)
    of each market (`h_on_demand`, `h_spot`, ...; NULL where the market is not costed) and the
    `extra` per-shape columns (tie rank, price ceilings)."""
    keys = _key_columns(advisor)
    columns: list[tuple[str, Any]] = list(keys)
    data = [list(s.key[: len(keys)]) for s, _ in shapes]
    for prefix in markets:
        attribute = _MARKET_COLUMNS[prefix]
        for market in MARKETS:
            columns.append((f"{prefix}_{market}", FLOAT))
            for row, (_, fit) in zip(data, shapes, strict=True):
                cost = fit.markets.get(market)
                row.append(None if cost is None else getattr(cost, attribute))
    for name, per_shape in (extra or {}).items():
        columns.append((name, FLOAT))
        for row, value_ in zip(data, per_shape, strict=True):
            row.append(value_)
    if session.get_bind().dialect.name == "postgresql":
        arrays = [
            (name, type_, [row[i] for row in data]) for i, (name, type_) in enumerate(columns)
        ]
        return unnest_rows("shape", arrays).cte("shapes")
    table = values(*(column(name, type_) for name, type_ in columns), name="shapes")
    return table.data([tuple(row) for row in data]).cte("shapes")


def values_per_shape() -> int:
    """Bound values one shape adds to a statement at most (SQLite allows 32,766)."""
    return len(_KEY_VALUE_COLUMNS) + len(ALL_COLUMNS) * len(MARKETS) + 3


def _matches(table: Any, advisor: bool) -> ColumnElement[bool]:
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
        profile_sql() == table.c.profile,
        listing_step_sql() == table.c.listings,
        *([band_sql(advisor) == table.c.band] if advisor else []),
    )


@dataclass(frozen=True)
class OfferTerms:
    """An offer's expected cost, hours and cost per million tokens, in SQL over a ranked
    shapes table: app.fit.plans.choose_market's choice, term by term (None where the table
    lacks the columns)."""

    cost: ColumnElement[Any]
    hours: ColumnElement[Any] | None
    per_m: ColumnElement[Any] | None
    tie: ColumnElement[Any] | None


def offer_terms(table: Any) -> OfferTerms:
    # A column that is NULL in every VALUES row has no type on Postgres: cast each.
    def col(name: str) -> ColumnElement[Any]:
        return cast(table.c[name], FLOAT)

    names = {c.name for c in table.c}
    od, sp = on_demand_price_sql(), spot_price_sql()
    c_od = col("h_on_demand") * od
    c_sp = col("h_spot") * sp
    use_spot = and_(c_sp.is_not(None), or_(c_od.is_(None), c_sp < c_od))
    cost = case((use_spot, c_sp), else_=c_od)
    hours = per_m = None
    if "w_spot" in names:
        hours = case(
            (use_spot, col("w_spot")),
            (c_od.is_not(None), col("w_on_demand")),
            (Offer.spot.is_(True), col("w_spot")),
            else_=col("w_on_demand"),
        )
    if "m_spot" in names:
        per_m = case((use_spot, col("m_spot") * sp), else_=col("m_on_demand") * od)
    tie = col("tie") if "tie" in names else None
    return OfferTerms(cost, hours, per_m, tie)


def fit_keys(terms: OfferTerms, sort: Sort) -> list[ColumnElement[Any]]:
    """The sort keys of fitting offers for a workload sort, ascending with NULLs last, before
    the offer id (in_memory.fit_sort_key's twin, the tie rank standing for the tie-breaks)."""
    assert terms.hours is not None and terms.tie is not None
    if sort == "time":
        return [terms.hours, terms.cost, terms.tie]
    if sort == "cost_per_m":
        assert terms.per_m is not None
        return [terms.per_m, terms.cost, terms.tie, terms.hours]
    return [terms.cost, terms.tie, terms.hours]


def fit_order(terms: OfferTerms, sort: Sort) -> list[Any]:
    """ORDER BY of fitting offers for a workload sort."""
    return [*(k.asc().nulls_last() for k in fit_keys(terms, sort)), Offer.id.asc()]


def limit_conditions(terms: OfferTerms, limits: Limits) -> list[ColumnElement[bool]]:
    """SQL for Limits.admits."""
    out: list[ColumnElement[bool]] = []
    if limits.max_cost is not None:
        out.append(terms.cost <= limits.max_cost)
    if limits.max_hours is not None:
        assert terms.hours is not None
        out.append(terms.hours <= limits.max_hours)
    return out


def shape_bound(shape: Shape, fit: OfferFit, sort: Sort, limits: Limits) -> list[tuple[float, int]]:
    """(value, n): n of the shape's offers (within the limits) reach a sort key of `value` or
    better. The offer with a market's lowest price costs at most that market's cost; every
    priced offer costs at most its dearest market at the highest price; any offer takes at most
    the longest market's hours, whichever market it ends up in."""
    if sort == "cost_per_m" or not fit.markets:
        return []  # the market is chosen by cost, so its price per million is not bounded
    hours = max(market.wall_hours for market in fit.markets.values())
    if sort == "time":
        if limits.max_cost is not None or (
            limits.max_hours is not None and hours > limits.max_hours
        ):
            return []
        return [(hours, shape.priced)] if shape.priced else []
    lowest = [
        fit.markets[m].node_hours * price
        for m, price in zip(MARKETS, shape.min_price, strict=True)
        if m in fit.markets and price is not None
    ]
    highest = [
        fit.markets[m].node_hours * price
        for m, price in zip(MARKETS, shape.max_price, strict=True)
        if m in fit.markets and price is not None
    ]
    out = []
    if lowest and limits.admits(min(lowest), hours):
        out.append((min(lowest), 1))
    if highest and shape.priced > 1 and limits.admits(max(highest), hours):
        out.append((max(highest), shape.priced - 1))
    return out


PruneIndex = tuple[list[float], list[int], list[tuple[float, int]]]


def prune_index(
    fitting: Sequence[tuple[Shape, OfferFit]], sort: Sort, limits: Limits
) -> PruneIndex:
    """The vouched values in order, the running count of offers they vouch for, and each
    shape's floor with its position, in order: `shape_bound` and `_floor` over every shape.

    Costs are computed once per shape and market for both (the first ranked page after an
    ingest builds this for thousands of shapes); the time sort uses the two functions as
    written.
    """
    if sort == "cost_per_m":
        return [], [], []  # nothing is vouched for, so no bound: the floors go unused
    vouched: list[tuple[float, int]] = []
    floors: list[tuple[float, int]] = []
    if sort == "time":
        vouched = [v for s, f in fitting for v in shape_bound(s, f, sort, limits)]
        floors = [(_floor(s, f, sort), i) for i, (s, f) in enumerate(fitting)]
    else:
        limited = limits.any
        for i, (shape, fit) in enumerate(fitting):
            markets = fit.markets
            low: float | None = None
            high: float | None = None
            for m, lo_price, hi_price in zip(
                MARKETS, shape.min_price, shape.max_price, strict=True
            ):
                cost = markets.get(m)
                if cost is None:
                    continue
                if lo_price is not None:
                    value = cost.node_hours * lo_price
                    low = value if low is None or value < low else low
                if hi_price is not None:
                    value = cost.node_hours * hi_price
                    high = value if high is None or value > high else high
            floors.append((math.inf if low is None else low, i))
            hours = max((c.wall_hours for c in markets.values()), default=0.0) if limited else 0.0
            if low is not None and (not limited or limits.admits(low, hours)):
                vouched.append((low, 1))
            if (
                high is not None
                and shape.priced > 1
                and (not limited or limits.admits(high, hours))
            ):
                vouched.append((high, shape.priced - 1))
    vouched.sort()
    floors.sort()
    totals = list(itertools.accumulate(n for _, n in vouched))
    return [value for value, _ in vouched], totals, floors


def ranked_ids(
    session: Session,
    *,
    filters: OfferFilters,
    bounds: VramBounds,
    fitting: Sequence[tuple[Shape, OfferFit]],
    sort: Sort,
    limits: Limits,
    limit: int,
    offset: int,
    memo: dict[Any, Any] | None = None,
) -> list[int]:
    """Ids of one page of the fitting offers of one class in sort order, by the database.

    Pruned first: each shape vouches for one offer at or under `shape_bound`, so the k-th
    smallest bound (k = offset + limit) bounds the whole page; only shapes whose floor
    (`_floor`) is at or under it can contribute, and only their offers at or under it are
    sorted. The bounds and floors are kept in `memo` (the cached split's), per sort.
    """
    if limit <= 0 or not fitting:
        return []

    index = None if memo is None else memo.get(sort)
    if index is None:
        index = prune_index(fitting, sort, limits)
        if memo is not None:
            memo[sort] = index  # a race only computes the same value twice
    values_, totals, floors = index
    # The smallest value at which offset + limit offers are vouched for.
    at = bisect.bisect_left(totals, offset + limit)
    bound = values_[at] if at < len(values_) else None
    if bound is not None:
        fitting = [fitting[i] for floor, i in floors if floor <= bound]
    advisor = with_advisor_bands(session)
    extra: dict[str, Sequence[float | None]] = {"tie": tie_ranks(fitting)}
    paired = False
    if bound is not None and sort != "time":
        ceilings = [_ceiling(s, f, bound) for s, f in fitting]
        extra["ceiling"] = [own for own, _ in ceilings]
        extra["spot_ceiling"] = [spot for _, spot in ceilings]
        paired = any(spot != NO_PRICE for _, spot in ceilings)
    markets = ALL_COLUMNS if sort == "cost_per_m" else HOURS_COLUMNS
    table = _shapes_table(session, fitting, advisor=advisor, markets=markets, extra=extra)
    terms = offer_terms(table)

    def matching() -> Select[Any]:
        return join_advisor(select(Offer.id).select_from(Offer), advisor).join(
            table, _matches(table, advisor)
        )

    conditions = [*where_clauses(filters), shape_member_clause(bounds)]
    conditions += limit_conditions(terms, limits)
    if bound is not None:
        key = terms.hours if sort == "time" else terms.cost
        assert key is not None
        conditions.append(key <= bound)
    own = job_price_sql(use_spot=False)
    if "ceiling" in extra:
        own_price = own <= cast(table.c.ceiling, FLOAT)
        if not paired:  # no listing of these shapes can make the page on a paired spot price
            conditions.append(own_price)
    if not paired:
        stmt = matching().where(*conditions).order_by(*fit_order(terms, sort))
        return list(session.scalars(stmt.limit(limit).offset(offset)))
    # The price ceilings are implied by the cost bound; they let the shape indexes read only
    # the offers that can make the page, one branch per index: ix_offers_active_shape_job_price
    # by the listing's own price, ix_offers_active_shape_spot_price by the spot price of a
    # listing that also has an on-demand one (and did not make it by that).
    keys = fit_keys(terms, sort)
    branches = [
        matching()
        .add_columns(*(k.label(f"k{i}") for i, k in enumerate(keys)))
        .where(*conditions, branch)
        for branch in (
            own_price,
            and_(
                PAIRED_SPOT_SQL,
                Offer.spot_price_per_hour <= cast(table.c.spot_ceiling, FLOAT),
                or_(own.is_(None), own > cast(table.c.ceiling, FLOAT)),
            ),
        )
    ]
    both = union_all(*branches).subquery()
    order = [both.c[f"k{i}"].asc().nulls_last() for i in range(len(keys))]
    stmt = select(both.c.id).order_by(*order, both.c.id.asc())
    return list(session.scalars(stmt.limit(limit).offset(offset)))


# Slack on the price ceilings so float rounding of bound / hours never drops an offer the exact
# cost bound keeps (the relative rounding error is ~1e-16); NO_CEILING when none applies.
_CEILING_SLACK = 1 + 1e-9
NO_CEILING = 1e300
NO_PRICE = -1.0  # below every price


def _ceiling(shape: Shape, fit: OfferFit, bound: float) -> tuple[float, float]:
    """The highest prices at which an offer of the shape can cost `bound` or less: its own
    price (`job_price_sql(use_spot=False)`: a spot listing's spot price, else the on-demand
    price) and, for a listing that has both, its spot price (NO_PRICE: that way cannot)."""

    def highest(market: str) -> float:
        cost = fit.markets.get(market)
        if cost is None:
            return NO_PRICE
        if cost.node_hours <= 0:
            return NO_CEILING
        return bound / cost.node_hours * _CEILING_SLACK

    own = highest("spot" if shape.facts.spot else "on_demand")
    return own, NO_PRICE if shape.facts.spot else highest("spot")


def _floor(shape: Shape, fit: OfferFit, sort: Sort) -> float:
    """The lowest sort key any offer of the shape can have: its cheapest market at its lowest
    price, or its fastest market (inf: none can have one)."""
    if sort == "time":
        return min((m.wall_hours for m in fit.markets.values()), default=math.inf)
    return min(
        (
            fit.markets[m].node_hours * price
            for m, price in zip(MARKETS, shape.min_price, strict=True)
            if m in fit.markets and price is not None
        ),
        default=math.inf,
    )


def member_ids(
    session: Session,
    *,
    filters: OfferFilters,
    bounds: VramBounds,
    members: Sequence[tuple[Shape, OfferFit]],
    others: Sequence[tuple[Shape, OfferFit]],
    order: list[Any],
    limit: int,
    offset: int,
    limits: Limits | None = None,
) -> list[int]:
    """Ids of one page of the prefiltered offers whose shape is among `members`, in `order`
    (and, with `limits`, whose expected job meets them).

    The shapes list holds the smaller of `members` and `others` (the remaining shapes): a join
    for the first, an anti-join for the second.
    """
    if limit <= 0 or not members:
        return []
    advisor = with_advisor_bands(session)
    stmt = join_advisor(select(Offer.id).select_from(Offer), advisor).where(*where_clauses(filters))
    if limits is not None and limits.any:
        table = _shapes_table(session, members, advisor=advisor, markets=HOURS_COLUMNS)
        stmt = stmt.join(table, _matches(table, advisor)).where(
            shape_member_clause(bounds), *limit_conditions(offer_terms(table), limits)
        )
    elif len(members) <= len(others):
        table = _shapes_table(session, members, advisor=advisor)
        stmt = stmt.join(table, _matches(table, advisor)).where(shape_member_clause(bounds))
    else:
        stmt = stmt.where(candidate_clause(bounds))
        if others:
            table = _shapes_table(session, others, advisor=advisor)
            stmt = stmt.where(~exists().where(_matches(table, advisor)))
    return list(session.scalars(stmt.order_by(*order).limit(limit).offset(offset)))


def count_within(
    session: Session,
    *,
    filters: OfferFilters,
    bounds: VramBounds,
    members: Sequence[tuple[Shape, OfferFit]],
    limits: Limits,
    cache_key: Any,
) -> int:
    """How many offers of `members` meet the deadline and budget (cached until an ingest)."""
    if not members:
        return 0

    def compute() -> int:
        advisor = with_advisor_bands(session)
        table = _shapes_table(session, members, advisor=advisor, markets=HOURS_COLUMNS)
        stmt = (
            join_advisor(select(func.count()).select_from(Offer), advisor)
            .join(table, _matches(table, advisor))
            .where(
                *where_clauses(filters),
                shape_member_clause(bounds),
                *limit_conditions(offer_terms(table), limits),
            )
        )
        return int(session.scalar(stmt) or 0)

    return data_cache.cached(session, "plan_count", cache_key, compute)


@dataclass(frozen=True)
class Classes:
    """The assessed shapes split by fit class, and how many offers each class holds."""

    fitting: tuple[list[tuple[Shape, OfferFit]], list[tuple[Shape, OfferFit]]]  # margin, tight
    missed: list[tuple[Shape, OfferFit]]
    assessed_fitting: list[tuple[Shape, OfferFit]]  # every fitting shape, deadline or not
    counts: tuple[int, int]  # offers with margin, tight (within the limits)
    n_missed: int
    # Pruning indexes of the fitting classes by sort (ranked_ids fills them on first use).
    prune: tuple[dict[Any, Any], dict[Any, Any]] = field(default_factory=lambda: ({}, {}))


def classes(
    session: Session,
    *,
    filters: OfferFilters,
    bounds: VramBounds,
    assess: Assessor,
    shapes: Sequence[Shape],
    limits: Limits,
) -> Classes:
    """Assess every shape and split them; count the offers within the limits. Cached until the
    data changes: assessing hundreds of shapes takes tens of ms, and even as Assessor cache hits
    and a split a few ms (8B QLoRA, 100k offers)."""
    key = (filters_key(filters), assess.workload_key, assess.terms)
    return data_cache.cached(
        session,
        "plan_classes",
        (*key, limits),
        lambda: _split(session, filters, bounds, assess, shapes, limits, key),
    )


def _split(
    session: Session,
    filters: OfferFilters,
    bounds: VramBounds,
    assess: Assessor,
    shapes: Sequence[Shape],
    limits: Limits,
    key: tuple[Any, ...],
) -> Classes:
    assessed = [(shape, assess(shape.facts)) for shape in shapes]
    by_class: dict[int, list[tuple[Shape, OfferFit]]] = {FITS: [], TIGHT: [], NO_FIT: []}
    for shape, fit in assessed:
        by_class[fit.fit_class].append((shape, fit))
    margin, tight = by_class[FITS], by_class[TIGHT]
    if limits.any:
        # Shapes whose every market misses the deadline cannot contribute.
        if limits.max_hours is not None:
            hours = limits.max_hours
            margin = [(s, f) for s, f in margin if _some_market_within(f, hours)]
            tight = [(s, f) for s, f in tight if _some_market_within(f, hours)]
        counts = tuple(
            count_within(
                session,
                filters=filters,
                bounds=bounds,
                members=group,
                limits=limits,
                cache_key=(*key, limits, cls),
            )
            for cls, group in ((FITS, margin), (TIGHT, tight))
        )
    else:
        counts = (sum(s.count for s, _ in margin), sum(s.count for s, _ in tight))
    n_missed = sum(s.count for s, _ in by_class[NO_FIT])
    return Classes(
        (margin, tight),
        by_class[NO_FIT],
        [*by_class[FITS], *by_class[TIGHT]],
        (counts[0], counts[1]),
        n_missed,
    )


def _some_market_within(fit: OfferFit, max_hours: float) -> bool:
    return any(m.wall_hours <= max_hours for m in fit.markets.values())


def sql_head(
    session: Session,
    *,
    filters: OfferFilters,
    sort: Sort,
    bounds: VramBounds,
    assess: Assessor,
    shapes: Sequence[Shape],
    limits: Limits,
) -> RankedHead:
    """The page's fitting offers (margin, then tight) and near misses, paged by the database."""
    split = classes(
        session, filters=filters, bounds=bounds, assess=assess, shapes=shapes, limits=limits
    )
    start, stop = filters.offset, filters.offset + filters.limit
    ids: list[int] = []
    seen = 0
    margin, tight = split.fitting
    for memo, group, others, count in (
        (split.prune[0], margin, [*tight, *split.missed], split.counts[0]),
        (split.prune[1], tight, [*margin, *split.missed], split.counts[1]),
    ):
        lo, hi = max(start - seen, 0), min(stop - seen, count)
        if hi > lo:
            window = (hi - lo, lo)
            ids += _group_ids(session, filters, bounds, group, others, sort, limits, window, memo)
        seen += count
    n_fit = seen
    if not filters.fits_only:
        # Near misses (enough VRAM by the bound, but no layout fits) follow the fitting offers.
        ids += member_ids(
            session,
            filters=filters,
            bounds=bounds,
            members=split.missed,
            others=split.assessed_fitting,
            order=order_by(rest_sort(sort), filters),
            limit=min(stop, n_fit + split.n_missed) - max(start, n_fit),
            offset=max(0, start - n_fit),
        )
    return RankedHead(ids, n_fit, split.n_missed, split.counts[1], sum(s.count for s in shapes))


def _group_ids(
    session: Session,
    filters: OfferFilters,
    bounds: VramBounds,
    group: list[tuple[Shape, OfferFit]],
    others: list[tuple[Shape, OfferFit]],
    sort: Sort,
    limits: Limits,
    window: tuple[int, int],
    memo: dict[Any, Any],
) -> list[int]:
    limit, offset = window
    if sort in WORKLOAD_SORTS:
        return ranked_ids(
            session,
            filters=filters,
            bounds=bounds,
            fitting=group,
            sort=sort,
            limits=limits,
            limit=limit,
            offset=offset,
            memo=memo,
        )
    return member_ids(
        session,
        filters=filters,
        bounds=bounds,
        members=group,
        others=others,
        order=order_by(sort, filters),
        limit=limit,
        offset=offset,
        limits=limits,
    )
