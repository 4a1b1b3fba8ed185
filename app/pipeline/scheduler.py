"""APScheduler jobs: each provider on its own interval with jitter, never overlapping itself.

Runs inside the web process (`gpufit serve`) or alone (`gpufit worker`). With Postgres, the
runner's advisory lock plus its "ran this interval" check make several replicas scrape each
provider once per interval.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from datetime import datetime, timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.core.settings import Settings
from app.pipeline.scrape_runner import ScrapeRunner, close_abandoned_runs, interval_minutes
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
    return scheduler


async def _job(runner: ScrapeRunner, cls: type[Scraper]) -> None:
    try:
        await runner.run(cls, scheduled=True)
    except Exception:  # noqa: BLE001 - a scheduler job must never die
        log.exception("scrape job crashed", extra={"source": cls.name})


def start_scheduler(
    settings: Settings,
    engine: Engine,
    session_factory: sessionmaker[Session],
    *,
    before_commit: Callable[[Session], None] | None = None,
) -> AsyncIOScheduler:
    """Start the scheduler on the running event loop (the web app's lifespan); `before_commit`
    runs in each ingest's transaction (ScrapeRunner)."""
    with session_factory.begin() as session:
        close_abandoned_runs(session, utcnow())
    runner = ScrapeRunner(settings, engine, session_factory, before_commit=before_commit)
    scheduler = build_scheduler(settings, runner)
    scheduler.start()
    log.info("scheduler started", extra={"jobs": len(scheduler.get_jobs())})
    return scheduler


async def run_worker_forever(
    settings: Settings,
    engine: Engine,
    session_factory: sessionmaker[Session],
    *,
    stop: asyncio.Event | None = None,
    before_commit: Callable[[Session], None] | None = None,
) -> None:
    """`gpufit worker`: run the scheduler until `stop` is set (or forever)."""
    scheduler = start_scheduler(settings, engine, session_factory, before_commit=before_commit)
    try:
        await (stop or asyncio.Event()).wait()
    finally:
        scheduler.shutdown(wait=False)
