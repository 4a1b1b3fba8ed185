"""Akash gpu-prices (recorded responses): one single-GPU record per model, live free counts."""

from __future__ import annotations

import httpx
import pytest
import respx

from scrapers.akash import AkashScraper
from scrapers.base import FeedFormatError, RawPage, ScraperConfig
from scrapers.http import make_client
from tests.scrapers.conftest import fixture_text

BASE = "https://console-api.akash.test/v1/gpu-prices"


def scraper() -> AkashScraper:
    return AkashScraper(ScraperConfig(base_url=BASE))


def fixture_pages() -> list[RawPage]:
    return [RawPage(url=BASE, body=fixture_text("akash", "real/gpu_prices_live_probe.json"))]


def test_real_live_probe() -> None:
    (a100,) = scraper().parse(fixture_pages()).records
    assert (a100.gpu_model, a100.gpu_count, a100.vram_gib_per_gpu) == ("a100-80gb-sxm", 1, 80)
    assert a100.price_per_hour == 1.48  # the median bid
    assert (a100.availability, a100.availability_count, a100.region) == ("in_stock", 6, "any")


def test_real_h100_payload() -> None:
    pages = [RawPage(url=BASE, body=fixture_text("akash", "real/gpu_prices_h100_test.json"))]
    (h100,) = scraper().parse(pages).records
    assert (h100.gpu_model, h100.price_per_hour, h100.availability_count) == ("h100-sxm", 2.58, 29)


def test_no_free_gpus_is_out_and_unpriced_models_are_skipped() -> None:
    body = (
        '{"models": [{"vendor": "nvidia", "model": "t4", "ram": "16Gi", "interface": "PCIe",'
        ' "availability": {"total": 2, "available": 0}, "price": {"currency": "USD", "min": 0.2}},'
        ' {"vendor": "nvidia", "model": "p100", "ram": "16Gi", "price": null}]}'
    )
    (t4,) = scraper().parse([RawPage(url=BASE, body=body)]).records
    assert (t4.gpu_model, t4.availability, t4.price_per_hour) == ("t4", "out", 0.2)


def test_malformed() -> None:
    with pytest.raises(FeedFormatError):
        scraper().parse([RawPage(url=BASE, body=fixture_text("akash", "malformed.json"))])


@respx.mock
async def test_fetch_is_one_keyless_get() -> None:
    route = respx.get(BASE).mock(
        return_value=httpx.Response(
            200, text=fixture_text("akash", "real/gpu_prices_live_probe.json")
        )
    )
    async with make_client(timeout=5) as client:
        pages = await scraper().fetch(client)
    assert route.call_count == 1 and "Authorization" not in route.calls.last.request.headers
    assert len(scraper().parse(pages).records) == 1
