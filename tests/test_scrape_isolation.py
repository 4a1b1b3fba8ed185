"""Scrapes never block the web: a scrape waiting on (or holding) its database connection leaves
the event loop free, scrapes use their own pool, and every run ends recorded, whatever happens:
a crash, a stop, a dead process, a killed lock connection."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session, sessionmaker

import app.pipeline.scrape_runner as runner_module
from app.core.settings import ProviderSettings, Settings
from app.main import create_app
from app.pipeline.ingest import ingest_records
from app.pipeline.scrape_runner import ABANDONED_AFTER, INTERRUPTED, ScrapeRunner
from app.store.db import make_engine, make_scrape_engine, make_session_factory
from app.store.models import ScrapeRun, utcnow
from tests.feed_server import FeedServer
from tests.test_scrape_runner import CUDO, catalog, runs

PAGES = ("/healthz", "/api/offers", "/providers", "/api/providers", "/")


def _settings(database_url: str, server: FeedServer, **extra: Any) -> Settings:
    return Settings(
        database_url=database_url,
        scheduler_enabled=False,
        http_timeout_seconds=2,
        providers={CUDO.name: ProviderSettings(url=server.url + "/cudo/vms.csv")},
        _env_file=None,
        **extra,
    )


async def _served_quickly(app: FastAPI, rounds: int = 3) -> list[float]:
    """Request every page `rounds` times on this event loop; each one's seconds."""
    timings = []
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://web") as client:
        for _ in range(rounds):
            for path in PAGES:
                start = time.perf_counter()
                response = await client.get(path)
                timings.append(time.perf_counter() - start)
                assert response.status_code == 200, (path, response.text[:200])
    return timings


