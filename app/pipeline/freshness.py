"""Per-provider freshness: last success, last run and error, offer count, staleness."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.settings import Settings
from app.store import data_cache
from app.store.models import Offer, ScrapeRun, utcnow


@dataclass(frozen=True)
class ProviderStatus:
    source: str  # scraper id
    display_name: str
    interval_minutes: float
    last_success: datetime | None
    last_run_at: datetime | None
    last_status: str | None
    last_error: str | None
    offer_count: int  # active offers last written by this source
    stale: bool  # no success within twice the interval

    @property
    def age(self) -> timedelta | None:
        return None if self.last_success is None else utcnow() - self.last_success


def is_stale(
    last_success: datetime | None,
    last_status: str | None,
    interval_minutes: float,
    now: datetime,
) -> bool:
    """Stale: the last success is older than twice the interval, or it failed and never succeeded.

    A provider not tried yet, or skipped for want of an API key, is not stale: there is no feed
    data of its own to be out of date.
    """
    if last_success is None:
        return last_status in ("failed", "partial")
    return now - last_success > timedelta(minutes=2 * interval_minutes)


data_cache.share("offers_by_source")


def active_offers_by_source(session: Session) -> dict[str, int]:
    """How many active offers each source last wrote (cached until the next ingest)."""

    def count() -> dict[str, int]:
        stmt = select(Offer.source, func.count()).where(Offer.active.is_(True))
        return {source: int(n) for source, n in session.execute(stmt.group_by(Offer.source))}

    return data_cache.cached(session, "offers_by_source", None, count)


def provider_statuses(
    session: Session, settings: Settings, *, now: datetime | None = None
) -> list[ProviderStatus]:
    """One status per registered scraper, from the scrape_runs table."""
    from app.pipeline.scrape_runner import interval_minutes
    from scrapers.registry import SCRAPERS

    now = now or utcnow()
    last_ok = {  # noqa: C416 - dict(rows) loses the row types for mypy
        source: finished
        for source, finished in session.execute(
            select(ScrapeRun.source, func.max(ScrapeRun.finished_at))
            .where(ScrapeRun.status == "ok")
            .group_by(ScrapeRun.source)
        )
    }
    latest_ids = select(func.max(ScrapeRun.id)).group_by(ScrapeRun.source).scalar_subquery()
    latest = {
        run.source: run
        for run in session.scalars(select(ScrapeRun).where(ScrapeRun.id.in_(latest_ids)))
    }
    counts = active_offers_by_source(session)
    statuses = []
    for name, cls in sorted(SCRAPERS.items()):
        if not settings.scraper_enabled(name):
            continue
        interval = interval_minutes(cls, settings)
        run = latest.get(name)
        statuses.append(
            ProviderStatus(
                source=name,
                display_name=cls.display_name,
                interval_minutes=interval,
                last_success=last_ok.get(name),
                last_run_at=None if run is None else run.started_at,
                last_status=None if run is None else run.status,
                last_error=None if run is None else run.error,
                offer_count=counts.get(name, 0),
                stale=is_stale(
                    last_ok.get(name), None if run is None else run.status, interval, now
                ),
            )
        )
    return statuses


@dataclass(frozen=True)
class SampleNotice:
    """Shown while the table holds only the recorded sample (no live scrape succeeded yet)."""

    sample_date: str | None
    sample_offers: int


def sample_notice(session: Session) -> SampleNotice | None:
    from app.pipeline.sample_loader import SAMPLE_SOURCE, sample_date

    live_ok = session.scalar(
        select(func.count())
        .select_from(ScrapeRun)
        .where(ScrapeRun.status == "ok", ScrapeRun.source != SAMPLE_SOURCE)
    )
    sample_offers = active_offers_by_source(session).get(SAMPLE_SOURCE, 0)
    if live_ok or not sample_offers:
        return None
    day = sample_date()
    return SampleNotice(
        sample_date=None if day is None else day.isoformat(), sample_offers=sample_offers
    )
