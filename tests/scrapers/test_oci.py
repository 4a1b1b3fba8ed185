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
            gpu_model="h100-sxm", gpu_raw_name="H100 SXM5 80GB", gpu_count=8, vram_gib_per_gpu=80,
            vcpus=224, ram_gib=2048, price_per_hour=80.0,
        ),
        OfferRecord(
            provider="oci", instance_type="VM.GPU.A10.1", region="global", gpu_model="a10",
            gpu_raw_name="A10", gpu_count=1, vram_gib_per_gpu=24, vcpus=30, ram_gib=240,
            price_per_hour=2.0, spot_price_per_hour=1.0,
        ),
        OfferRecord(
            provider="oci", instance_type="BM.GPU4.8", region="global",
            gpu_model="a100-40gb-sxm", gpu_raw_name="A100 40GB SXM4", gpu_count=8,
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


# --- real recorded shapes and the real files' GPU quirks -------------------------------------


def test_real_shapes_excerpt_is_tolerated() -> None:
    pages = [
        RawPage(url=SHAPES, body=fixture_text("oci", "real/shapes_gpuhunt_excerpt.json")),
        *fixture_pages(),
    ]
    result = scraper().parse(pages)
    # the fractional disk quantity and null GPU fields of CPU shapes break nothing; CPU shapes
    # are not offers, and the GPU shapes of the other file still are
    assert [r.instance_type for r in result.records] == [
        "BM.GPU.H100.8",
        "VM.GPU.A10.1",
        "BM.GPU4.8",
    ]


def test_gpu_shape_quirks_of_the_real_files() -> None:
    pages = [
        RawPage(url=SHAPES, body=fixture_text("oci", "quirks_shapes.json")),
        RawPage(url=PRODUCTS, body=fixture_text("oci", "quirks_products.json")),
    ]
    result = scraper().parse(pages)
    assert result.warnings == []
    by_type = {r.instance_type: r for r in result.records}
    assert sorted(by_type) == ["BM.GPU.B300.8", "BM.GPU.GB200.4", "BM.GPU.MI355X.8", "BM.GPU3.8"]
    # "Compute - GPU - E3" names a hardware generation: the shape says V100
    v100 = by_type["BM.GPU3.8"]
    assert (v100.gpu_model, v100.price_per_hour, v100.spot_price_per_hour) == (
        "v100-16gb",
        23.6,
        11.8,
    )
    b300 = by_type["BM.GPU.B300.8"]  # null OCPU quantity: no vCPU count, offer kept
    assert (b300.gpu_model, b300.vcpus, b300.vram_gib_per_gpu) == ("b300", None, 288)
    mi355x = by_type["BM.GPU.MI355X.8"]  # gpuMemoryQty 288 is per GPU, not 36 GiB each
    assert (mi355x.vram_gib_per_gpu, mi355x.gpu_raw_name) == (288, "MI355X")
    assert by_type["BM.GPU.GB200.4"].gpu_count == 4  # "(NVL72)" display suffix dropped
