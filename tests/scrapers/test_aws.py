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
        rec(instance_type="g4ad.xlarge", region="us-east-1", gpu_model="unknown",
            gpu_raw_name="Radeon Pro V520", gpu_count=1, vram_gib_per_gpu=8, vcpus=4,
            ram_gib=16, price_per_hour=0.3785),
        rec(instance_type="p4d.24xlarge", region="us-west-2", gpu_model="a100-40gb-sxm",
            gpu_raw_name="A100 40GB SXM4", gpu_count=8, vram_gib_per_gpu=40, vcpus=96,
            ram_gib=1152, price_per_hour=32.7726, spot_price_per_hour=9.8318),
        rec(instance_type="g5.xlarge", region="us-west-2", gpu_model="a10g",
            gpu_raw_name="A10G", gpu_count=1, vram_gib_per_gpu=24, vcpus=4, ram_gib=16,
            price_per_hour=1.006),
    ]  # fmt: skip
    assert result.records[0].price_per_gpu_hour == pytest.approx(12.29)
    assert result.warnings == []


def test_malformed() -> None:
    with pytest.raises(FeedFormatError):
        scraper().parse([RawPage(url="east", body=fixture_text("aws", "malformed.csv"))])
    # A broken spot feed is secondary: the on-demand rows land, the result says why it's partial.
    result = scraper().parse(
        [fixture_pages()[0], RawPage(url=SPOT, body='callback({"config": {}});')]
    )
    assert result.records and all(r.spot_price_per_hour is None for r in result.records)
    assert result.degraded and "spot feed unreadable" in result.degraded[0]


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


# --- real recorded feeds (tests/fixtures/aws/real/SOURCE.md) ------------------------------

REAL_SPOT = "https://website.spot.ec2.aws.a2z.com/spot.json"
LIGOJ_URL = BASE.format(region="eu-west-1")


def test_real_spot_json_prices() -> None:
    prices = AwsScraper._spot(
        RawPage(url=REAL_SPOT, body=fixture_text("aws", "real/spot_us-east-2_spotinfo.json"))
    )
    assert prices[("p5.48xlarge", "us-east-2")] == pytest.approx(20.3632)
    assert prices[("p4d.24xlarge", "us-east-2")] == pytest.approx(6.0795)
    assert prices[("g6.xlarge", "us-east-2")] == pytest.approx(0.3897)
    assert prices[("p6-b200.48xlarge", "us-east-2")] == pytest.approx(42.045)
    # 83 entries, 7 listed twice: one price per size, Linux only ("N/A*" Windows ignored)
    assert len(prices) == 76


def test_real_spot_json_merges_into_on_demand_rows() -> None:
    # The project fixture's rows, relabelled to us-east-2, pick up the recorded spot prices.
    csv_text = fixture_text("aws", "us-east-1.csv").replace('"us-east-1"', '"us-east-2"')
    pages = [
        RawPage(url=BASE.format(region="us-east-2"), body=csv_text),
        RawPage(url=REAL_SPOT, body=fixture_text("aws", "real/spot_us-east-2_spotinfo.json")),
    ]
    result = scraper().parse(pages)
    by_type = {r.instance_type: r for r in result.records}
    assert by_type["p5.48xlarge"].spot_price_per_hour == pytest.approx(20.3632)
    assert by_type["g5.xlarge"].spot_price_per_hour == pytest.approx(0.3651)
    assert result.degraded == []


def test_real_older_price_list_generation() -> None:
    result = scraper().parse(
        [RawPage(url=LIGOJ_URL, body=fixture_text("aws", "real/eu-west-1_index_ligoj.csv"))]
    )
    by_type = {r.instance_type: r for r in result.records}
    # p2.8xlarge / p2.xlarge rows are cut short before the GPU column: no count, no offer
    assert sorted(by_type) == ["p2.16xlarge"]
    p2 = by_type["p2.16xlarge"]
    # no Region Code column: "EU (Ireland)" is eu-west-1; GPU count from the GPU column
    assert (p2.region, p2.gpu_count, p2.price_per_hour) == ("eu-west-1", 16, 15.552)
    assert p2.gpu_raw_name == "Tesla K80" and p2.gpu_model == "unknown"  # K80 is not carried
    assert result.warnings == [
        "skipped g2.2xlarge: GPU family not in the table",
        "skipped g2.8xlarge: GPU family not in the table",
    ]


@respx.mock
async def test_real_unquoted_rows_survive_the_streaming_filter() -> None:
    respx.get(LIGOJ_URL).mock(
        return_value=httpx.Response(200, text=fixture_text("aws", "real/eu-west-1_index_ligoj.csv"))
    )
    respx.get(SPOT).mock(return_value=httpx.Response(200, text="{}"))
    s = AwsScraper(ScraperConfig(base_url=BASE, extra_urls={"spot": SPOT, "regions": "eu-west-1"}))
    async with make_client(timeout=5) as client:
        pages = await s.fetch(client)
    assert "c1.medium" not in pages[0].body and "p2.16xlarge" in pages[0].body


@respx.mock
async def test_spot_feed_down_keeps_on_demand_and_degrades() -> None:
    respx.get(BASE.format(region="us-east-1")).mock(
        return_value=httpx.Response(200, text=fixture_text("aws", "us-east-1.csv"))
    )
    respx.get(BASE.format(region="us-west-2")).mock(
        return_value=httpx.Response(200, text=fixture_text("aws", "us-west-2.csv"))
    )
    respx.get(SPOT).mock(return_value=httpx.Response(404, text="NoSuchKey"))
    s = scraper()
    async with make_client(timeout=5) as client:
        pages = await s.fetch(client)
    assert len(pages) == 2
    assert s.degraded and "spot prices unavailable" in s.degraded[0]
    result = s.parse(pages)
    assert len(result.records) == 6
    assert all(r.spot_price_per_hour is None for r in result.records)
