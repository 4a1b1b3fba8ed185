"""The Prometheus endpoint: refreshes the offers-per-provider gauge from the database."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import func, select

from app.core.deps import SessionDep
from app.core.metrics import OFFERS
from app.store.models import Offer

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
def metrics(session: SessionDep) -> Response:
    """Prometheus text exposition."""
    counts = session.execute(
        select(Offer.provider_id, func.count())
        .where(Offer.active.is_(True))
        .group_by(Offer.provider_id)
    )
    for provider, count in counts:
        OFFERS.labels(provider=provider).set(count)
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
