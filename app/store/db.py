"""Engine and session factory, shared by the web app, the worker and the CLI."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from app.core.settings import DEFAULT_WORK_MEM_MB


def make_engine(url: str, *, work_mem_mb: int = DEFAULT_WORK_MEM_MB, **kwargs: Any) -> Engine:
    """Create an engine; for SQLite, create the parent folder and enable WAL and foreign keys;
    for Postgres, give each session `work_mem_mb` (0: the server's own setting)."""
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
    if work_mem_mb > 0:
        connect_args = dict(kwargs.get("connect_args", {}))
        # Added to the URL's own options (e.g. a search_path, or the endpoint a hosted Postgres
        # routes by), which connect_args would otherwise replace.
        given = make_url(url).query.get("options")
        options = [given if isinstance(given, str) else None, connect_args.get("options")]
        options.append(f"-c work_mem={int(work_mem_mb)}MB")
        connect_args["options"] = " ".join(o for o in options if o)
        kwargs["connect_args"] = connect_args
    return create_engine(url, pool_pre_ping=True, **kwargs)


# The scheduler's pool: a provider's lock connection, its session and its heartbeat, for a few
# providers running at once. Separate from the web's, so neither can starve the other.
SCRAPE_POOL_SIZE = 4
SCRAPE_POOL_OVERFLOW = 4


def make_scrape_engine(url: str, *, work_mem_mb: int = DEFAULT_WORK_MEM_MB) -> Engine:
    """An engine (and connection pool) for scrapes only."""
    if url.startswith("sqlite") and ":memory:" in url:
        return make_engine(url)
    return make_engine(
        url,
        work_mem_mb=work_mem_mb,
        pool_size=SCRAPE_POOL_SIZE,
        max_overflow=SCRAPE_POOL_OVERFLOW,
    )


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
