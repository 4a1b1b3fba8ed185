"""OCI: shapes joined with the paginated price list; per-GPU price x gpuQty; preemptible 50%."""

from __future__ import annotations

import httpx
import pytest
import respx

from app.records import OfferRecord
from scrapers.base import FeedFormatError, RawPage, ScraperConfig
from scrapers.http import make_client
from scrapers.oci import OciScraper
from tests.scrapers.conftest import fixture_text

PRODUCTS = "https://apexapps.oracle.com/pls/apex/cetools/api/v1/products/?currencyCode=USD"
SHAPES = "https://oci.test/shapes.json"


def scraper() -> OciScraper:
    return OciScraper(ScraperConfig(base_url=PRODUCTS, extra_urls={"shapes": SHAPES}))


def fixture_pages() -> list[RawPage]:
    return [
        RawPage(url=SHAPES, body=fixture_text("oci", "shapes.json")),
        RawPage(url=PRODUCTS, body=fixture_text("oci", "products_page1.json")),
        RawPage(url=PRODUCTS + "&offset=2", body=fixture_text("oci", "products_page2.json")),
    ]


def test_parse_fixture_into_exact_records() -> None:
    result = scraper().parse(fixture_pages())
    assert result.records == [
        OfferRecord(
            provider="oci", instance_type="BM.GPU.H100.8", region="global",
            gpu_model="h100-sxm", gpu_raw_name="H100", gpu_count=8, vram_gib_per_gpu=80,
            vcpus=224, ram_gib=2048, price_per_hour=80.0,
        ),
        OfferRecord(
            provider="oci", instance_type="VM.GPU.A10.1", region="global", gpu_model="a10",
            gpu_raw_name="A10", gpu_count=1, vram_gib_per_gpu=24, vcpus=30, ram_gib=240,
            price_per_hour=2.0, spot_price_per_hour=1.0,
        ),
        OfferRecord(
            provider="oci", instance_type="BM.GPU4.8", region="global",
            gpu_model="a100-40gb-sxm", gpu_raw_name="A100 40 GB", gpu_count=8,
            vram_gib_per_gpu=40, vcpus=128, ram_gib=2048, price_per_hour=24.4,
        ),
    ]  # fmt: skip
    assert result.records[0].price_per_gpu_hour == 10.0
    assert result.warnings == ["skipped BM.GPU.L40S-NC.4: no single priced product or no GPU count"]


def test_malformed() -> None:
    with pytest.raises(FeedFormatError):
        scraper().parse([RawPage(url=PRODUCTS, body=fixture_text("oci", "malformed.json"))])
    with pytest.raises(FeedFormatError, match="both"):
        scraper().parse(fixture_pages()[:1])


@respx.mock
async def test_fetch_shapes_and_follows_price_pages() -> None:
    shapes = respx.get(SHAPES).mock(
        return_value=httpx.Response(200, text=fixture_text("oci", "shapes.json"))
    )
    page2 = respx.get(PRODUCTS + "&offset=2").mock(
        return_value=httpx.Response(200, text=fixture_text("oci", "products_page2.json"))
    )
    page1 = respx.get(PRODUCTS).mock(
        return_value=httpx.Response(200, text=fixture_text("oci", "products_page1.json"))
    )
    async with make_client(timeout=5) as client:
        pages = await scraper().fetch(client)
    assert shapes.call_count == page1.call_count == page2.call_count == 1
    assert len(pages) == 3
    assert len(scraper().parse(pages).records) == 3
