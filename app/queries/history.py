"""Offer detail, GPU page and price history queries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, func, literal, select
from sqlalchemy.orm import Session

from app.queries.rows import OfferRow, fetch_rows, row_select
from app.store.models import Offer, PricePoint, per_gpu_sql


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
        row_select()
        .join(ranked, and_(ranked.c.id == Offer.id, ranked.c.rn == literal(1)))
        .order_by(per_gpu.asc(), Offer.id)
    )
    return fetch_rows(session, stmt)
