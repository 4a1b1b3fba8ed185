"""Vast.ai bundles: per-offer availability, min_bid spot price, NVLink from bw_nvlink."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from app.records import OfferRecord
from scrapers.base import FeedFormatError, RawPage, ScraperConfig
from scrapers.http import make_client
from scrapers.vastai import VastaiScraper
from tests.scrapers.conftest import fixture_text

BASE = "https://vast.test/api/v0/bundles/"


def scraper(key: str = "") -> VastaiScraper:
    return VastaiScraper(ScraperConfig(base_url=BASE, api_key=key))


def fixture_pages() -> list[RawPage]:
    return [RawPage(url=BASE, body=fixture_text("vastai", "bundles.json"))]


def rec(**kw: object) -> OfferRecord:
    return OfferRecord.model_validate({"provider": "vastai", **kw})


def test_parse_fixture_into_exact_records() -> None:
    result = scraper().parse(fixture_pages())
    assert result.records == [
        rec(instance_type="vast-4321-8xH100_SXM", region="Texas, US", gpu_model="h100-sxm",
            gpu_raw_name="H100 SXM", gpu_count=8, vram_gib_per_gpu=79.6, vcpus=128,
            ram_gib=1007.3, disk_gib=1500, price_per_hour=15.31, spot_price_per_hour=10.4,
            interconnect="nvlink", network="ethernet", network_gbps=5.0,
            availability="in_stock", availability_count=8),
        rec(instance_type="vast-7777-2xRTX_4090", region="Quebec, CA", gpu_model="rtx-4090",
            gpu_raw_name="RTX 4090", gpu_count=2, vram_gib_per_gpu=24.0, vcpus=8, ram_gib=31.4,
            disk_gib=250, price_per_hour=0.655, spot_price_per_hour=0.4, interconnect="pcie",
            network="ethernet", network_gbps=0.6, availability="out", availability_count=0),
        rec(instance_type="vast-8888-1xRTX_6000Ada", region="unknown",
            gpu_model="rtx-6000-ada", gpu_raw_name="RTX 6000Ada", gpu_count=1,
            vram_gib_per_gpu=48.0, vcpus=24, ram_gib=62.8, disk_gib=100, price_per_hour=0.81,
            availability="in_stock", availability_count=1),
    ]  # fmt: skip
    assert result.records[0].price_per_gpu_hour == pytest.approx(15.31 / 8)
    assert len(result.warnings) == 2  # negative price and a non-numeric id


def test_malformed() -> None:
    with pytest.raises(FeedFormatError):
        scraper().parse([RawPage(url=BASE, body=fixture_text("vastai", "malformed.json"))])


@respx.mock
async def test_fetch_posts_query_with_optional_key() -> None:
    route = respx.post(BASE).mock(
        return_value=httpx.Response(200, text=fixture_text("vastai", "bundles.json"))
    )
    async with make_client(timeout=5) as client:
        await scraper().fetch(client)
        assert "Authorization" not in route.calls.last.request.headers
        pages = await scraper("k1").fetch(client)
    request = route.calls.last.request
    assert request.headers["Authorization"] == "Bearer k1"
    body = json.loads(request.content)
    assert body["rentable"] == {"eq": True} and body["limit"] == 3000
    assert len(scraper().parse(pages).records) == 3


# --- real recorded offers (tests/fixtures/vastai/real/SOURCE.md) ---------------------------


def test_real_cli_raw_list() -> None:
    pages = [RawPage(url=BASE, body=fixture_text("vastai", "real/search_offers_raw_cli.json"))]
    (record,) = scraper().parse(pages).records
    assert record.instance_type == "vast-22990-1xRTX_4090"
    assert (record.gpu_model, record.gpu_count, record.region) == ("rtx-4090", 1, "Guangxi, CN")
    assert record.price_per_hour == pytest.approx(0.2466759)
    assert record.spot_price_per_hour == pytest.approx(0.2)
    assert (record.availability, record.availability_count) == ("in_stock", 1)
    # 64393 MB host RAM x 24/96 effective cores
    assert record.ram_gib == pytest.approx(15.7, abs=0.05)


def test_real_offers_without_dph_total() -> None:
    pages = [RawPage(url=BASE, body=fixture_text("vastai", "real/offers_without_dph_total.json"))]
    result = scraper().parse(pages)
    assert result.warnings == []
    by_machine = {r.instance_type: r for r in result.records}
    ontario = by_machine["vast-37228-1xRTX_5090"]
    assert ontario.gpu_model == "rtx-5090"
    assert ontario.price_per_hour == pytest.approx(0.1157037)  # search.totalHour
    assert ontario.availability == "out"  # rentable: false
    assert by_machine["vast-37231-1xRTX_5090"].price_per_hour == pytest.approx(0.1266667)
