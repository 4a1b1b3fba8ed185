"""Shared fixtures: a migrated database (SQLite always, Postgres when configured) and an app.

Set GPUFIT_TEST_DATABASE_URL (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test) to run
every database test on Postgres as well as SQLite.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, Integer, text
from sqlalchemy.orm import Session, sessionmaker

from app.core.settings import ProviderSettings, Settings
from app.main import create_app
from app.store.db import make_engine, make_session_factory
from app.store.migrate import upgrade
from app.store.models import Base

if TYPE_CHECKING:
    from app.pipeline.scrape_runner import ScrapeRunner
from tests.feed_server import FeedServer, feed_server

PG_URL = os.environ.get("GPUFIT_TEST_DATABASE_URL", "")
BACKENDS = ["sqlite", "postgres"] if PG_URL else ["sqlite"]


def _worker_database(url: str, worker: str) -> str:
    """Under pytest-xdist each worker gets its own database beside the configured one (created
    if missing), so workers never drop each other's tables."""
    from sqlalchemy.engine import make_url

    base = make_url(url)
    name = f"{base.database}_{worker}"
    admin = make_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        exists = conn.scalar(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name})
        if not exists:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return base.set(database=name).render_as_string(hide_password=False)


if PG_URL and os.environ.get("PYTEST_XDIST_WORKER"):
    PG_URL = _worker_database(PG_URL, os.environ["PYTEST_XDIST_WORKER"])


def reset_postgres(url: str) -> None:
    """Drop everything in the public schema so migrations start from empty."""
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()


def scratch_postgres_url(suffix: str) -> str:
    """A fresh, empty Postgres database beside the test one, for a test that needs its own."""
    from sqlalchemy.engine import make_url

    url = make_url(PG_URL)
    scratch = f"{url.database}_{suffix}"
    admin = make_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{scratch}"'))
    admin.dispose()
    return url.set(database=scratch).render_as_string(hide_password=False)


@pytest.fixture(autouse=True)
def _fresh_secret_registry() -> Iterator[None]:
    """Secrets registered by one test (settings, request headers) are not redacted in the next."""
    from app.core.redaction import forget_secrets

    yield
    forget_secrets()


@pytest.fixture(scope="session", params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated, empty database URL for the whole test session, one per backend."""
    if request.param == "postgres":
        reset_postgres(PG_URL)
        url = PG_URL
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'test.db'}"
    upgrade(url)
    return url


@pytest.fixture(scope="session")
def engine(database_url: str) -> Iterator[Engine]:
    eng = make_engine(database_url)
    yield eng
    eng.dispose()


_BUSY_ELSEWHERE = text(
    "SELECT state, left(query, 200) FROM pg_stat_activity WHERE datname = current_database() "
    "AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
    "AND state IN ('active', 'idle in transaction')"
)


def _assert_nothing_running(engine: Engine) -> None:
    """A query still running from the previous test (a thread it left behind) would deadlock
    with TRUNCATE; give it a moment, then fail naming it instead."""
    deadline = time.monotonic() + 5
    while True:
        with engine.connect() as conn:
            busy = conn.execute(_BUSY_ELSEWHERE).all()
        if not busy or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not busy, f"a previous test left queries running: {busy}"


def _clear(engine: Engine) -> None:
    tables = list(reversed(Base.metadata.sorted_tables))
    if engine.dialect.name == "postgresql":
        _assert_nothing_running(engine)
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            names = ", ".join(t.name for t in tables)
            conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
        else:
            for table in tables:
                conn.execute(table.delete())


@pytest.fixture
def session_factory(engine: Engine) -> Iterator[sessionmaker[Session]]:
    """A session factory on a database emptied before each test, with the GPU catalog synced."""
    from app.pipeline.catalog_sync import sync_gpu_catalog

    _clear(engine)
    factory = make_session_factory(engine)
    with factory.begin() as session:
        sync_gpu_catalog(session)
    yield factory


@pytest.fixture
def session(session_factory: sessionmaker[Session]) -> Iterator[Session]:
    with session_factory() as s:
        yield s


@pytest.fixture
def settings(database_url: str) -> Settings:
    # No start-up warm: a thread racing the test's own requests would make what a test measures
    # (cold vs cached) depend on timing. tests/test_warm.py turns it on where it is the subject.
    return Settings(
        database_url=database_url, scheduler_enabled=False, warm_on_start=False, _env_file=None
    )


@pytest.fixture
def app(settings: Settings, session_factory: sessionmaker[Session]) -> FastAPI:
    del session_factory  # requested for its side effect: a clean database
    return create_app(settings, scheduler=False)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


# The database right after the first real load of the bundled sample, per backend: later tests
# get the same rows back by bulk insert (measured 0.16 s vs 1.1 s on SQLite, 0.5 s vs 0.9 s on
# Postgres, for re-running the ingest pipeline).
_sample_snapshots: dict[str, tuple[int, dict[str, list[dict[str, Any]]]]] = {}


def _snapshot(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    with engine.connect() as conn:
        return {
            t.name: [dict(r._mapping) for r in conn.execute(t.select())]
            for t in Base.metadata.sorted_tables
        }


def _restore(engine: Engine, rows: dict[str, list[dict[str, Any]]]) -> None:
    """Empty the database and insert `rows` with their ids; Postgres sequences follow the ids."""
    from app.store import data_cache

    _clear(engine)
    with engine.begin() as conn:
        for table in Base.metadata.sorted_tables:
            if rows[table.name]:
                conn.execute(table.insert(), rows[table.name])
            serial = "id" in table.c and isinstance(table.c.id.type, Integer)
            if engine.dialect.name == "postgresql" and serial:
                conn.execute(
                    text(
                        "SELECT setval(pg_get_serial_sequence(:t, 'id'), "
                        f"coalesce((SELECT max(id) FROM {table.name}), 0) + 1, false) "
                        "WHERE pg_get_serial_sequence(:t, 'id') IS NOT NULL"
                    ),
                    {"t": table.name},
                )
    # The same data-version token as the first load: forget what this process computed since,
    # so each test starts as cold as right after a real load.
    data_cache.clear()


@pytest.fixture
def sample_loaded(engine: Engine, session_factory: sessionmaker[Session]) -> int:
    """The bundled sample, loaded; returns the number of offers."""
    from app.pipeline.sample_loader import load_sample

    key = engine.url.render_as_string()
    if key in _sample_snapshots:
        offers, rows = _sample_snapshots[key]
        _restore(engine, rows)
        return offers
    with session_factory.begin() as session:
        offers = load_sample(session).offers
    _sample_snapshots[key] = (offers, _snapshot(engine))
    return offers


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


@pytest.fixture
def server() -> Iterator[FeedServer]:
    with feed_server() as srv:
        yield srv


@pytest.fixture
def runner(
    database_url: str,
    engine: Engine,
    session_factory: sessionmaker[Session],
    server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> ScrapeRunner:
    """A runner on the test database whose skypilot-cudo feed is the local feed server."""
    import scrapers.http
    from app.pipeline.scrape_runner import ScrapeRunner

    monkeypatch.setattr(scrapers.http, "RETRY_BASE_SECONDS", 0.01)  # retries, but fast

    settings = Settings(
        database_url=database_url,
        http_timeout_seconds=0.5,
        providers={"skypilot-cudo": ProviderSettings(url=server.url + "/cudo/vms.csv")},
        _env_file=None,
    )
    return ScrapeRunner(settings, engine, session_factory)
