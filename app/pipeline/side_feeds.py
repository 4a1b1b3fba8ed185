"""Side feeds: public data that is not an offer list but feeds the cost model (spot risk bands).

Each side feed runs on a schedule like a price feed and records a `ScrapeRun` under its own id,
so the providers page and `/api/providers` show its health. Its rows replace the previous set in
one transaction; a failed, empty or suspiciously small fetch leaves the old rows in place.
Settings reuse the provider overrides: `GPUFIT_PROVIDERS__AWS_SPOT_ADVISOR__URL`, `__ENABLED`,
`__INTERVAL_MINUTES` (default: the list-price interval, 6 h).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Iterable
from datetime import datetime, timedelta

from apscheduler.schedulers.base import BaseScheduler
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from app.core.settings import Settings
from app.pipeline.freshness import ProviderStatus, is_stale
from app.pipeline.ingest import ScrapeRejected, check_sanity, last_good_count
from app.pipeline.scrape_runner import RunResult, ScrapeRunner, describe_error, provider_lock
from app.store.data_cache import bump_data_version
from app.store.models import ScrapeRun, SpotAdvisorRow
from scrapers.http import make_client
from scrapers.spot_advisor import SpotAdvisorFeed, SpotAdvisorRecord

log = logging.getLogger("gpufit.side_feeds")

SIDE_FEEDS: dict[str, type[SpotAdvisorFeed]] = {SpotAdvisorFeed.id: SpotAdvisorFeed}


def side_feed_interval_minutes(feed_id: str, settings: Settings) -> float:
    """Configured interval, else the list-price interval (the advisor changes at most daily)."""
    return settings.provider(feed_id).interval_minutes or settings.list_interval_minutes


def enabled_side_feeds(settings: Settings) -> list[str]:
    """Side feed ids the scheduler runs (same switches as the price feeds)."""
    return [feed_id for feed_id in sorted(SIDE_FEEDS) if settings.scraper_enabled(feed_id)]


def replace_advisor_rows(
    session: Session, *, provider_id: str, records: Iterable[SpotAdvisorRecord], now: datetime
) -> tuple[int, int, int, int]:
    """Replace a provider's advisor rows in the caller's transaction and bump the data version;
    returns (stored, added, changed, removed)."""
    before = {
        (row.region, row.instance_type, row.os): (row.band_index, row.savings_pct)
        for row in session.execute(
            select(
                SpotAdvisorRow.region,
                SpotAdvisorRow.instance_type,
                SpotAdvisorRow.os,
                SpotAdvisorRow.band_index,
                SpotAdvisorRow.savings_pct,
            ).where(SpotAdvisorRow.provider_id == provider_id)
        )
    }
    rows: dict[tuple[str, str, str], SpotAdvisorRecord] = {}
    for record in records:  # a key listed twice keeps its last row
        rows[(record.region, record.instance_type, record.os)] = record
    session.execute(delete(SpotAdvisorRow).where(SpotAdvisorRow.provider_id == provider_id))
    if rows:
        session.execute(
            insert(SpotAdvisorRow),
            [
                {
                    "provider_id": provider_id,
                    "region": r.region,
                    "instance_type": r.instance_type,
                    "os": r.os,
                    "band_index": r.band_index,
                    "band_label": r.band_label,
                    "band_max_pct": r.band_max_pct,
                    "savings_pct": r.savings_pct,
                    "fetched_at": now,
                }
                for r in rows.values()
            ],
        )
    bump_data_version(session, now)  # caches derived from the bands (spot risk) start over
    added = sum(1 for key in rows if key not in before)
    changed = sum(
        1
        for key, r in rows.items()
        if key in before and before[key] != (r.band_index, r.savings_pct)
    )
    removed = sum(1 for key in before if key not in rows)
    return len(rows), added, changed, removed


class SideFeedRunner(ScrapeRunner):
    """Runs side feeds against one database with the price feeds' lock and run records
    (`ScrapeRunner`'s run bookkeeping: `_start_run`, `_update_run`, `_finish`)."""

    def feed(self, feed_id: str) -> SpotAdvisorFeed:
        """The feed object with its URL from settings (KeyError for an unknown id)."""
        return SIDE_FEEDS[feed_id](self.settings.provider(feed_id).url)

    async def run_feed(self, feed_id: str, *, scheduled: bool = False) -> RunResult:
        """Fetch one side feed and replace its rows; never raises for a feed problem."""
        with provider_lock(self.engine, feed_id) as got:
            if not got:
                return RunResult(source=feed_id, status="locked")
            if scheduled and await asyncio.to_thread(self._feed_ran_recently, feed_id):
                return RunResult(source=feed_id, status="locked")
            return await self._run_feed_locked(feed_id)

    def _feed_ran_recently(self, feed_id: str) -> bool:
        window = timedelta(minutes=side_feed_interval_minutes(feed_id, self.settings) / 2)
        with self.sessions() as session:
            last = session.scalar(
                select(func.max(ScrapeRun.started_at)).where(ScrapeRun.source == feed_id)
            )
        return last is not None and self.clock() - last < window

    async def _run_feed_locked(self, feed_id: str) -> RunResult:
        started = time.monotonic()
        run_id = await asyncio.to_thread(self._start_run, feed_id)
        feed = self.feed(feed_id)
        try:
            async with make_client(timeout=self.settings.http_timeout_seconds) as client:
                page = await feed.fetch(client)
            parsed = feed.parse(page)
        except Exception as exc:  # noqa: BLE001 - any failure is recorded, never raised
            return await asyncio.to_thread(
                self._finish, run_id, feed_id, "failed", describe_error(exc), started
            )
        return await asyncio.to_thread(
            self._store, run_id, feed, parsed.records, parsed.warnings, started
        )

    def _store(
        self,
        run_id: int,
        feed: SpotAdvisorFeed,
        records: list[SpotAdvisorRecord],
        warnings: list[str],
        started: float,
    ) -> RunResult:
        source = feed.id
        try:
            with self.sessions.begin() as session:
                check_sanity(
                    len({(r.region, r.instance_type, r.os) for r in records}),
                    last_good_count(session, source),
                    self.settings.min_offer_fraction,
                )
                stored, added, changed, removed = replace_advisor_rows(
                    session, provider_id=feed.provider_id, records=records, now=self.clock()
                )
                self._update_run(
                    session,
                    run_id,
                    source,
                    "ok",
                    None,
                    started,
                    seen=stored,
                    added=added,
                    updated=changed,
                    removed=removed,
                    warnings=warnings,
                )
        except ScrapeRejected as exc:
            # Raised inside the transaction, so the old rows were never touched.
            status = "failed" if not records else "partial"
            return self._finish(run_id, source, status, describe_error(exc), started)
        except Exception as exc:  # noqa: BLE001 - e.g. the database went away mid-run
            log.exception("side feed store failed", extra={"source": source})
            return self._finish(run_id, source, "failed", describe_error(exc), started)
        log.info("side feed ok", extra={"source": source, "seen": stored})
        return RunResult(
            source=source,
            status="ok",
            seen=stored,
            added=added,
            updated=changed,
            removed=removed,
            run_id=run_id,
        )


async def _job(runner: SideFeedRunner, feed_id: str) -> None:
    try:
        await runner.run_feed(feed_id, scheduled=True)
    except Exception:  # noqa: BLE001 - a scheduler job must never die
        log.exception("side feed job crashed", extra={"source": feed_id})


def add_side_feed_jobs(
    scheduler: BaseScheduler, settings: Settings, runner: SideFeedRunner, *, start: datetime
) -> None:
    """One non-overlapping interval job per enabled side feed (ids `scrape-<feed id>`)."""
    for feed_id in enabled_side_feeds(settings):
        first = start + timedelta(seconds=random.uniform(0, settings.first_run_spread_seconds))
        scheduler.add_job(
            _job,
            IntervalTrigger(
                minutes=side_feed_interval_minutes(feed_id, settings),
                jitter=settings.interval_jitter_seconds or None,
                start_date=first,
            ),
            args=[runner, feed_id],
            id=f"scrape-{feed_id}",
            name=f"scrape {feed_id}",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=300,
            next_run_time=first,
        )


def side_feed_statuses(
    session: Session, settings: Settings, *, now: datetime
) -> list[ProviderStatus]:
    """Freshness rows for the side feeds, in the providers page's shape (rows held, no offers)."""
    statuses = []
    for feed_id in enabled_side_feeds(settings):
        cls = SIDE_FEEDS[feed_id]
        last_ok = session.scalar(
            select(func.max(ScrapeRun.finished_at)).where(
                ScrapeRun.source == feed_id, ScrapeRun.status == "ok"
            )
        )
        run = session.scalar(
            select(ScrapeRun)
            .where(ScrapeRun.source == feed_id)
            .order_by(ScrapeRun.id.desc())
            .limit(1)
        )
        rows = session.scalar(
            select(func.count())
            .select_from(SpotAdvisorRow)
            .where(SpotAdvisorRow.provider_id == cls.provider_id)
        )
        interval = side_feed_interval_minutes(feed_id, settings)
        status = None if run is None else run.status
        statuses.append(
            ProviderStatus(
                provider=feed_id,
                source=feed_id,
                display_name=cls.display_name,
                interval_minutes=interval,
                last_success=last_ok,
                last_run_at=None if run is None else run.started_at,
                last_status=status,
                last_error=None if run is None else run.error,
                offer_count=0,
                sample_offers=0,
                stale=is_stale(last_ok, status, interval, now),
                feed_rows=int(rows or 0),
            )
        )
    return statuses
