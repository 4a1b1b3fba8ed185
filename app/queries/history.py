"""Offer detail, GPU page and price history queries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Float, FunctionElement, and_, func, literal, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session

from app.queries.rows import OfferRow, fetch_rows, row_select
from app.store import data_cache
from app.store.models import GpuPricePoint, Offer, PricePoint, per_gpu_sql


@dataclass(frozen=True)
class HistoryPoint:
    observed_at: datetime
    price_per_hour: float | None
    spot_price_per_hour: float | None
    availability: str
    availability_count: int | None = None


def price_history(session: Session, *, offer_id: int, limit: int = 5000) -> list[HistoryPoint]:
    """The recorded price/availability points of one offer, oldest first."""
    stmt = (
        select(
            PricePoint.observed_at,
            PricePoint.price_per_hour,
            PricePoint.spot_price_per_hour,
            PricePoint.availability,
            PricePoint.availability_count,
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
    # One point per time bucket: (bucket start, the lowest cheapest-listed price per GPU-hour
    # in it); `ranges` gives each bucket's (start, end, lowest, highest) of that price.
    points: list[tuple[datetime, float]]
    ranges: list[tuple[datetime, datetime, float, float]]

    @property
    def latest(self) -> float:
        return self.points[-1][1]


class _Epoch(FunctionElement[float]):
    """Seconds since 1970 of a UTC timestamp column, on either backend."""

    type = Float()
    name = "epoch_seconds"
    inherit_cache = True


@compiles(_Epoch, "postgresql")
def _epoch_pg(element: _Epoch, compiler: Any, **kw: Any) -> str:
    # extract() returns numeric, whose arithmetic is several times slower than float8's.
    return f"CAST(extract(epoch from {compiler.process(element.clauses, **kw)}) AS FLOAT8)"


@compiles(_Epoch, "sqlite")
def _epoch_sqlite(element: _Epoch, compiler: Any, **kw: Any) -> str:
    # SQLAlchemy stores SQLite datetimes as 'YYYY-MM-DD HH:MM:SS.ffffff' (UTC).
    return f"CAST(strftime('%s', {compiler.process(element.clauses, **kw)}) AS REAL)"


CHART_BUCKETS = 120


def gpu_price_history(
    session: Session,
    *,
    slug: str,
    providers: Sequence[str] | None = None,
    buckets: int = CHART_BUCKETS,
) -> list[ProviderHistory]:
    """Per provider (all, or `providers`), its cheapest listed on-demand price per GPU-hour of
    `slug` over time, in at most `buckets` time buckets (the lowest of each, and its range).

    Reads the per-ingest snapshots (`gpu_price_points`), aggregated in SQL: the rows that reach
    Python are providers x buckets, however long the history or many the offers. Cached until
    the next ingest.
    """
    key = (slug, None if providers is None else tuple(sorted(providers)), buckets)
    return data_cache.cached(
        session, "gpu_history", key, lambda: _gpu_history(session, slug, providers, buckets)
    )


def _gpu_history(
    session: Session, slug: str, providers: Sequence[str] | None, buckets: int
) -> list[ProviderHistory]:
    point = GpuPricePoint
    which = [point.gpu_model_slug == slug]
    if providers is not None:
        which.append(point.provider_id.in_(sorted(providers)))
    t0, t1 = session.execute(
        select(func.min(point.observed_at), func.max(point.observed_at)).where(*which)
    ).one()
    if t0 is None or t1 is None:
        return []
    # A hair wider than span / buckets, so the newest point falls in the last bucket.
    width = max((t1 - t0).total_seconds(), 3600.0) / buckets * (1 + 1e-6)
    bucketed = (
        select(
            point.provider_id.label("provider"),
            func.floor((_Epoch(point.observed_at) - t0.timestamp()) / width).label("bucket"),
            point.min_price_per_gpu.label("price"),
        )
        .where(*which)
        .subquery()
    )
    stmt = (
        select(
            bucketed.c.provider,
            bucketed.c.bucket,
            func.min(bucketed.c.price),
            func.max(bucketed.c.price),
        )
        .group_by(bucketed.c.provider, bucketed.c.bucket)
        .order_by(bucketed.c.provider, bucketed.c.bucket)
    )
    series: dict[str, ProviderHistory] = {}
    step = timedelta(seconds=width)
    for provider, bucket, low, high in session.execute(stmt):
        start = t0 + step * int(bucket)
        history = series.setdefault(provider, ProviderHistory(provider, [], []))
        history.points.append((start, float(low)))
        history.ranges.append((start, start + step, float(low), float(high)))
    return list(series.values())


def cheapest_per_provider(session: Session, *, slug: str) -> list[OfferRow]:
    """For one GPU model, each provider's cheapest active offer by price per GPU-hour, cheapest
    first (cached until the next ingest)."""
    return data_cache.cached(session, "gpu_cheapest", slug, lambda: _cheapest(session, slug))


def _cheapest(session: Session, slug: str) -> list[OfferRow]:
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
        row_select()
        .join(ranked, and_(ranked.c.id == Offer.id, ranked.c.rn == literal(1)))
        .order_by(per_gpu.asc(), Offer.id)
    )
    return fetch_rows(session, stmt)


data_cache.share("gpu_history", ProviderHistory)
data_cache.share("gpu_cheapest", OfferRow)
