"""Staleness: older than twice the interval, or failing without ever having succeeded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.pipeline.freshness import is_stale
from app.store.models import ScrapeRun

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("age_minutes", "status", "stale"),
    [
        (None, None, False),  # never tried
        (None, "skipped", False),  # no API key
        (None, "failed", True),
        (None, "partial", True),
        (59, "failed", False),  # one failure after a recent success
        (61, "ok", True),  # interval 30 min: older than 2x
        (30, "ok", False),
    ],
)
def test_is_stale(age_minutes: int | None, status: str | None, stale: bool) -> None:
    last = None if age_minutes is None else NOW - timedelta(minutes=age_minutes)
    assert is_stale(last, status, 30, NOW) is stale


def test_api_providers_reports_stale_and_errors(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    old = datetime.now(UTC) - timedelta(days=2)
    with session_factory.begin() as session:
        session.add_all(
            [
                ScrapeRun(
                    source="vastai", started_at=old, finished_at=old, status="ok", offers_seen=10
                ),
                ScrapeRun(
                    source="vastai",
                    started_at=old + timedelta(hours=1),
                    finished_at=old + timedelta(hours=1),
                    status="failed",
                    error="HTTP 503 from https://console.vast.ai/api/v0/bundles/",
                ),
                ScrapeRun(
                    source="runpod",
                    started_at=old,
                    finished_at=old,
                    status="skipped",
                    error="skipped: no API key",
                ),
            ]
        )
    listed = {p["provider"]: p for p in client.get("/api/providers").json()["providers"]}
    assert listed["vastai"]["stale"] is True
    assert listed["vastai"]["last_status"] == "failed"
    assert "HTTP 503" in listed["vastai"]["last_error"]
    assert listed["vastai"]["last_success"].startswith(old.date().isoformat())
    assert listed["runpod"] == {**listed["runpod"], "stale": False, "last_status": "skipped"}
    assert listed["azure"]["last_status"] is None and listed["azure"]["stale"] is False
