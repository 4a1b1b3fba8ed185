"""Fit ranking in SQL: candidate offers grouped by machine shape, one assessment per shape,
then the database orders and pages the offers joined to their shapes' rank keys."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ARRAY,
    Boolean,
    ColumnElement,
    Float,
    Select,
    String,
    and_,
    bindparam,
    cast,
    column,
    exists,
    func,
    select,
    values,
)
from sqlalchemy.orm import Session

from app.fit import OfferFacts, OfferFit
from app.queries.assess import (
    Assessor,
    RankedHead,
    VramBounds,
    candidate_clause,
    rest_sort,
    shape_member_clause,
)
from app.queries.filters import order_by, where_clauses
from app.queries.params import WORKLOAD_SORTS, OfferFilters, Sort, filters_key
from app.store import data_cache
from app.store.models import (
    NO_GBPS,
    NO_SLUG,
    SHAPE_GBPS_SQL,
    SHAPE_SLUG_SQL,
    GpuModel,
    Offer,
    job_price_sql,
)

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


@dataclass(frozen=True)
class Shape:
    """One machine shape among the candidates: its offers share a price-free fit."""

    key: tuple[Any, ...]  # _SHAPE_COLUMNS' values, NULLs replaced by the stand-ins
    facts: OfferFacts  # price-free
    count: int
    min_job_price: tuple[float | None, float | None]  # lowest job_price: (on demand, spot)
    # Highest job_price, and how many offers have one, per market: every priced offer of the
    # shape costs at most billed hours x the highest (ranked_ids' second bound).
    max_job_price: tuple[float | None, float | None] = (None, None)
    priced: tuple[int, int] = (0, 0)


data_cache.share("fit_shapes", Shape, OfferFacts)


def shape_groups(session: Session, filters: OfferFilters, bounds: VramBounds) -> list[Shape]:
    """The distinct shapes among the prefiltered offers, with counts (cached until an ingest)."""

    def compute() -> list[Shape]:
        # Group the offers alone, then join the GPU facts to the few groups: grouping by the
        # GPU columns too makes Postgres sort every candidate (spilling to disk at 100k).
        groups = (
            select(
                *_SHAPE_COLUMNS,
                func.count().label("n"),
                func.min(job_price_sql(use_spot=False)).label("min_on_demand"),
                func.min(job_price_sql(use_spot=True)).label("min_spot"),
                func.max(job_price_sql(use_spot=False)).label("max_on_demand"),
                func.max(job_price_sql(use_spot=True)).label("max_spot"),
                func.count(job_price_sql(use_spot=False)).label("priced_on_demand"),
                func.count(job_price_sql(use_spot=True)).label("priced_spot"),
            )
            .where(*where_clauses(filters), candidate_clause(bounds))
            .group_by(*_SHAPE_COLUMNS)
            .subquery()
        )
        stmt = select(
            *(groups.c[c.key] for c in _SHAPE_COLUMNS),
            *_GPU_FACT_COLUMNS,
            groups.c.n,
            groups.c.min_on_demand,
            groups.c.min_spot,
            groups.c.max_on_demand,
            groups.c.max_spot,
            groups.c.priced_on_demand,
            groups.c.priced_spot,
        ).outerjoin(GpuModel, GpuModel.slug == groups.c.gpu_model_slug)
        out = []
        for row in session.connection().execute(stmt).all():
            slug, count_, vram, interconnect, network, gbps, billing, spot, availability = row[:9]
            bf16, fp16, memory, nvlink, n, min_on_demand, min_spot = row[9:16]
            max_on_demand, max_spot, priced_on_demand, priced_spot = row[16:]
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
            out.append(
                Shape(
                    key,
                    facts,
                    int(n),
                    (min_on_demand, min_spot),
                    (max_on_demand, max_spot),
                    (int(priced_on_demand), int(priced_spot)),
                )
            )
        return out

    cache_key = (filters_key(filters), bounds.per_gpu_gib, bounds.total_gib)
    return data_cache.cached(session, "fit_shapes", cache_key, compute)


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
    shapes: Sequence[tuple[Shape, OfferFit]],
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


def _min_cost(shape: Shape, fit: OfferFit, use_spot: bool) -> float | None:
    """The cheapest job cost among the shape's offers (billed hours x its lowest price)."""
    price = shape.min_job_price[use_spot]
    return None if fit.billed_hours is None or price is None else fit.billed_hours * price


def _max_cost(shape: Shape, fit: OfferFit, use_spot: bool) -> float | None:
    """The dearest job cost among the shape's priced offers."""
    price = shape.max_job_price[use_spot]
    return None if fit.billed_hours is None or price is None else fit.billed_hours * price


def ranked_ids(
    session: Session,
    *,
    filters: OfferFilters,
    bounds: VramBounds,
    fitting: Sequence[tuple[Shape, OfferFit]],
    use_spot: bool,
    limit: int,
    offset: int,
) -> list[int]:
    """Ids of one page of the fitting offers in rank_key order, sorted by the database.

    Pruned first by a bound on the page's dearest cost (k = offset + limit offers are at or
    under it, so no offer above it is on the page): each shape's cheapest offer costs
    `_min_cost`, so the k-th smallest of those is one; and every priced offer of a shape costs
    at most `_max_cost`, so taking shapes by that until they hold k priced offers gives
    another. Only shapes at or under the smaller can contribute, and only their offers at or
    under it are sorted (a 1,000-row page, more than there are shapes, no longer sorts them all).
    """
    if limit <= 0 or not fitting:
        return []
    k = offset + limit
    costs = sorted(c for s, f in fitting if (c := _min_cost(s, f, use_spot)) is not None)
    bounds_found = [costs[k - 1]] if len(costs) >= k else []
    held = 0
    for cost, priced in sorted(
        (c, s.priced[use_spot]) for s, f in fitting if (c := _max_cost(s, f, use_spot)) is not None
    ):
        held += priced
        if held >= k:
            bounds_found.append(cost)
            break
    max_cost = min(bounds_found) if bounds_found else None
    if max_cost is not None:
        fitting = [
            (s, f)
            for s, f in fitting
            if (c := _min_cost(s, f, use_spot)) is not None and c <= max_cost
        ]
    stmt = ranked_stmt(session, filters=filters, bounds=bounds, fitting=fitting,
                       use_spot=use_spot, max_cost=max_cost)  # fmt: skip
    return list(session.scalars(stmt.limit(limit).offset(offset)))


