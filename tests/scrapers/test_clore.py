"""Clore.ai marketplace (recorded payload): one offer per priced server, rented ones OUT."""

from __future__ import annotations

import httpx
import pytest
import respx

from scrapers.base import FeedFormatError, RawPage, ScraperConfig
from scrapers.clore import CloreScraper
from scrapers.http import make_client
from tests.scrapers.conftest import fixture_text

BASE = "https://api.clore.test/v1/marketplace"


def scraper() -> CloreScraper:
    return CloreScraper(ScraperConfig(base_url=BASE))


def fixture_pages() -> list[RawPage]:
    return [RawPage(url=BASE, body=fixture_text("clore", "real/marketplace_test.json"))]


def test_real_marketplace() -> None:
    result = scraper().parse(fixture_pages())
    by_type = {r.instance_type: r for r in result.records}
    free, rented = by_type["clore-113361"], by_type["clore-113362"]
    assert (free.gpu_model, free.gpu_count, free.price_per_hour) == (
        "h100-sxm",
        8,
        20.0,
    )  # HBM3 is the SXM part
    assert (free.region, free.availability, free.availability_count) == ("CA", "in_stock", 8)
    assert (rented.availability, rented.availability_count, rented.region) == ("out", 0, "unknown")
    assert rented.gpu_raw_name == "H100 80GB HBM3"  # the feed's leading space trimmed


def test_malformed() -> None:
    with pytest.raises(FeedFormatError):
        scraper().parse([RawPage(url=BASE, body=fixture_text("clore", "malformed.json"))])


@respx.mock
async def test_fetch_is_one_keyless_get() -> None:
    route = respx.get(BASE).mock(
        return_value=httpx.Response(200, text=fixture_text("clore", "real/marketplace_test.json"))
    )
    async with make_client(timeout=5) as client:
        await scraper().fetch(client)
    assert route.call_count == 1 and "Authorization" not in route.calls.last.request.headers
