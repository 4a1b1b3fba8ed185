"""Vultr plans (real gpuhunt-recorded payloads): cloud GPU slices and bare-metal GPU boxes."""

from __future__ import annotations

import httpx
import pytest
import respx

from scrapers.base import FeedFormatError, RawPage, ScraperConfig
from scrapers.http import make_client
from scrapers.vultr import VultrScraper
from tests.scrapers.conftest import fixture_text

BASE = "https://api.vultr.test/v2"


def scraper() -> VultrScraper:
    return VultrScraper(ScraperConfig(base_url=BASE))


def fixture_pages() -> list[RawPage]:
    return [
        RawPage(
            url=f"{BASE}/plans?type=vcg", body=fixture_text("vultr", "real/plans_gpuhunt.json")
        ),
        RawPage(
            url=f"{BASE}/plans-metal", body=fixture_text("vultr", "real/plans_metal_gpuhunt.json")
        ),
    ]


def test_real_plans() -> None:
    result = scraper().parse(fixture_pages())
    assert result.warnings == []
    by_type = {r.instance_type: r for r in result.records}
    assert sorted(by_type) == [
        "vbm-112c-2048gb-8-h100-gpu", "vbm-256c-2048gb-8-mi300x-gpu",
        "vcg-a100-12c-120g-80vram", "vcg-a100-1c-6g-4vram", "vcg-a100-6c-60g-40vram",
    ]  # fmt: skip
    slice_ = by_type["vcg-a100-1c-6g-4vram"]  # 4 GB of an 80 GB A100
    assert (slice_.gpu_count, slice_.vram_gib_per_gpu, slice_.price_per_hour) == (0.05, 4, 0.123)
    full = by_type["vcg-a100-12c-120g-80vram"]
    assert (full.gpu_count, full.vram_gib_per_gpu, full.region) == (1, 80, "ewr")
    mi300x = by_type["vbm-256c-2048gb-8-mi300x-gpu"]
    assert (mi300x.gpu_model, mi300x.gpu_count, mi300x.region) == ("mi300x", 8, "ord")
    assert (mi300x.price_per_hour, mi300x.spot_price_per_hour) == (17.52, 14.72)
    h100 = by_type["vbm-112c-2048gb-8-h100-gpu"]
    assert h100.gpu_count == 8 and h100.gpu_raw_name == "H100" and h100.vcpus == 224


def test_malformed() -> None:
    with pytest.raises(FeedFormatError):
        scraper().parse([RawPage(url=BASE, body=fixture_text("vultr", "malformed.json"))])


@respx.mock
async def test_fetch_follows_the_cursor_without_a_key() -> None:
    seen: list[dict[str, str]] = []

    def plans(request: httpx.Request) -> httpx.Response:
        seen.append(dict(request.url.params))
        assert "Authorization" not in request.headers
        cursor = "" if "cursor" in request.url.params else "c2"
        return httpx.Response(200, json={"plans": [], "meta": {"links": {"next": cursor}}})

    respx.get(f"{BASE}/plans").mock(side_effect=plans)
    metal = respx.get(f"{BASE}/plans-metal").mock(
        return_value=httpx.Response(200, json={"plans_metal": []})
    )
    async with make_client(timeout=5) as client:
        pages = await scraper().fetch(client)
    assert seen == [
        {"type": "vcg", "per_page": "500"},
        {"type": "vcg", "per_page": "500", "cursor": "c2"},
    ]
    assert metal.called and len(pages) == 3
