"""Lambda instance types: one record per region with capacity; sold-out types stay visible."""

from __future__ import annotations

import httpx
import pytest
import respx

from app.records import OfferRecord
from scrapers.base import FeedFormatError, MissingApiKey, RawPage, ScraperConfig
from scrapers.http import make_client
from scrapers.lambdalabs import LambdalabsScraper
from tests.scrapers.conftest import fixture_text

BASE = "https://lambda.test/api/v1/instance-types"


def scraper(key: str = "secret") -> LambdalabsScraper:
    return LambdalabsScraper(ScraperConfig(base_url=BASE, api_key=key))


def fixture_pages() -> list[RawPage]:
    return [RawPage(url=BASE, body=fixture_text("lambdalabs", "instance_types.json"))]


def h100(region: str) -> OfferRecord:
    return OfferRecord(
        provider="lambdalabs", instance_type="gpu_8x_h100_sxm5", region=region,
        gpu_model="h100-sxm", gpu_raw_name="H100 (80 GB SXM5)", gpu_count=8,
        vram_gib_per_gpu=80, vcpus=208, ram_gib=1800, disk_gib=24780, price_per_hour=23.92,
        availability="in_stock",
    )  # fmt: skip


def test_parse_fixture_into_exact_records() -> None:
    result = scraper().parse(fixture_pages())
    assert result.records == [
        h100("us-east-1"),
        h100("us-west-1"),
        OfferRecord(
            provider="lambdalabs", instance_type="gpu_1x_a10", region="any", gpu_model="a10",
            gpu_raw_name="A10 (24 GB PCIe)", gpu_count=1, vram_gib_per_gpu=24, vcpus=30,
            ram_gib=200, disk_gib=1400, price_per_hour=0.75, availability="out",
        ),
        OfferRecord(
            provider="lambdalabs", instance_type="gpu_8x_a100_80gb_sxm4", region="us-south-1",
            gpu_model="a100-80gb-sxm", gpu_raw_name="A100 (80 GB SXM4)", gpu_count=8,
            vram_gib_per_gpu=80, vcpus=240, ram_gib=1800, disk_gib=19500, price_per_hour=14.32,
            availability="in_stock",
        ),
        OfferRecord(
            provider="lambdalabs", instance_type="gpu_1x_gh200", region="us-east-3",
            gpu_model="gh200", gpu_raw_name="GH200 (96 GB)", gpu_count=1, vram_gib_per_gpu=96,
            vcpus=64, ram_gib=432, disk_gib=4096, price_per_hour=1.49, availability="in_stock",
        ),
    ]  # fmt: skip
    assert result.records[0].price_per_gpu_hour == pytest.approx(2.99)
    assert result.warnings == [
        "skipped gpu_1x_broken: Input should be a valid number, unable to parse string as a number"
    ]


def test_malformed() -> None:
    with pytest.raises(FeedFormatError):
        scraper().parse([RawPage(url=BASE, body=fixture_text("lambdalabs", "malformed.json"))])


async def test_missing_key() -> None:
    async with make_client(timeout=5) as client:
        with pytest.raises(MissingApiKey):
            await scraper(key="").fetch(client)


@respx.mock
async def test_fetch_sends_bearer_key() -> None:
    route = respx.get(BASE).mock(
        return_value=httpx.Response(200, text=fixture_text("lambdalabs", "instance_types.json"))
    )
    async with make_client(timeout=5) as client:
        pages = await scraper().fetch(client)
    assert route.calls.last.request.headers["Authorization"] == "Bearer secret"
    assert len(scraper().parse(pages).records) == 5


# --- real recorded feed (tests/fixtures/lambdalabs/real/SOURCE.md) --------------------------


def test_real_documented_example_is_accepted() -> None:
    # Lambda's own OpenAPI example: no specs.gpus, no gpu_description, prices as strings.
    pages = [
        RawPage(
            url=BASE, body=fixture_text("lambdalabs", "real/instance_types_openapi_example.json")
        )
    ]
    result = scraper().parse(pages)
    assert result.warnings == []
    by_type = {r.instance_type: r for r in result.records}
    assert sorted(by_type) == ["gpu_1x_a100", "gpu_4x_a6000"]
    one, four = by_type["gpu_1x_a100"], by_type["gpu_4x_a6000"]
    assert (one.gpu_count, one.price_per_hour, one.region) == (1, 0.80, "us-tx-1")
    assert (four.gpu_count, four.price_per_hour, four.region) == (4, 1.10, "us-az-1")
    assert one.gpu_raw_name == "RTX A100 (24 GB)" and four.gpu_raw_name == "RTX 6000 (24 GB)"
    # "RTX 6000 (24 GB)" is the Turing Quadro by its 24 GB
    assert four.gpu_model == "quadro-rtx-6000"
    assert one.availability == "in_stock"
