"""CloudRift instance types (another project's recorded mock): per-datacenter node counts."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from scrapers.base import FeedFormatError, RawPage, ScraperConfig
from scrapers.cloudrift import QUERY, CloudriftScraper
from scrapers.http import make_client
from tests.scrapers.conftest import fixture_text

BASE = "https://api.cloudrift.test/api/v1/instance-types/list"


def scraper() -> CloudriftScraper:
    return CloudriftScraper(ScraperConfig(base_url=BASE))


def fixture_pages() -> list[RawPage]:
    return [
        RawPage(url=BASE, body=fixture_text("cloudrift", "real/instance_types_terraform_mock.json"))
    ]


def test_real_mock_response() -> None:
    result = scraper().parse(fixture_pages())
    by_dc = {r.region: r for r in result.records}
    assert sorted(by_dc) == ["dc-1", "dc-2"]
    dc1 = by_dc["dc-1"]
    assert (dc1.instance_type, dc1.gpu_count, dc1.vram_gib_per_gpu) == ("test-variant", 1, 24)
    assert dc1.price_per_hour == pytest.approx(0.0085)  # 0.85 US cents
    assert (dc1.availability, dc1.availability_count) == ("in_stock", 3)
    assert by_dc["dc-2"].availability_count == 2
    assert (dc1.vcpus, dc1.ram_gib, dc1.disk_gib) == (20, 64, 1024)
    assert dc1.gpu_model == "unknown"  # the mock names no GPU brand


def test_brand_names_the_gpu() -> None:
    variant = {
        "name": "rtx49-8c-nr.2", "gpu_count": 2, "vram": 24 * 1024**3, "cost_per_hour": 78,
        "nodes_per_dc": {"us-east-nc-nr-1": 3}, "available_nodes_per_dc": {"us-east-nc-nr-1": 0},
    }  # fmt: skip
    body = json.dumps(
        {
            "data": {
                "instance_types": [
                    {"name": "rtx49", "brand_short": "RTX 4090", "variants": [variant]}
                ]
            }
        }
    )
    (record,) = scraper().parse([RawPage(url=BASE, body=body)]).records
    assert (record.gpu_model, record.price_per_hour, record.availability) == (
        "rtx-4090",
        0.78,
        "out",
    )


def test_malformed() -> None:
    with pytest.raises(FeedFormatError):
        scraper().parse([RawPage(url=BASE, body=fixture_text("cloudrift", "malformed.json"))])


@respx.mock
async def test_fetch_posts_the_selector_without_a_key() -> None:
    route = respx.post(BASE).mock(
        return_value=httpx.Response(
            200, text=fixture_text("cloudrift", "real/instance_types_terraform_mock.json")
        )
    )
    async with make_client(timeout=5) as client:
        await scraper().fetch(client)
    request = route.calls.last.request
    assert json.loads(request.content) == QUERY and "Authorization" not in request.headers
