"""AWS: regional on-demand CSVs (filtered while streaming) merged with the spot.js feed."""

from __future__ import annotations

import httpx
import pytest
import respx

from app.records import OfferRecord
from scrapers.aws import AwsScraper
from scrapers.base import FeedFormatError, RawPage, ScraperConfig
from scrapers.http import make_client
from tests.scrapers.conftest import fixture_text

BASE = "https://pricing.test/offers/v1.0/aws/AmazonEC2/current/{region}/index.csv"
SPOT = "https://spot.test/spot.js"


def scraper() -> AwsScraper:
    extra = {"spot": SPOT, "regions": "us-east-1, us-west-2"}
    return AwsScraper(ScraperConfig(base_url=BASE, extra_urls=extra))


def fixture_pages() -> list[RawPage]:
    return [
        RawPage(url="east", body=fixture_text("aws", "us-east-1.csv")),
        RawPage(url="west", body=fixture_text("aws", "us-west-2.csv")),
        RawPage(url=SPOT, body=fixture_text("aws", "spot.js")),
    ]


def rec(**kw: object) -> OfferRecord:
    return OfferRecord.model_validate({"provider": "aws", **kw})


def test_parse_fixture_into_exact_records() -> None:
    result = scraper().parse(fixture_pages())
    assert result.records == [
        rec(instance_type="p5.48xlarge", region="us-east-1", gpu_model="h100-sxm",
            gpu_raw_name="H100 SXM", gpu_count=8, vram_gib_per_gpu=80, vcpus=192, ram_gib=2048,
            price_per_hour=98.32, spot_price_per_hour=40.1),
        rec(instance_type="g5.xlarge", region="us-east-1", gpu_model="a10g",
            gpu_raw_name="A10G", gpu_count=1, vram_gib_per_gpu=24, vcpus=4, ram_gib=16,
            price_per_hour=1.006, spot_price_per_hour=0.402),
        rec(instance_type="g6e.12xlarge", region="us-east-1", gpu_model="l40s",
            gpu_raw_name="L40S", gpu_count=4, vram_gib_per_gpu=48, vcpus=48, ram_gib=384,
            price_per_hour=10.49304),
        rec(instance_type="p4d.24xlarge", region="us-west-2", gpu_model="a100-40gb-sxm",
            gpu_raw_name="A100 40GB SXM4", gpu_count=8, vram_gib_per_gpu=40, vcpus=96,
            ram_gib=1152, price_per_hour=32.7726, spot_price_per_hour=9.8318),
        rec(instance_type="g5.xlarge", region="us-west-2", gpu_model="a10g",
            gpu_raw_name="A10G", gpu_count=1, vram_gib_per_gpu=24, vcpus=4, ram_gib=16,
            price_per_hour=1.006),
    ]  # fmt: skip
    assert result.records[0].price_per_gpu_hour == pytest.approx(12.29)
    assert result.warnings == ["skipped g4ad.xlarge: GPU family not in the table"]


def test_malformed() -> None:
    with pytest.raises(FeedFormatError):
        scraper().parse([RawPage(url="east", body=fixture_text("aws", "malformed.csv"))])
    with pytest.raises(FeedFormatError):
        scraper().parse([RawPage(url=SPOT, body='callback({"config": {}});')])


@respx.mock
async def test_fetch_each_region_filtered_and_spot() -> None:
    east = respx.get(BASE.format(region="us-east-1")).mock(
        return_value=httpx.Response(200, text=fixture_text("aws", "us-east-1.csv"))
    )
    west = respx.get(BASE.format(region="us-west-2")).mock(
        return_value=httpx.Response(200, text=fixture_text("aws", "us-west-2.csv"))
    )
    spot = respx.get(SPOT).mock(
        return_value=httpx.Response(200, text=fixture_text("aws", "spot.js"))
    )
    async with make_client(timeout=5) as client:
        pages = await scraper().fetch(client)
    assert east.called and west.called and spot.called and len(pages) == 3
    # streaming filter: metadata + header kept, RHEL / non-GPU rows dropped before parsing
    assert '"RHEL"' not in pages[0].body and "m7i.large" not in pages[0].body
    assert pages[0].body.startswith('"FormatVersion"')
    assert scraper().parse(pages).records == scraper().parse(fixture_pages()).records
