"""Read the spot_advisor table for the cost model: plain rows, cached until the data changes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store import data_cache
from app.store.models import SpotAdvisorRow


@dataclass(frozen=True)
class AdvisorBandRow:
    """One stored band, detached from the session (fits app.fit.market.AdvisorRowLike)."""

    provider_id: str
    region: str
    instance_type: str
    os: str
    band_index: int
    band_label: str
    band_max_pct: float
    savings_pct: float | None
    fetched_at: datetime | None


def advisor_rows(
    session: Session, *, provider_id: str = "aws", os: str = "Linux"
) -> tuple[AdvisorBandRow, ...]:
    """Every stored band of one provider and OS (cached per data version; do not mutate)."""

    def load() -> tuple[AdvisorBandRow, ...]:
        stmt = select(SpotAdvisorRow).where(
            SpotAdvisorRow.provider_id == provider_id, SpotAdvisorRow.os == os
        )
        return tuple(
            AdvisorBandRow(
                provider_id=r.provider_id,
                region=r.region,
                instance_type=r.instance_type,
                os=r.os,
                band_index=r.band_index,
                band_label=r.band_label,
                band_max_pct=r.band_max_pct,
                savings_pct=r.savings_pct,
                fetched_at=r.fetched_at,
            )
            for r in session.scalars(stmt.order_by(SpotAdvisorRow.id))
        )

    return data_cache.cached(session, "spot_advisor", (provider_id, os), load)
