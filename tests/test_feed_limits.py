"""Feeds can't hurt: compression bombs stop at the size cap, a dripping feed hits the request and
run deadlines, and one poisoned offer is skipped with a warning while the good ones are stored."""

from __future__ import annotations

import gzip
import json
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

import scrapers.http
from app.core.settings import ProviderSettings, Settings
from app.pipeline.scrape_runner import ScrapeRunner
from app.pipeline.screening import screen_prices
from app.records import OfferRecord
from app.store.models import Offer, ScrapeRun
from scrapers.http import FeedModel, FetchError, ResponseTooLarge, get_text, make_client
from scrapers.registry import get_scraper_class
from tests.feed_server import FeedServer

VAST = get_scraper_class("vastai")
PATH = "/api/v0/bundles/"
GOOD_OFFER = next(
    o
    for o in json.loads((Path(__file__).parent / "fixtures/vastai/bundles.json").read_text())[
        "offers"
    ]
    if o["gpu_name"] == "H100 SXM"
)
BOMB_BYTES = 256 * 1024 * 1024


def offer(i: int, **changes: object) -> dict[str, object]:
    return {**GOOD_OFFER, "id": i, "machine_id": i, **changes}


def _gzip_stream(size: int) -> bytes:
    """gzip of `size` zero bytes, compressed in 1 MiB steps (never all in memory)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1024 * 1024)
    parts = [packer.compress(block) for _ in range(size // len(block))]
    return b"".join([*parts, packer.flush()])


@pytest.fixture(scope="module")
def double_bomb() -> bytes:
    """A few kB that inflate to 256 MiB through two gzip layers (Content-Encoding: gzip, gzip)."""
    return gzip.compress(_gzip_stream(BOMB_BYTES), 9)


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
        providers={"vastai": ProviderSettings(url=server.url + PATH)},
        _env_file=None,
    )
    return ScrapeRunner(settings, engine, session_factory)


# --- size caps ---------------------------------------------------------------------------


async def test_doubly_compressed_bomb_stops_at_the_cap(
    server: FeedServer, double_bomb: bytes
) -> None:
    assert len(double_bomb) < 64 * 1024
    url = server.serve("/bomb", double_bomb, headers={"Content-Encoding": "gzip, gzip"})
    tracemalloc.start()
    try:
        async with make_client(timeout=5) as client:
            with pytest.raises(ResponseTooLarge, match="exceeds cap of 1048576 bytes"):
                await get_text(client, url, max_bytes=1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB while refusing a bomb"


async def test_compressed_bodies_within_the_cap_decode(server: FeedServer) -> None:
    text = json.dumps({"offers": [offer(1)]})
    url = server.serve("/gz", gzip.compress(gzip.compress(text.encode())),
                       headers={"Content-Encoding": "gzip, gzip"})  # fmt: skip
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    url_raw = server.serve("/raw", raw.compress(text.encode()) + raw.flush(),
                           headers={"Content-Encoding": "deflate"})  # fmt: skip
    url_zlib = server.serve(
        "/zlib", zlib.compress(text.encode()), headers={"Content-Encoding": "deflate"}
    )
    async with make_client(timeout=5) as client:
        for each in (url, url_raw, url_zlib):
            assert await get_text(client, each) == text


async def test_unsupported_and_corrupt_encodings_fail_cleanly(server: FeedServer) -> None:
    brotli = server.serve("/br", b"\x1b\x00", headers={"Content-Encoding": "br"})
    corrupt = server.serve("/bad", b"not gzip at all", headers={"Content-Encoding": "gzip"})
    async with make_client(timeout=5) as client:
        with pytest.raises(FetchError, match="unsupported Content-Encoding"):
            await get_text(client, brotli)
        with pytest.raises(FetchError, match="corrupt gzip"):
            await get_text(client, corrupt)


async def test_bomb_feed_fails_the_run_and_keeps_the_data(
    vast_runner: ScrapeRunner,
    server: FeedServer,
    session_factory: sessionmaker[Session],
    double_bomb: bytes,
) -> None:
    server.serve(PATH, json.dumps({"offers": [offer(i) for i in range(3)]}))
    assert (await vast_runner.run(VAST)).status == "ok"
    server.serve(PATH, double_bomb, headers={"Content-Encoding": "gzip, gzip"})
    result = await vast_runner.run(VAST)
    assert result.status == "failed"
    assert result.error and "exceeds cap" in result.error and "decompressed" in result.error
    with session_factory() as session:
        assert len(session.scalars(select(Offer).where(Offer.active)).all()) == 3


# --- deadlines ---------------------------------------------------------------------------


async def test_slow_drip_hits_the_request_deadline(server: FeedServer) -> None:
    # A byte every 50 ms never trips the 1 s read timeout; only the total deadline stops it.
    url = server.serve("/drip", b'{"offers": []}', drip=0.05, endless=True)
    start = time.monotonic()
    async with make_client(timeout=1, deadline=1.5) as client:
        with pytest.raises(FetchError, match=r"within the 1\.5 s deadline"):
            await get_text(client, url)
    assert time.monotonic() - start < 4


async def test_slow_drip_hits_the_run_deadline(
    database_url: str,
    engine: Engine,
    session_factory: sessionmaker[Session],
    server: FeedServer,
) -> None:
    settings = Settings(
        database_url=database_url,
        http_timeout_seconds=1,
        http_request_deadline_seconds=60,
        scrape_run_deadline_seconds=1.5,
        providers={"vastai": ProviderSettings(url=server.url + PATH)},
        _env_file=None,
    )
    runner = ScrapeRunner(settings, engine, session_factory)
    server.serve(PATH, b'{"offers": [', drip=0.05, endless=True)
    start = time.monotonic()
    result = await runner.run(VAST)
    assert time.monotonic() - start < 5
    assert result.status == "failed"
    assert result.error and "run deadline of 1.5 s" in result.error
    with session_factory() as session:
        run = session.scalars(select(ScrapeRun)).one()
    assert (run.status, run.error) == ("failed", result.error)
    assert run.finished_at is not None


# --- poison offers -----------------------------------------------------------------------

POISON = {
    "NUL in a name": {"gpu_name": "H100 SXM\x00"},
    "lone surrogate": {"geolocation": "Texas\ud800"},
    "escape character": {"gpu_name": "H100\x1b[31m"},
    "price true": {"dph_total": True},
    "GPU count true": {"num_gpus": True},
    "price a word": {"dph_total": "cheap"},
    "price 1e-300": {"dph_total": 1e-300},
    "price 5e-324": {"dph_total": 5e-324},
    "price above the ceiling": {"dph_total": 9000.0},
}


async def test_poison_offers_are_skipped_and_the_good_ones_stored(
    vast_runner: ScrapeRunner,
    server: FeedServer,
    session_factory: sessionmaker[Session],
    client: TestClient,
) -> None:
    good = [offer(i) for i in range(3)]
    bad = [offer(100 + n, **change) for n, change in enumerate(POISON.values())]
    # ensure_ascii (the default) writes NUL and the surrogate as \u escapes, as a feed would.
    server.serve(PATH, json.dumps({"offers": [bad[0], *good[:2], *bad[1:], good[2]]}))

    result = await vast_runner.run(VAST)

    assert result.status == "ok", result
    assert (result.seen, result.added) == (3, 3)
    with session_factory() as session:
        stored = session.scalars(select(Offer.instance_type)).all()
        warnings = session.scalars(select(ScrapeRun.warnings)).one() or ""
    assert sorted(stored) == sorted(f"vast-{i}-8xH100_SXM" for i in range(3))
    assert warnings.count("skipped") == len(POISON), warnings
    assert "below the floor" in warnings and "above the ceiling" in warnings
    assert "\x00" not in warnings and "\ud800" not in warnings
    listed = client.get("/api/offers").json()
    assert listed["total"] == 3
    assert all(o["price_per_hour"] == GOOD_OFFER["dph_total"] for o in listed["offers"])


def test_price_floor_and_ceiling_are_per_gpu_hour() -> None:
    def record(price: float, gpus: float) -> OfferRecord:
        return OfferRecord(
            provider="p", instance_type=f"t{price}-{gpus}", region="r", gpu_model="h100-sxm",
            gpu_raw_name="H100", gpu_count=gpus, price_per_hour=price,
        )  # fmt: skip

    ok = [record(0.004, 4), record(1600, 8), record(0.5, 0.25)]
    cheap, dear = record(0.003, 4), record(201, 1)
    kept, warnings = screen_prices([*ok, cheap, dear], floor=0.001, ceiling=200)
    assert kept == ok
    assert len(warnings) == 2 and "t0.003-4" in warnings[0] and "t201-1" in warnings[1]


def test_feed_models_refuse_booleans_as_numbers() -> None:
    class Item(FeedModel):
        price: float
        count: int | None = None
        label: str = ""
        flag: bool = False

    assert Item.model_validate({"price": "1.5", "count": 2, "flag": True}).price == 1.5
    for bad in ({"price": True}, {"price": 1.0, "count": False}):
        with pytest.raises(ValidationError, match="a boolean is not a number"):
            Item.model_validate(bad)
