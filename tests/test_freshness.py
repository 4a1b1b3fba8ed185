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


def test_provider_counts_add_up_to_the_table_on_the_sample(
    client: TestClient, sample_loaded: int
) -> None:
    providers = client.get("/api/providers").json()["providers"]
    total = client.get("/api/offers").json()["total"]
    assert total == sample_loaded
    assert sum(p["offer_count"] for p in providers) == total
    by_id = {p["provider"]: p for p in providers}
    assert len(by_id) == len(providers)  # one row per provider id
    # Each provider's count is what the table shows when filtered to it.
    for provider in ("do", "aws", "primeintellect"):
        filtered = client.get("/api/offers", params={"provider": provider}).json()["total"]
        assert by_id[provider]["offer_count"] == filtered == by_id[provider]["sample_offers"]
    assert by_id["do"]["display_name"] == "DigitalOcean"
    assert by_id["primeintellect"]["display_name"] == "Prime Intellect"
    assert by_id["cudo"]["source"] == "skypilot-cudo"
    # Nothing ran yet: never tried, not stale, and not "fresh".
    assert {p["state"] for p in providers} == {"never tried"}
    assert not any(p["stale"] for p in providers)
    html = client.get("/providers").text
    assert "DigitalOcean" in html and "(all sample)" in html and "never tried" in html
    assert ">fresh<" not in html


def test_provider_states(client: TestClient, session_factory: sessionmaker[Session]) -> None:
    now = datetime.now(UTC)
    hours = [now - timedelta(hours=h) for h in range(6)]
    with session_factory.begin() as session:
        session.add_all(
            [
                # ok, then two failures: failing since the first of them
                ScrapeRun(source="vastai", started_at=hours[5], finished_at=hours[5],
                          status="ok", offers_seen=3),
                ScrapeRun(source="vastai", started_at=hours[4], finished_at=hours[4],
                          status="failed", error="HTTP 503"),
                ScrapeRun(source="vastai", started_at=hours[3], finished_at=hours[3],
                          status="failed", error="HTTP 503"),
                # a secondary feed failed: offers kept, so it counts as a success
                ScrapeRun(source="aws", started_at=hours[1], finished_at=hours[1],
                          status="partial", offers_seen=40,
                          error="degraded: spot prices unavailable (HTTP 404)"),
                ScrapeRun(source="tensordock", started_at=hours[1], finished_at=hours[1],
                          status="skipped", error="skipped: no API key"),
                # rejected as a partial feed: nothing kept, so it is failing
                ScrapeRun(source="oci", started_at=hours[2], finished_at=hours[2],
                          status="partial", offers_seen=0,
                          error="rejected: 3 offers, fewer than 50% of the last good 40"),
            ]
        )  # fmt: skip
    listed = {p["provider"]: p for p in client.get("/api/providers").json()["providers"]}
    vast = listed["vastai"]
    assert vast["state"] == "failing"
    assert vast["failing_since"].startswith(hours[4].isoformat()[:16])
    assert listed["aws"]["state"] == "partial" and listed["aws"]["last_success"] is not None
    assert listed["aws"]["stale"] is False
    assert listed["tensordock"]["state"] == "skipped"
    assert listed["oci"]["state"] == "failing" and listed["oci"]["failing_since"]
    assert listed["gcp"]["state"] == "never tried"
    html = client.get("/providers").text
    assert "failing</span> since" in html and "skipped (no API key)" in html
