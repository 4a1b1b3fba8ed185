"""Per-provider freshness: last success, last run and error, offer count, staleness."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from app.core.redaction import redact
from app.core.settings import Settings
from app.store import data_cache
from app.store.models import Offer, ScrapeRun, utcnow


@dataclass(frozen=True)
class ProviderStatus:
    """One provider (an offers-table provider id) and the feed that keeps it current."""

    provider: str  # provider id, as in the offers table
    source: str | None  # the scraper id; None when no enabled scraper covers this provider
    display_name: str
    interval_minutes: float | None
    last_success: datetime | None
    last_run_at: datetime | None
    last_status: str | None
    last_error: str | None
    offer_count: int  # active offers of this provider, as the table counts them
    sample_offers: int  # of which loaded from the recorded sample
    stale: bool  # no success within twice the interval
    failing_since: datetime | None = None  # first failed run since the last success
    feed_rows: int | None = None  # rows a side feed holds (it brings no offers)

    @property
    def age(self) -> timedelta | None:
        return None if self.last_success is None else utcnow() - self.last_success

    @property
    def state(self) -> str:
        """never tried | skipped | failing | partial | ok | not scraped."""
        if self.source is None:
            return "not scraped"
        if self.last_status is None:
            return "never tried"
        if self.last_status == "partial" and (self.last_error or "").startswith("degraded"):
            return "partial"  # a secondary feed failed; the primary offers landed
        if self.last_status in ("failed", "partial"):
            return "failing"  # failed, or rejected as a partial feed: nothing was kept
        if self.last_status == "skipped":
            return "skipped"
        return "ok"


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


data_cache.share("active_offers")


def _active_offers(session: Session) -> list[tuple[str, str, int]]:
    """(provider id, source, active offers) for every pair: one scan serves the per-source and
    the per-provider counts (cached until the next ingest)."""

    def count() -> list[tuple[str, str, int]]:
        stmt = (
            select(Offer.provider_id, Offer.source, func.count())
            .where(Offer.active.is_(True))
            .group_by(Offer.provider_id, Offer.source)
        )
        return [(provider, source, int(n)) for provider, source, n in session.execute(stmt)]

    return data_cache.cached(session, "active_offers", None, count)


def active_offers_by_source(session: Session) -> dict[str, int]:
    """How many active offers each source last wrote (cached until the next ingest)."""
    out: dict[str, int] = {}
    for _provider, source, n in _active_offers(session):
        out[source] = out.get(source, 0) + n
    return out


def active_offers_by_provider(session: Session) -> dict[str, tuple[int, int]]:
    """Active offers per provider id: (all, from the sample); cached until the next ingest.

    The same rows the offers table counts, so the per-provider counts add up to its total.
    """
    from app.pipeline.sample_loader import SAMPLE_SOURCE

    out: dict[str, tuple[int, int]] = {}
    for provider, source, n in _active_offers(session):
        total, from_sample = out.get(provider, (0, 0))
        out[provider] = (total + n, from_sample + (n if source == SAMPLE_SOURCE else 0))
    return out


def _last_success(session: Session) -> dict[str, datetime]:
    """Each source's last successful run: ok, or partial with offers kept (a secondary feed
    failed but the primary offers landed)."""
    success = or_(
        ScrapeRun.status == "ok",
        and_(ScrapeRun.status == "partial", ScrapeRun.offers_seen > 0),
    )
    stmt = (
        select(ScrapeRun.source, func.max(ScrapeRun.finished_at))
        .where(success)
        .group_by(ScrapeRun.source)
    )
    return {source: finished for source, finished in session.execute(stmt) if finished}


def _failing_since(session: Session, source: str, last_success: datetime | None) -> datetime | None:
    stmt = select(func.min(ScrapeRun.started_at)).where(
        ScrapeRun.source == source, ScrapeRun.status.in_(("failed", "partial"))
    )
    if last_success is not None:
        stmt = stmt.where(ScrapeRun.started_at > last_success)
    return session.scalar(stmt)


def provider_statuses(
    session: Session, settings: Settings, *, now: datetime | None = None
) -> list[ProviderStatus]:
    """One status per provider: each enabled scraper's provider, plus any provider that has
    offers without one (e.g. sample rows of a disabled feed), so the counts match the table."""
    from app.pipeline.scrape_runner import interval_minutes
    from scrapers.facts import display_name
    from scrapers.registry import SCRAPERS

    now = now or utcnow()
    last_ok = _last_success(session)
    latest_ids = select(func.max(ScrapeRun.id)).group_by(ScrapeRun.source).scalar_subquery()
    latest = {
        run.source: run
        for run in session.scalars(select(ScrapeRun).where(ScrapeRun.id.in_(latest_ids)))
    }
    counts = active_offers_by_provider(session)
    statuses: dict[str, ProviderStatus] = {}
    for name, cls in sorted(SCRAPERS.items()):
        provider = cls.provider_id()
        if not settings.scraper_enabled(name) or provider in statuses:
            continue
        interval = interval_minutes(cls, settings)
        run = latest.get(name)
        status = None if run is None else run.status
        success = last_ok.get(name)
        total, sample = counts.get(provider, (0, 0))
        statuses[provider] = ProviderStatus(
            provider=provider,
            source=name,
            display_name=display_name(provider),
            interval_minutes=interval,
            last_success=success,
            last_run_at=None if run is None else run.started_at,
            last_status=status,
            # Redacted again on the way out: rows stored by an older version may hold a key.
            last_error=None if run is None or run.error is None else redact(run.error),
            offer_count=total,
            sample_offers=sample,
            stale=is_stale(success, status, interval, now),
            failing_since=(
                _failing_since(session, name, success)
                if status in ("failed", "partial") and (run is None or run.finished_at != success)
                else None
            ),
        )
    for provider, (total, sample) in counts.items():
        if provider not in statuses:
            statuses[provider] = ProviderStatus(
                provider=provider,
                source=None,
                display_name=display_name(provider),
                interval_minutes=None,
                last_success=None,
                last_run_at=None,
                last_status=None,
                last_error=None,
                offer_count=total,
                sample_offers=sample,
                stale=False,
            )
    from app.pipeline.side_feeds import side_feed_statuses

    ordered = sorted(statuses.values(), key=lambda s: s.display_name.lower())
    # Side feeds (spot bands) come last; they hold no offers, so the counts still add up.
    return ordered + side_feed_statuses(session, settings, now=now)


@dataclass(frozen=True)
class SampleNotice:
    """Shown while the table holds only the recorded sample (no live scrape succeeded yet)."""

    sample_date: str | None  # the newest recorded date
    sample_offers: int
    sample_since: str | None = None  # the oldest recorded date, when the sources differ


def sample_notice(session: Session) -> SampleNotice | None:
    from app.pipeline.sample_loader import SAMPLE_SOURCE, sample_dates
    from app.pipeline.side_feeds import SIDE_FEEDS

    # Side feeds (spot bands) bring no offers: their success does not replace the sample.
    live_ok = session.scalar(
        select(func.count())
        .select_from(ScrapeRun)
        .where(ScrapeRun.status == "ok", ScrapeRun.source.notin_([SAMPLE_SOURCE, *SIDE_FEEDS]))
    )
    sample_offers = active_offers_by_source(session).get(SAMPLE_SOURCE, 0)
    if live_ok or not sample_offers:
        return None
    dates = sample_dates()
    if dates is None:
        return SampleNotice(sample_date=None, sample_offers=sample_offers)
    oldest, newest = dates
    return SampleNotice(
        sample_date=newest.isoformat(),
        sample_offers=sample_offers,
        sample_since=oldest.isoformat() if oldest != newest else None,
    )
