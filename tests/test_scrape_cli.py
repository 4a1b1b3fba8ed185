"""Acceptance: `gpufit scrape vastai` against a local server playing the recorded fixtures."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

import scrapers.http
from app.cli import cli
from app.core.settings import get_settings
from app.store.models import Offer, PricePoint, ScrapeRun
from tests.feed_server import FeedServer

FIXTURE = Path(__file__).parent / "fixtures" / "vastai" / "bundles.json"
PATH = "/api/v0/bundles/"


@pytest.fixture
def scrape(
    database_url: str, server: FeedServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[CliRunner]:
    monkeypatch.setenv("GPUFIT_DATABASE_URL", database_url)
    monkeypatch.setenv("GPUFIT_PROVIDERS__VASTAI__URL", server.url + PATH)
    monkeypatch.setenv("GPUFIT_HTTP_TIMEOUT_SECONDS", "0.5")
    monkeypatch.setattr(scrapers.http, "RETRY_BASE_SECONDS", 0.01)
    get_settings.cache_clear()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield CliRunner()
    # The command sets up JSON logging on the runner's (now closed) stderr: undo it.
    root.handlers[:] = handlers
    root.setLevel(level)
    get_settings.cache_clear()


def offers(factory: sessionmaker[Session]) -> list[tuple[str, float | None, bool]]:
    with factory() as session:
        rows = session.execute(
            select(Offer.instance_type, Offer.price_per_hour, Offer.active).order_by(Offer.id)
        )
        return [(r[0], r[1], r[2]) for r in rows]


def test_scrape_vastai_end_to_end(
    scrape: CliRunner,
    server: FeedServer,
    session_factory: sessionmaker[Session],
    client: TestClient,
) -> None:
    payload = json.loads(FIXTURE.read_text())
    server.serve(PATH, json.dumps(payload))
    first = scrape.invoke(cli, ["scrape", "vastai"])
    assert first.exit_code == 0, first.output
    assert "vastai: ok:" in first.output
    loaded = offers(session_factory)
    assert loaded and all(active for *_, active in loaded)

    h100 = next(o for o in payload["offers"] if o["gpu_name"] == "H100 SXM")
    h100["dph_total"] = round(h100["dph_total"] - 1.0, 3)
    server.serve(PATH, json.dumps(payload))
    assert scrape.invoke(cli, ["scrape", "vastai"]).exit_code == 0
    with session_factory() as session:
        offer = session.scalars(select(Offer).where(Offer.gpu_raw_name == "H100 SXM")).one()
        points = list(
            session.scalars(
                select(PricePoint.price_per_hour)
                .where(PricePoint.offer_id == offer.id)
                .order_by(PricePoint.id)
            )
        )
    assert points == [pytest.approx(15.31), pytest.approx(h100["dph_total"])]
    good_state = offers(session_factory)

    body = json.dumps(payload)
    failures = {
        "HTTP 500": {"body": "upstream exploded", "status": 500},
        "timed out": {"body": body, "delay": 3.0},
        "malformed feed": {"body": body[: len(body) // 2]},
        "no offers": {"body": '{"offers": []}'},
    }
    for expected, response in failures.items():
        server.serve(PATH, **response)  # type: ignore[arg-type]
        result = scrape.invoke(cli, ["scrape", "vastai"])
        assert result.exit_code == 1, (expected, result.output)
        assert "vastai: failed:" in result.output and expected in result.output
        assert offers(session_factory) == good_state, expected
        with session_factory() as session:
            run = session.scalars(select(ScrapeRun).order_by(ScrapeRun.id.desc())).first()
        assert run is not None and run.status == "failed" and expected in (run.error or "")
        vast = next(
            p for p in client.get("/api/providers").json()["providers"] if p["provider"] == "vastai"
        )
        assert vast["last_status"] == "failed" and expected in vast["last_error"]
        assert vast["offer_count"] == len(good_state)