async def test_web_serves_while_a_scrape_holds_its_connection(
    app: FastAPI,
    database_url: str,
    server: FeedServer,
    session_factory: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow_ingest(session: Session, **kwargs: Any) -> Any:
        stats = ingest_records(session, **kwargs)  # writes done, transaction open
        entered.set()
        release.wait(10)  # the scrape's connection stays checked out and busy
        return stats

    monkeypatch.setattr(runner_module, "ingest_records", slow_ingest)
    server.serve("/cudo/vms.csv", catalog(0.37), content_type="text/csv")
    scrape_engine = make_scrape_engine(database_url)
    runner = ScrapeRunner(
        _settings(database_url, server), scrape_engine, make_session_factory(scrape_engine)
    )
    scrape = asyncio.create_task(runner.run(CUDO))
    try:
        while not entered.is_set():
            assert not scrape.done(), scrape
            await asyncio.sleep(0.01)
        timings = await _served_quickly(app)
    finally:
        release.set()
    assert (await scrape).status == "ok"
    scrape_engine.dispose()
    assert max(timings) < 1.0, timings


async def test_web_serves_while_a_scrape_waits_for_its_pool(
    app: FastAPI, database_url: str, server: FeedServer
) -> None:
    # The scrape pool is exhausted: the scrape's lock and run row wait (in a thread) for it.
    scrape_engine = make_engine(database_url, pool_size=1, max_overflow=0, pool_timeout=2)
    held = scrape_engine.connect()
    runner = ScrapeRunner(
        _settings(database_url, server), scrape_engine, make_session_factory(scrape_engine)
    )
    server.serve("/cudo/vms.csv", catalog(0.37), content_type="text/csv")
    scrape = asyncio.create_task(runner.run(CUDO))
    try:
        await asyncio.sleep(0.05)
        timings = await _served_quickly(app, rounds=2)
        assert not scrape.done()
        result = await scrape
    finally:
        held.close()
        scrape_engine.dispose()
    assert max(timings) < 1.0, timings
    # Nothing could be written, so nothing is recorded, but the caller is told why, no raise.
    assert result.status == "failed"
    assert result.error and "database error (TimeoutError)" in result.error


def test_the_scheduler_has_its_own_pool(
    database_url: str, server: FeedServer, session_factory: sessionmaker[Session]
) -> None:
    del session_factory  # a clean database
    server.serve("/cudo/vms.csv", catalog(0.37), content_type="text/csv")
    settings = _settings(
        database_url, server, enabled_scrapers=[CUDO.name], first_run_spread_seconds=0
    )
    app = create_app(settings, scheduler=True)
    with TestClient(app):
        service = app.state.scrape_scheduler
        assert service.engine is not app.state.engine
        assert service.runner.engine is service.engine
        assert {job.id for job in service.scheduler.get_jobs()} == {
            f"scrape-{CUDO.name}",
            "close-abandoned-runs",
        }


@pytest.mark.parametrize("where", ["parse", "screen"])
async def test_a_crash_is_recorded_with_its_reason(
    where: str,
    runner: ScrapeRunner,
    server: FeedServer,
    session_factory: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def boom(*args: Any) -> Any:
        raise KeyError("a bug in the scraper, detail 4711")

    if where == "parse":
        monkeypatch.setattr(CUDO, "parse", boom)
    else:
        monkeypatch.setattr(runner, "_screen", boom)
    server.serve("/cudo/vms.csv", catalog(0.37), content_type="text/csv")

    result = await runner.run(CUDO)

    assert result.status == "failed"
    assert runs(session_factory) == [("failed", "internal error (KeyError); details are in "
                                      "the server log")]  # fmt: skip
    assert any("detail 4711" in (r.exc_text or "") for r in caplog.records)


async def test_a_stop_mid_run_is_recorded_as_interrupted(
    runner: ScrapeRunner, server: FeedServer, session_factory: sessionmaker[Session]
) -> None:
    server.serve("/cudo/vms.csv", catalog(0.37), content_type="text/csv", delay=1.5)
    scrape = asyncio.create_task(runner.run(CUDO))
    await asyncio.sleep(0.3)
    await runner.stop(timeout=5)
    assert scrape.cancelled()
    assert runs(session_factory) == [("failed", INTERRUPTED)]


async def test_runs_of_a_dead_process_are_closed_by_the_next_run(
    runner: ScrapeRunner, server: FeedServer, session_factory: sessionmaker[Session]
) -> None:
    # A process died mid-run. On Postgres the provider's lock proves it dead at once; on
    # SQLite its heartbeat, silent for longer than ABANDONED_AFTER, does.
    is_pg = runner.engine.dialect.name == "postgresql"
    last_beat = utcnow() - (timedelta(seconds=1) if is_pg else ABANDONED_AFTER * 1.1)
    with session_factory.begin() as session:
        session.add(
            ScrapeRun(source=CUDO.name, started_at=last_beat, heartbeat_at=last_beat,
                      status="running")
        )  # fmt: skip
    server.serve("/cudo/vms.csv", catalog(0.37), content_type="text/csv")
    assert (await runner.run(CUDO)).status == "ok"
    assert [status for status, _ in runs(session_factory)] == ["failed", "ok"]
    assert runs(session_factory)[0][1] == INTERRUPTED


@pytest.fixture
def patient_runner(
    database_url: str, engine: Engine, session_factory: sessionmaker[Session], server: FeedServer
) -> ScrapeRunner:
    """A runner whose read timeout (2 s) outlasts the slow feeds below."""
    return ScrapeRunner(_settings(database_url, server), engine, session_factory)


async def test_a_running_scrape_beats_its_heartbeat(
    patient_runner: ScrapeRunner,
    server: FeedServer,
    session_factory: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runner_module, "HEARTBEAT_SECONDS", 0.1)
    server.serve("/cudo/vms.csv", catalog(0.37), content_type="text/csv", delay=0.6)
    assert (await patient_runner.run(CUDO)).status == "ok"
    with session_factory() as session:
        run = session.scalars(select(ScrapeRun)).one()
    assert run.heartbeat_at is not None
    assert run.heartbeat_at - run.started_at >= timedelta(seconds=0.3)


async def test_a_killed_lock_connection_is_no_crash(
    patient_runner: ScrapeRunner, server: FeedServer, engine: Engine
) -> None:
    runner = patient_runner
    if engine.dialect.name != "postgresql":
        pytest.skip("advisory locks exist on Postgres only (SQLite takes no lock)")
    server.serve("/cudo/vms.csv", catalog(0.37), content_type="text/csv", delay=1.0)
    scrape = asyncio.create_task(runner.run(CUDO))
    await asyncio.sleep(0.4)
    with engine.begin() as conn:  # an admin (or a failover) kills the lock's backend
        killed = conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_locks "
                "WHERE locktype = 'advisory' AND pid <> pg_backend_pid()"
            )
        ).all()
    assert killed
    assert (await scrape).status == "ok"  # no exception escapes the release
    server.serve("/cudo/vms.csv", catalog(0.38), content_type="text/csv")
    assert (await runner.run(CUDO)).status == "ok"  # and the lock is free again
