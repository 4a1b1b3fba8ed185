"""TensorDock v2 locations: component pricing, counts up to max_count, sold-out visibility."""

from __future__ import annotations

import httpx
import pytest
import respx

from app.records import OfferRecord
from scrapers.base import FeedFormatError, MissingApiKey, RawPage, ScraperConfig
from scrapers.http import make_client
from scrapers.tensordock import TensordockScraper
from tests.scrapers.conftest import fixture_text

BASE = "https://tensordock.test/api/v2/locations"
IDAHO = "Chubbuck, Idaho, United States"


def scraper(key: str = "") -> TensordockScraper:
    return TensordockScraper(ScraperConfig(base_url=BASE, api_key=key))


def fixture_pages() -> list[RawPage]:
    return [RawPage(url=BASE, body=fixture_text("tensordock", "locations.json"))]


def h100(n: int, price: float) -> OfferRecord:
    return OfferRecord(
        provider="tensordock", instance_type=f"{n}x-h100-sxm5-80gb", region=IDAHO,
        gpu_model="h100-sxm", gpu_raw_name="NVIDIA H100 SXM5 80GB", gpu_count=n,
        vram_gib_per_gpu=80, vcpus=4 * n, ram_gib=16 * n, disk_gib=100 * n, price_per_hour=price,
        availability="in_stock", availability_count=4,
    )  # fmt: skip


def test_parse_fixture_into_exact_records() -> None:
    result = scraper().parse(fixture_pages())
    assert result.records == [
        # 2.25/GPU + 4 vCPU x 0.003 + 16 GB x 0.002 + 100 GB x 0.00005 per GPU
        h100(1, 2.299), h100(2, 4.598), h100(4, 9.196),
        OfferRecord(
            provider="tensordock", instance_type="1x-geforcertx4090-pcie-24gb", region=IDAHO,
            gpu_model="rtx-4090", gpu_raw_name="NVIDIA GeForce RTX 4090 PCIe 24GB",
            gpu_count=1, vram_gib_per_gpu=24, vcpus=2, ram_gib=16, disk_gib=100,
            price_per_hour=0.393,
            availability="in_stock", availability_count=1,
        ),
        OfferRecord(
            provider="tensordock", instance_type="1x-rtxa6000-pcie-48gb",
            region="Frankfurt, Hesse, Germany", gpu_model="rtx-a6000",
            gpu_raw_name="NVIDIA RTX A6000 PCIe 48GB", gpu_count=1, vram_gib_per_gpu=48,
            vcpus=4, ram_gib=16, disk_gib=100, price_per_hour=0.499, availability="out",
            availability_count=0,
        ),
    ]  # fmt: skip
    assert result.records[2].price_per_gpu_hour == pytest.approx(2.299)
    assert len(result.warnings) == 1  # max_count "many"


def test_malformed() -> None:
    with pytest.raises(FeedFormatError):
        scraper().parse([RawPage(url=BASE, body=fixture_text("tensordock", "malformed.json"))])


@respx.mock
async def test_fetch_sends_the_key_and_skips_without_one() -> None:
    route = respx.get(BASE).mock(
        return_value=httpx.Response(200, text=fixture_text("tensordock", "locations.json"))
    )
    async with make_client(timeout=5) as client:
        with pytest.raises(MissingApiKey):
            await scraper().fetch(client)
        pages = await scraper("td").fetch(client)
    assert route.calls.last.request.headers["Authorization"] == "Bearer td"
    assert route.call_count == 1
    assert TensordockScraper.needs_key
    assert len(scraper().parse(pages).records) == 5


# --- real published examples (tests/fixtures/tensordock/real/SOURCE.md) --------------------


def test_real_v2_documented_example() -> None:
    result = scraper().parse(
        [RawPage(url=BASE, body=fixture_text("tensordock", "real/locations_docs_example.json"))]
    )
    by_type = {r.instance_type: r for r in result.records}
    assert sorted(by_type) == [
        "1x-geforcertx4090-pcie-24gb", "1x-h100-sxm5-80gb", "2x-geforcertx4090-pcie-24gb",
        "2x-h100-sxm5-80gb", "4x-geforcertx4090-pcie-24gb", "4x-h100-sxm5-80gb",
        "8x-h100-sxm5-80gb",
    ]  # fmt: skip
    h100 = by_type["1x-h100-sxm5-80gb"]
    assert h100.gpu_model == "h100-sxm" and h100.region == "Austin, Texas, United States"
    # 2.2 GPU + 4 vCPU x 0.003 + 16 GB x 0.002 + 100 GB x 0.00005
    assert h100.price_per_hour == pytest.approx(2.2 + 0.012 + 0.032 + 0.005)
    assert (h100.availability, h100.availability_count) == ("in_stock", 8)
    rtx = by_type["2x-geforcertx4090-pcie-24gb"]
    assert rtx.gpu_model == "rtx-4090" and rtx.price_per_hour == pytest.approx(1.0)


def test_real_v0_hostnodes_generation() -> None:
    result = scraper().parse(
        [RawPage(url=BASE, body=fixture_text("tensordock", "real/hostnodes_v0_sdk_docs.json"))]
    )
    assert result.warnings == []
    (record,) = result.records
    assert record.instance_type == "1x-geforcertx3080-pcie-10gb"
    assert record.region == "Winnipeg, Manitoba, Canada"
    assert record.gpu_model == "rtx-3080" and record.vram_gib_per_gpu == 10
    assert record.price_per_hour == pytest.approx(0.15 + 4 * 0.003 + 16 * 0.002 + 100 * 0.00005)
    assert (record.availability, record.availability_count) == ("in_stock", 1)
