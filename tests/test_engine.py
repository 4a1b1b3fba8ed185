"""The app's engines: Postgres sessions get the configured work_mem (the aggregates over every
active offer hash in memory with it; at 4 MB they sorted on disk, 2.5x slower at 100k)."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from app.core.settings import DEFAULT_WORK_MEM_MB, Settings
from app.main import create_app
from app.store.db import make_engine, make_scrape_engine
from tests.conftest import PG_URL

pytestmark = pytest.mark.skipif(not PG_URL, reason="Postgres-only: set GPUFIT_TEST_DATABASE_URL")


def _work_mem(engine: Engine) -> str:
    with engine.connect() as conn:
        return str(conn.scalar(text("SHOW work_mem")))


def test_every_engine_of_the_app_sets_work_mem() -> None:
    app = create_app(Settings(database_url=PG_URL, pg_work_mem_mb=48, _env_file=None))
    engines = [app.state.session_factory.kw["bind"], make_scrape_engine(PG_URL)]
    try:
        assert _work_mem(engines[0]) == "48MB"
        assert _work_mem(engines[1]) == f"{DEFAULT_WORK_MEM_MB}MB"
    finally:
        for engine in engines:
            engine.dispose()


def test_zero_keeps_the_servers_work_mem() -> None:
    plain = make_engine(PG_URL, work_mem_mb=0)
    ours = make_engine(PG_URL)
    try:
        with psycopg.connect(
            make_url(PG_URL).set(drivername="postgresql").render_as_string(hide_password=False)
        ) as conn:
            server = conn.execute("SHOW work_mem").fetchone()
        assert server is not None
        assert _work_mem(plain) == server[0]
        assert _work_mem(ours) == f"{DEFAULT_WORK_MEM_MB}MB"
    finally:
        plain.dispose()
        ours.dispose()


def test_the_urls_own_options_are_kept() -> None:
    url = make_url(PG_URL).update_query_dict({"options": "-c statement_timeout=5000"})
    engine = make_engine(url.render_as_string(hide_password=False))
    try:
        with engine.connect() as conn:
            assert conn.scalar(text("SHOW statement_timeout")) == "5s"
        assert _work_mem(engine) == f"{DEFAULT_WORK_MEM_MB}MB"
    finally:
        engine.dispose()
