"""Engine and session factory, shared by the web app, the worker and the CLI."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker


def make_engine(url: str, **kwargs: Any) -> Engine:
    """Create an engine; for SQLite, create the parent folder and enable WAL and foreign keys."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False}, **kwargs)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            # WAL lets the scheduler write while the web app reads.
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=10000")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True, **kwargs)


# The scheduler's pool: a provider's lock connection, its session and its heartbeat, for a few
# providers running at once. Separate from the web's, so neither can starve the other.
SCRAPE_POOL_SIZE = 4
SCRAPE_POOL_OVERFLOW = 4


def make_scrape_engine(url: str) -> Engine:
    """An engine (and connection pool) for scrapes only."""
    if url.startswith("sqlite") and ":memory:" in url:
        return make_engine(url)
    return make_engine(url, pool_size=SCRAPE_POOL_SIZE, max_overflow=SCRAPE_POOL_OVERFLOW)


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session that commits on success and rolls back on any error."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
