"""GCP Billing Catalog: pageToken pagination, core + RAM + GPU assembly per region, spot merge."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from app.records import OfferRecord
from scrapers.base import FeedFormatError, MissingApiKey, RawPage, ScraperConfig
from scrapers.gcp import MACHINES, GcpScraper
from scrapers.http import make_client
from tests.scrapers.conftest import fixture_text

BASE = "https://billing.test/v1/services/6F81-5844-456A/skus"


def scraper(key: str = "gkey") -> GcpScraper:
    return GcpScraper(ScraperConfig(base_url=BASE, api_key=key))


def fixture_pages() -> list[RawPage]:
    return [
        RawPage(url=BASE + "?pageToken=", body=fixture_text("gcp", "page1.json")),
        RawPage(url=BASE + "?pageToken=CAESBgoEOD", body=fixture_text("gcp", "page2.json")),
    ]


def test_parse_fixture_into_exact_records() -> None:
    result = scraper().parse(fixture_pages())
    by_key = {(r.instance_type, r.region): r for r in result.records}
    assert sorted(by_key) == sorted(
        [(f"a3-highgpu-{n}g", region) for n in (1, 2, 4, 8)
         for region in ("us-central1", "europe-west4")]
        + [(name, "us-central1") for name in MACHINES if name.startswith("g2-")]
    )  # fmt: skip
    # 208 vCPU x 0.0295 + 1872 GiB x 0.004 + 8 x 9.70; spot 208 x 0.0118 + 1872 x 0.0016 + 8 x 2.25
    assert by_key[("a3-highgpu-8g", "us-central1")] == OfferRecord(
        provider="gcp", instance_type="a3-highgpu-8g", region="us-central1",
        gpu_model="h100-sxm", gpu_raw_name="nvidia-h100-80gb", gpu_count=8, vram_gib_per_gpu=80,
        vcpus=208, ram_gib=1872, price_per_hour=91.224, spot_price_per_hour=23.4496,
    )  # fmt: skip
    assert by_key[("a3-highgpu-8g", "europe-west4")].price_per_hour == pytest.approx(91.848)
    assert by_key[("a3-highgpu-8g", "europe-west4")].spot_price_per_hour is None
    # 8 vCPU x 0.0248 + 32 GiB x 0.0029 + 1 x 0.56
    assert by_key[("g2-standard-8", "us-central1")] == OfferRecord(
        provider="gcp", instance_type="g2-standard-8", region="us-central1", gpu_model="l4",
        gpu_raw_name="nvidia-l4", gpu_count=1, vram_gib_per_gpu=24, vcpus=8, ram_gib=32,
        price_per_hour=0.8512,
    )  # fmt: skip
    assert by_key[("g2-standard-96", "us-central1")].price_per_gpu_hour == pytest.approx(0.9968)
    assert result.warnings == ["skipped SKU E2B1-2222-BBBD: bad unit price"]


def test_malformed() -> None:
    with pytest.raises(FeedFormatError):
        scraper().parse([RawPage(url=BASE, body=fixture_text("gcp", "malformed.json"))])


async def test_missing_key() -> None:
    async with make_client(timeout=5) as client:
        with pytest.raises(MissingApiKey):
            await scraper(key="").fetch(client)


@respx.mock
async def test_fetch_follows_page_token_and_hides_key() -> None:
    route = respx.get(BASE).mock(
        side_effect=[
            httpx.Response(200, text=fixture_text("gcp", "page1.json")),
            httpx.Response(200, text=fixture_text("gcp", "page2.json")),
        ]
    )
    async with make_client(timeout=5) as client:
        pages = await scraper().fetch(client)
    first, second = (call.request.url.params for call in route.calls)
    assert dict(first) == {"pageSize": "5000"}
    assert dict(second) == {"pageSize": "5000", "pageToken": "CAESBgoEOD"}
    # The key travels in a header, never in a URL (httpx logs URLs at INFO).
    assert all(call.request.headers["X-Goog-Api-Key"] == "gkey" for call in route.calls)
    assert all("gkey" not in str(call.request.url) for call in route.calls)
    assert all("gkey" not in page.url for page in pages)
    assert len(scraper().parse(pages).records) == 16


# --- real recorded SKUs (tests/fixtures/gcp/real/SOURCE.md) --------------------------------


def test_real_opencost_skus_price_a2_machines() -> None:
    pages = [RawPage(url=BASE, body=fixture_text("gcp", "real/skus_opencost.json"))]
    result = GcpScraper(ScraperConfig(base_url=BASE, api_key="k")).parse(pages)
    by_key = {(r.instance_type, r.region): r for r in result.records}
    # A100 GPU + A2 core + A2 RAM SKUs cover three regions: every A2 A100-40GB shape there
    assert {key[1] for key in by_key} == {"us-central1", "us-east1", "us-west1"}
    assert {key[0] for key in by_key} == {
        "a2-highgpu-1g", "a2-highgpu-2g", "a2-highgpu-4g", "a2-highgpu-8g", "a2-megagpu-16g",
    }  # fmt: skip
    one = by_key[("a2-highgpu-1g", "us-central1")]
    # 12 vCPU x 0.031611 + 85 GiB x 0.004237 + 1 GPU x 2.933908
    assert one.price_per_hour == pytest.approx(3.673385)
    assert (one.gpu_model, one.gpu_count, one.spot) == ("a100-40gb-sxm", 1, False)
    eight = by_key[("a2-highgpu-8g", "us-west1")]
    assert eight.price_per_hour == pytest.approx(8 * 3.673385, rel=1e-6)
    assert result.warnings == []


def test_both_spot_description_spellings() -> None:
    def sku(description: str, usage: str, units: str, nanos: int, kind: str) -> dict[str, object]:
        return {
            "skuId": description[:8], "description": description,
            "category": {"resourceFamily": "Compute", "resourceGroup": kind, "usageType": usage},
            "serviceRegions": ["us-central1"],
            "pricingInfo": [{"pricingExpression": {
                "usageUnit": "GiBy.h" if kind == "RAM" else "h",
                "tieredRates": [{"unitPrice": {"units": units, "nanos": nanos}}]}}],
        }  # fmt: skip

    skus = [
        sku("G2 Instance Core running in Americas", "OnDemand", "0", 24_000_000, "CPU"),
        sku("G2 Instance Ram running in Americas", "OnDemand", "0", 3_000_000, "RAM"),
        sku("Nvidia L4 GPU running in Americas", "OnDemand", "0", 560_000_000, "GPU"),
        sku("Spot Preemptible G2 Instance Core running in Americas", "Preemptible", "0",
            8_000_000, "CPU"),
        sku("Spot Preemptible G2 Instance Ram running in Americas", "Preemptible", "0",
            1_000_000, "RAM"),
        sku("Nvidia L4 GPU attached to Spot Preemptible VMs running in Americas",
            "Preemptible", "0", 220_000_000, "GPU"),
    ]  # fmt: skip
    body = json.dumps({"skus": skus})
    result = GcpScraper(ScraperConfig(base_url=BASE, api_key="k")).parse(
        [RawPage(url=BASE, body=body)]
    )
    g2 = {r.instance_type: r for r in result.records}["g2-standard-4"]
    assert g2.spot_price_per_hour == pytest.approx(4 * 0.008 + 16 * 0.001 + 0.22)
