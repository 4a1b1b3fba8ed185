"""The scheduler: one non-overlapping job per enabled provider, on the provider's interval."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.core.settings import ProviderSettings, Settings
from app.pipeline.scheduler import build_scheduler
from app.pipeline.scrape_runner import ScrapeRunner
from scrapers.registry import SCRAPERS


def test_jobs_per_provider_with_intervals(
    database_url: str, engine: Engine, session_factory: sessionmaker[Session]
) -> None:
    settings = Settings(
        database_url=database_url,
        interval_jitter_seconds=0,
        providers={
            "azure": ProviderSettings(interval_minutes=90),
            "oci": ProviderSettings(enabled=False),
        },
        _env_file=None,
    )
    scheduler = build_scheduler(settings, ScrapeRunner(settings, engine, session_factory))
    jobs = {job.id: job for job in scheduler.get_jobs()}
    side = {"scrape-aws-spot-advisor"}  # side feeds (app/pipeline/side_feeds.py) run too
    assert set(jobs) == {f"scrape-{name}" for name in SCRAPERS if name != "oci"} | side
    assert all(job.max_instances == 1 and job.coalesce for job in jobs.values())
    minutes = {jid: job.trigger.interval.total_seconds() / 60 for jid, job in jobs.items()}
    assert minutes["scrape-azure"] == 90
    assert minutes["scrape-vastai"] == 30  # a marketplace
    assert minutes["scrape-skypilot-nebius"] == 360  # a list-price cloud


def test_enabled_scrapers_list_limits_jobs(
    database_url: str, engine: Engine, session_factory: sessionmaker[Session]
) -> None:
    settings = Settings(database_url=database_url, enabled_scrapers=["vastai"], _env_file=None)
    scheduler = build_scheduler(settings, ScrapeRunner(settings, engine, session_factory))
    assert [job.id for job in scheduler.get_jobs()] == ["scrape-vastai"]