def ranked_stmt(
    session: Session,
    *,
    filters: OfferFilters,
    bounds: VramBounds,
    fitting: Sequence[tuple[Shape, OfferFit]],
    use_spot: bool,
    max_cost: float | None = None,
) -> Select[Any]:
    """Ids of the fitting offers in rank_key order (all of them, or those within `max_cost`)."""
    table = _shapes_table(session, fitting, with_rank=True, max_cost=max_cost)
    # A column that is NULL in every VALUES row has no type on Postgres: cast it.
    cost = cast(table.c.billed_hours, Float) * job_price_sql(use_spot=use_spot)
    ties = [cast(c, Float).asc() for c in table.c if c.name.startswith("t")]
    hours = cast(table.c.hours, Float)
    stmt = (
        select(Offer.id)
        .join(table, _matches(table))
        .where(*where_clauses(filters), shape_member_clause(bounds))
        .order_by(cost.asc().nulls_last(), *ties, hours.asc().nulls_last(), Offer.id.asc())
    )
    if max_cost is not None:
        # The per-shape price ceiling is implied by the cost bound; it is what lets the
        # shape index (ix_offers_active_shape_job_price) read only the offers that can make it.
        price = job_price_sql(use_spot=use_spot)
        stmt = stmt.where(cost <= max_cost, price <= cast(table.c.max_price, Float))
    return stmt


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
) -> list[int]:
    """Ids of one page of the prefiltered offers whose shape is among `members`, in `order`.

    The VALUES list holds the smaller of `members` and `others` (the remaining shapes): a join
    for the first, an anti-join for the second.
    """
    if limit <= 0 or not members:
        return []
    stmt = member_stmt(session, filters=filters, bounds=bounds, members=members, others=others)
    return list(session.scalars(stmt.order_by(*order).limit(limit).offset(offset)))


def member_stmt(
    session: Session,
    *,
    filters: OfferFilters,
    bounds: VramBounds,
    members: Sequence[tuple[Shape, OfferFit]],
    others: Sequence[tuple[Shape, OfferFit]],
) -> Select[Any]:
    """Ids (unordered) of the prefiltered offers whose shape is among `members`."""
    stmt = select(Offer.id).where(*where_clauses(filters))
    if len(members) <= len(others):
        table = _shapes_table(session, members, with_rank=False)
        return stmt.join(table, _matches(table)).where(shape_member_clause(bounds))
    stmt = stmt.where(candidate_clause(bounds))
    table = _shapes_table(session, others, with_rank=False) if others else None
    if table is not None:
        stmt = stmt.where(~exists().where(_matches(table)))
    return stmt


def assessed_shapes(
    session: Session, *, filters: OfferFilters, assess: Assessor, shapes: Sequence[Shape]
) -> tuple[list[tuple[Shape, OfferFit]], list[tuple[Shape, OfferFit]]]:
    """The shapes with their fit, split into (fitting, near misses)."""
    # Assessing hundreds of shapes takes tens of ms, and even as Assessor cache hits about 4 ms
    # (8B QLoRA, 100k offers); the list changes only with the data.
    assessed: list[tuple[Shape, OfferFit]] = data_cache.cached(
        session,
        "fit_assessed",
        (filters_key(filters), assess.workload.model_dump_json(), assess.use_spot),
        lambda: [(shape, assess(shape.facts)) for shape in shapes],
    )
    return [(s, f) for s, f in assessed if f.fits], [(s, f) for s, f in assessed if not f.fits]


def sql_head(
    session: Session,
    *,
    filters: OfferFilters,
    sort: Sort,
    bounds: VramBounds,
    assess: Assessor,
    shapes: Sequence[Shape],
) -> RankedHead:
    """The page's fitting offers and near misses, ordered and paged by the database."""
    fitting, missed = assessed_shapes(session, filters=filters, assess=assess, shapes=shapes)
    n_fit, n_missed = sum(s.count for s, _ in fitting), sum(s.count for s, _ in missed)
    start, stop = filters.offset, filters.offset + filters.limit
    wanted = min(stop, n_fit) - start
    if sort in WORKLOAD_SORTS:
        # cost orders fitting offers exactly as fit does: the cost is rank_key's lead.
        ids = ranked_ids(
            session,
            filters=filters,
            bounds=bounds,
            fitting=fitting,
            use_spot=assess.use_spot,
            limit=wanted,
            offset=start,
        )
    else:
        ids = member_ids(
            session,
            filters=filters,
            bounds=bounds,
            members=fitting,
            others=missed,
            order=order_by(sort, filters),
            limit=wanted,
            offset=start,
        )
    if not filters.fits_only:
        # Near misses (enough VRAM by the bound, but no layout fits) follow the fitting offers.
        ids += member_ids(
            session,
            filters=filters,
            bounds=bounds,
            members=missed,
            others=fitting,
            order=order_by(rest_sort(sort), filters),
            limit=min(stop, n_fit + n_missed) - max(start, n_fit),
            offset=max(0, start - n_fit),
        )
    return RankedHead(ids, n_fit, n_missed)
