"""RunPod GraphQL: secure/community instance types, per-GPU scaling, stockStatus levels."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from app.records import OfferRecord
from scrapers.base import FeedFormatError, RawPage, ScraperConfig
from scrapers.http import make_client
from scrapers.runpod import QUERY, RunpodScraper
from tests.scrapers.conftest import fixture_text

BASE = "https://runpod.test/graphql"
H100 = "NVIDIA H100 80GB HBM3"


def scraper(key: str = "rp-key") -> RunpodScraper:
    return RunpodScraper(ScraperConfig(base_url=BASE, api_key=key))


def fixture_pages() -> list[RawPage]:
    return [RawPage(url=BASE, body=fixture_text("runpod", "gpu_types.json"))]


def rec(gpu: str, model: str, vram: float, cloud: str, n: int, price: float,
        spot: float | None, availability: str, free: int) -> OfferRecord:  # fmt: skip
    return OfferRecord(
        provider="runpod", instance_type=f"{n}x {gpu} ({cloud})", region="any",
        gpu_model=model, gpu_raw_name=gpu, gpu_count=n, vram_gib_per_gpu=vram,
        price_per_hour=price, spot_price_per_hour=spot, availability=availability,
        availability_count=free,
    )  # fmt: skip


def test_parse_fixture_into_exact_records() -> None:
    result = scraper().parse(fixture_pages())
    a4000 = "NVIDIA RTX A4000"
    assert result.records == [
        rec(H100, "h100-sxm", 80, "secure", 1, 2.99, 1.75, "in_stock", 8),
        rec(H100, "h100-sxm", 80, "secure", 2, 5.98, 3.5, "in_stock", 8),
        rec(H100, "h100-sxm", 80, "secure", 4, 11.96, 7.0, "in_stock", 8),
        rec(H100, "h100-sxm", 80, "secure", 8, 23.92, 14.0, "in_stock", 8),
        rec(H100, "h100-sxm", 80, "community", 1, 2.69, None, "limited", 2),
        rec(H100, "h100-sxm", 80, "community", 2, 5.38, None, "limited", 2),
        rec(H100, "h100-sxm", 80, "community", 4, 10.76, None, "out", 2),
        rec(H100, "h100-sxm", 80, "community", 8, 21.52, None, "out", 2),
        rec(a4000, "rtx-a4000", 16, "secure", 1, 0.35, 0.18, "out", 0),
        rec(a4000, "rtx-a4000", 16, "secure", 2, 0.7, 0.36, "out", 0),
    ]
    assert all(r.price_per_gpu_hour == pytest.approx(2.99) for r in result.records[:4])
    assert len(result.warnings) == 1  # the entry without an id


def test_malformed() -> None:
    with pytest.raises(FeedFormatError, match="GraphQL errors"):
        scraper().parse([RawPage(url=BASE, body=fixture_text("runpod", "malformed.json"))])
    with pytest.raises(FeedFormatError):
        scraper().parse([RawPage(url=BASE, body='{"data": {"gpuTypes": {}}}')])


@respx.mock
async def test_fetch_without_a_key_sends_no_authorization() -> None:
    route = respx.post(BASE).mock(
        return_value=httpx.Response(200, text=fixture_text("runpod", "gpu_types.json"))
    )
    async with make_client(timeout=5) as client:
        await scraper(key="").fetch(client)
    assert "Authorization" not in route.calls.last.request.headers


@respx.mock
async def test_fetch_posts_graphql_with_bearer() -> None:
    route = respx.post(BASE).mock(
        return_value=httpx.Response(200, text=fixture_text("runpod", "gpu_types.json"))
    )
    async with make_client(timeout=5) as client:
        pages = await scraper().fetch(client)
    request = route.calls.last.request
    assert request.headers["Authorization"] == "Bearer rp-key"
    assert "api_key" not in str(request.url)
    assert json.loads(request.content) == {"query": QUERY}
    assert len(scraper().parse(pages).records) == 10


# --- real recorded feed (tests/fixtures/runpod/real/SOURCE.md) -----------------------------


def test_real_keyless_capture() -> None:
    pages = [RawPage(url=BASE, body=fixture_text("runpod", "real/gpu_types_oniq_2026-08-25.json"))]
    result = scraper(key="").parse(pages)
    assert result.warnings == []
    assert len(result.records) == 16
    by_type = {r.instance_type: r for r in result.records}
    community_4090 = by_type["1x NVIDIA GeForce RTX 4090 (community)"]
    # the shared lowestPrice (0.34) is the community price: in stock there, at that price
    assert community_4090.gpu_model == "rtx-4090"
    assert (community_4090.price_per_hour, community_4090.availability) == (0.34, "in_stock")
    secure_4090 = by_type["1x NVIDIA GeForce RTX 4090 (secure)"]
    assert (secure_4090.price_per_hour, secure_4090.availability) == (0.74, "unknown")
    # lowestPrice null: no capacity on either cloud
    a5000 = by_type["1x NVIDIA RTX A5000 (community)"]
    assert (a5000.gpu_model, a5000.availability, a5000.price_per_hour) == ("rtx-a5000", "out", 0.16)
    assert by_type["1x NVIDIA RTX A5000 (secure)"].availability == "out"
    assert by_type["1x NVIDIA L4 (secure)"].gpu_model == "l4"
    assert "1x NVIDIA L4 (community)" not in by_type  # communityCloud false
    # no maxGpuCount in the capture: only single-GPU listings
    assert {r.gpu_count for r in result.records} == {1}
