"""Hostile provider feeds: nothing stored is lost or corrupted, the failure is recorded, other
providers keep working and the web app keeps serving the last good data."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

import scrapers.http
from app.core.settings import ProviderSettings, Settings
from app.pipeline.scrape_runner import ScrapeRunner
from scrapers.registry import get_scraper_class
from tests.feed_server import FeedServer
from tests.test_scrape_runner import CUDO, catalog, snapshot

VAST = get_scraper_class("vastai")
GOOD = json.loads((Path(__file__).parent / "fixtures/vastai/bundles.json").read_text())
PATH = "/api/v0/bundles/"
GOOD_OFFER = next(o for o in GOOD["offers"] if o["gpu_name"] == "H100 SXM")


def offers_with(**changes: object) -> str:
    return json.dumps(
        {"offers": [{**GOOD_OFFER, "id": i, "machine_id": i, **changes} for i in range(3)]}
    )


def million_offers() -> str:
    item = json.dumps(GOOD_OFFER)
    return '{"offers": [' + ",".join([item] * 1_000_000) + "]}"


HOSTILE: dict[str, tuple[Callable[[], str], str, str]] = {
    # name: (body, expected status, words in the recorded error)
    "offers not a list": (lambda: '{"offers": "many"}', "failed", "malformed feed"),
    "wrong types": (
        lambda: offers_with(num_gpus="eight", dph_total={"a": 1}),
        "failed",
        "no offers",
    ),
    "10 MB strings": (lambda: offers_with(gpu_name="H" * 10_000_000), "failed", "no offers"),
    "NaN prices": (lambda: offers_with(dph_total=float("nan")), "failed", "no offers"),
    "negative prices": (lambda: offers_with(dph_total=-3.5), "failed", "no offers"),
    "one good among bad": (
        lambda: json.dumps({"offers": [GOOD_OFFER, {"id": "x"}, None, 7]}),
        "partial",
        "fewer than 50%",
    ),
    "a million offers": (million_offers, "failed", "exceeds cap"),
    "deeply nested": (lambda: "[" * 100_000 + "]" * 100_000, "failed", "malformed feed"),
}


@pytest.fixture
def vast_runner(
    database_url: str,
    engine: Engine,
    session_factory: sessionmaker[Session],
    server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> ScrapeRunner:
    monkeypatch.setattr(scrapers.http, "RETRY_BASE_SECONDS", 0.01)
    settings = Settings(
        database_url=database_url,
        http_timeout_seconds=2,
        providers={
            "vastai": ProviderSettings(url=server.url + PATH),
            CUDO.name: ProviderSettings(url=server.url + "/cudo/vms.csv"),
        },
        _env_file=None,
    )
    return ScrapeRunner(settings, engine, session_factory)


@pytest.mark.parametrize("case", list(HOSTILE))
async def test_hostile_feed(
    case: str,
    vast_runner: ScrapeRunner,
    server: FeedServer,
    session_factory: sessionmaker[Session],
    client: TestClient,
) -> None:
    server.serve(
        PATH, json.dumps({"offers": [{**GOOD_OFFER, "id": i, "machine_id": i} for i in range(3)]})
    )
    assert (await vast_runner.run(VAST)).status == "ok"
    before = snapshot(session_factory)
    served_before = client.get("/api/offers").json()

    body, status, words = HOSTILE[case]
    server.serve(PATH, body())
    result = await vast_runner.run(VAST)
    assert result.status == status, result
    assert result.error and words in result.error

    assert snapshot(session_factory) == before
    assert client.get("/api/offers").json() == served_before
    vast = next(
        p for p in client.get("/api/providers").json()["providers"] if p["provider"] == "vastai"
    )
    assert vast["last_status"] == status and words in vast["last_error"]

    # Another provider scraped right after is unaffected.
    server.serve("/cudo/vms.csv", catalog(0.37), content_type="text/csv")
    assert (await vast_runner.run(CUDO)).status == "ok"
