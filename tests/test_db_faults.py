"""The database going away mid-scrape loses nothing: the transaction rolls back whole."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

import app.pipeline.ingest as ingest_module
import app.pipeline.scrape_runner as runner_module
from app.pipeline.ingest import ingest_records
from app.pipeline.scrape_runner import ScrapeRunner
from tests.feed_server import FeedServer
from tests.test_scrape_runner import CUDO, catalog, runs, snapshot


async def test_connection_killed_mid_ingest(
    runner: ScrapeRunner,
    server: FeedServer,
    session_factory: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server.serve("/cudo/vms.csv", catalog(0.37), content_type="text/csv")
    assert (await runner.run(CUDO)).status == "ok"
    before = snapshot(session_factory)

    def ingest_then_lose_the_database(session: Session, **kwargs: Any) -> Any:
        stats = ingest_records(session, **kwargs)  # the writes are done, not yet committed
        if session.bind is not None and session.get_bind().dialect.name == "postgresql":
            # The server kills our own backend, as a failover or an admin would.
            session.execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))
        del stats
        raise OperationalError("COMMIT", {}, Exception("server closed the connection"))

    monkeypatch.setattr(runner_module, "ingest_records", ingest_then_lose_the_database)
    server.serve("/cudo/vms.csv", catalog(0.99), content_type="text/csv")
    result = await runner.run(CUDO)

    assert result.status == "failed"
    assert result.error and "OperationalError" in result.error
    # The public text names the kind of fault, never the statement or its parameters.
    assert "COMMIT" not in result.error and "server closed" not in result.error
    assert snapshot(session_factory) == before
    assert runs(session_factory)[-1][0] == "failed"

    monkeypatch.undo()
    assert (await runner.run(CUDO)).status == "ok"  # and the next scrape recovers


def _fail(step: str) -> Any:
    def failing(*args: Any, **kwargs: Any) -> None:
        raise OSError(f"could not write: disk full during {step}")

    return failing


# Ingest writes in this order (new offers, updates, history, data version); a failure at any
# step must leave every earlier step unsaved.
WRITE_STEPS = ("_update_offers", "_insert_history", "bump_data_version")


@pytest.mark.parametrize("step", WRITE_STEPS)
async def test_write_failing_midway_keeps_nothing(
    step: str,
    runner: ScrapeRunner,
    server: FeedServer,
    session_factory: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.serve("/cudo/vms.csv", catalog(0.37, rows=3), content_type="text/csv")
    assert (await runner.run(CUDO)).status == "ok"
    before = snapshot(session_factory)

    # The next scrape adds an offer, reprices the others and drops none: every kind of write.
    monkeypatch.setattr(ingest_module, step, _fail(step))
    server.serve("/cudo/vms.csv", catalog(0.99, rows=4), content_type="text/csv")
    result = await runner.run(CUDO)

    assert result.status == "failed"
    # The stored (public) error is generic; the details are in the log only.
    assert result.error and "OSError" in result.error and "disk full" not in result.error
    assert any("disk full" in (r.exc_text or "") for r in caplog.records)
    assert snapshot(session_factory) == before
    monkeypatch.undo()
    assert (await runner.run(CUDO)).status == "ok"
    assert snapshot(session_factory) != before
