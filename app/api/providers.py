"""GET /api/providers: each provider's offers, freshness and last scrape outcome.

One entry per provider id of the offers table; `offer_count` counts the same active offers the
table does (sample rows included, and counted again in `sample_offers`), so the counts add up
to `/api/offers` `total`.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel

from app.core.deps import SessionDep, SettingsDep
from app.pipeline.freshness import provider_statuses

router = APIRouter()


class ProviderPublic(BaseModel):
    provider: str  # provider id, as in /api/offers
    source: str | None  # the scraper that keeps it current; None when none is enabled
    display_name: str
    state: str  # never tried | skipped | failing | partial | ok | not scraped
    interval_minutes: float | None
    last_success: datetime | None
    last_run_at: datetime | None
    last_status: str | None
    last_error: str | None
    failing_since: datetime | None
    offer_count: int
    sample_offers: int
    stale: bool
    feed_rows: int | None = None  # a side feed's rows (e.g. spot bands); it holds no offers


class ProvidersPublic(BaseModel):
    providers: list[ProviderPublic]


@router.get("/api/providers", tags=["providers"])
def list_providers(session: SessionDep, settings: SettingsDep) -> ProvidersPublic:
    """Every provider: offer count (sample offers too), feed state, last success and error."""
    return ProvidersPublic(
        providers=[
            ProviderPublic(
                provider=s.provider,
                source=s.source,
                display_name=s.display_name,
                state=s.state,
                interval_minutes=s.interval_minutes,
                last_success=s.last_success,
                last_run_at=s.last_run_at,
                last_status=s.last_status,
                last_error=s.last_error,
                failing_since=s.failing_since,
                offer_count=s.offer_count,
                sample_offers=s.sample_offers,
                stale=s.stale,
                feed_rows=s.feed_rows,
            )
            for s in provider_statuses(session, settings)
        ]
    )
