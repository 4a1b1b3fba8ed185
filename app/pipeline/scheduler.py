"""APScheduler jobs: each provider on its own interval with jitter, never overlapping itself.

Runs alone (`gpufit worker`, the production layout: docker-compose's `worker` service) or inside
the web process (`gpufit serve`, the one-command laptop set-up). Either way the scrapes get a
database engine and connection pool of their own, so they never wait on (or hold) the web's
connections. With Postgres, the runner's advisory lock plus its "ran this interval" check make
several replicas scrape each provider once per interval. A sweep job closes runs whose process
died (no heartbeat) every minute.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.core.settings import Settings
from app.pipeline.scrape_runner import ScrapeRunner, close_abandoned_runs, interval_minutes
from app.pipeline.side_feeds import SideFeedRunner, add_side_feed_jobs
from app.store.db import make_scrape_engine, make_session_factory
from app.store.models import utcnow
from scrapers.base import Scraper

log = logging.getLogger("gpufit.scheduler")


def enabled_scrapers(settings: Settings) -> list[type[Scraper]]:
    from scrapers.registry import SCRAPERS

    return [cls for name, cls in sorted(SCRAPERS.items()) if settings.scraper_enabled(name)]


def build_scheduler(
    settings: Settings,
    runner: ScrapeRunner,
    *,
    first_run_at: datetime | None = None,
) -> AsyncIOScheduler:
    """One interval job per enabled provider; max_instances=1 so a run never overlaps itself."""
    scheduler = AsyncIOScheduler(timezone="UTC")
    start = first_run_at or utcnow()
    for cls in enabled_scrapers(settings):
        # Stagger first runs so a start does not fetch every feed in the same second.
        delay = random.uniform(0, settings.first_run_spread_seconds)
        scheduler.add_job(
            _job,
            IntervalTrigger(
                minutes=interval_minutes(cls, settings),
                jitter=settings.interval_jitter_seconds or None,
                start_date=start + timedelta(seconds=delay),
            ),
            args=[runner, cls],
            id=f"scrape-{cls.name}",
            name=f"scrape {cls.name}",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=300,
            next_run_time=start + timedelta(seconds=delay),
        )
    side_runner = SideFeedRunner(settings, runner.engine, runner.sessions, clock=runner.clock)
    add_side_feed_jobs(scheduler, settings, side_runner, start=start)
    return scheduler


async def _job(runner: ScrapeRunner, cls: type[Scraper]) -> None:
    try:
        await runner.run(cls, scheduled=True)
    except Exception:  # noqa: BLE001 - a scheduler job must never die
        log.exception("scrape job crashed", extra={"source": cls.name})


SWEEP_SECONDS = 60.0


@dataclass
class ScrapeScheduler:
    """The running scheduler with the runner and the engine (pool) it owns."""

    scheduler: AsyncIOScheduler
    runner: ScrapeRunner
    engine: Engine

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop scheduling, record in-flight runs as interrupted, close the scrape pool."""
        self.scheduler.shutdown(wait=False)
        await self.runner.stop(timeout)
        self.engine.dispose()


async def _sweep(sessions: sessionmaker[Session]) -> None:
    def close() -> int:
        with sessions.begin() as session:
            return close_abandoned_runs(session, utcnow())

    try:
        closed = await asyncio.to_thread(close)
    except Exception:  # noqa: BLE001 - the next sweep tries again
        log.exception("abandoned-run sweep failed")
        return
    if closed:
        log.warning("closed %d abandoned scrape run(s)", closed)


def start_scheduler(
    settings: Settings, *, before_commit: Callable[[Session], None] | None = None
) -> ScrapeScheduler:
    """Start the scheduler on the running event loop, with its own engine and pool;
    `before_commit` runs in each ingest's transaction (ScrapeRunner)."""
    engine = make_scrape_engine(settings.database_url, work_mem_mb=settings.pg_work_mem_mb)
    sessions = make_session_factory(engine)
    runner = ScrapeRunner(settings, engine, sessions, before_commit=before_commit)
    scheduler = build_scheduler(settings, runner)
    scheduler.add_job(
        _sweep,
        IntervalTrigger(seconds=SWEEP_SECONDS),
        args=[sessions],
        id="close-abandoned-runs",
        name="close abandoned scrape runs",
        max_instances=1,
        coalesce=True,
        next_run_time=utcnow(),
    )
    scheduler.start()
    log.info("scheduler started", extra={"jobs": len(scheduler.get_jobs())})
    return ScrapeScheduler(scheduler, runner, engine)


async def run_worker_forever(
    settings: Settings,
    *,
    stop: asyncio.Event | None = None,
    before_commit: Callable[[Session], None] | None = None,
) -> None:
    """`gpufit worker`: run the scheduler until `stop` is set (or forever)."""
    service = start_scheduler(settings, before_commit=before_commit)
    try:
        await (stop or asyncio.Event()).wait()
    finally:
        await service.stop()
