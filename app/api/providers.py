"""GET /api/providers: each provider's freshness and last scrape outcome."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel

from app.core.deps import SessionDep, SettingsDep
from app.pipeline.freshness import provider_statuses

router = APIRouter()


class ProviderPublic(BaseModel):
    provider: str
    display_name: str
    interval_minutes: float
    last_success: datetime | None
    last_run_at: datetime | None
    last_status: str | None
    last_error: str | None
    offer_count: int
    stale: bool


class ProvidersPublic(BaseModel):
    providers: list[ProviderPublic]


@router.get("/api/providers", tags=["providers"])
def list_providers(session: SessionDep, settings: SettingsDep) -> ProvidersPublic:
    """Every registered provider with last success, last status and error, offer count."""
    return ProvidersPublic(
        providers=[
            ProviderPublic(
                provider=s.source,
                display_name=s.display_name,
                interval_minutes=s.interval_minutes,
                last_success=s.last_success,
                last_run_at=s.last_run_at,
                last_status=s.last_status,
                last_error=s.last_error,
                offer_count=s.offer_count,
                stale=s.stale,
            )
            for s in provider_statuses(session, settings)
        ]
    )
