"""Azure Retail Prices: pagination, spot merge, Windows/zero/DevTest drops, SKU table."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import respx

from app.records import OfferRecord
from scrapers.azure import GPU_FILTER, AzureScraper
from scrapers.base import FeedFormatError, RawPage, ScraperConfig
from scrapers.http import make_client
from tests.scrapers.conftest import fixture_text

BASE = "https://prices.test/api/retail/prices"


def scraper() -> AzureScraper:
    return AzureScraper(ScraperConfig(base_url=BASE))


def fixture_pages() -> list[RawPage]:
    return [
        RawPage(url=BASE, body=fixture_text("azure", "page1.json")),
        RawPage(url=BASE + "?$skip=1000", body=fixture_text("azure", "page2.json")),
    ]


def rec(**kw: object) -> OfferRecord:
    return OfferRecord.model_validate({"provider": "azure", "currency": "USD", **kw})


def test_parse_fixture_into_exact_records() -> None:
    result = scraper().parse(fixture_pages())
    assert sorted(result.records, key=lambda r: r.key) == [
        rec(instance_type="Standard_NC24ads_A100_v4", region="eastus", spot=False,
            gpu_model="a100-80gb-pcie", gpu_raw_name="A100 80GB PCIe", gpu_count=1,
            vram_gib_per_gpu=80, price_per_hour=3.673, spot_price_per_hour=1.2304),
        rec(instance_type="Standard_NC40ads_H100_v5", region="westeurope", spot=True,
            gpu_model="h100-nvl", gpu_raw_name="H100 NVL", gpu_count=1, vram_gib_per_gpu=94,
            spot_price_per_hour=2.7972),
        rec(instance_type="Standard_ND96isr_H100_v5", region="eastus", spot=False,
            gpu_model="h100-sxm", gpu_raw_name="H100 SXM5", gpu_count=8, vram_gib_per_gpu=80,
            price_per_hour=98.32, spot_price_per_hour=39.33),
        # app.gpus deliberately leaves fractional A10 vGPU slices unknown (not a full A10)
        rec(instance_type="Standard_NV6ads_A10_v5", region="westeurope", spot=False,
            gpu_model="unknown", gpu_raw_name="A10", gpu_count=1 / 6, vram_gib_per_gpu=4,
            price_per_hour=0.454),
    ]  # fmt: skip
    h100 = next(r for r in result.records if r.gpu_count == 8)
    assert h100.price_per_gpu_hour == pytest.approx(12.29)
    assert any("Standard_NC6" in w for w in result.warnings)  # unknown SKU is reported
    assert any("malformed item" in w for w in result.warnings)  # "n/a" price skipped


def test_malformed_envelope() -> None:
    with pytest.raises(FeedFormatError):
        scraper().parse([RawPage(url=BASE, body=fixture_text("azure", "malformed.json"))])
    with pytest.raises(FeedFormatError):
        scraper().parse([RawPage(url=BASE, body="<html>gateway</html>")])


@respx.mock
async def test_fetch_follows_next_page_link() -> None:
    next_link = "https://prices.test/api/retail/prices?$skip=1000"
    page1 = fixture_text("azure", "page1.json").replace(
        "https://prices.azure.com:443/api/retail/prices?$filter=serviceName%20eq%20%27Virtual"
        "%20Machines%27&$skip=1000",
        next_link,
    )
    first = respx.get(BASE, params={"$filter": GPU_FILTER}).mock(
        return_value=httpx.Response(200, text=page1)
    )
    second = respx.get(next_link).mock(
        return_value=httpx.Response(200, text=fixture_text("azure", "page2.json"))
    )
    async with make_client(timeout=5) as client:
        pages = await scraper().fetch(client)
    assert len(pages) == 2 and first.called and second.called
    query = parse_qs(urlsplit(str(first.calls.last.request.url)).query)
    assert query["$filter"] == [GPU_FILTER]
    assert len(scraper().parse(pages).records) == 4


@respx.mock
async def test_fetch_stops_on_empty_items_and_foreign_hosts() -> None:
    respx.get(BASE).mock(
        return_value=httpx.Response(
            200, json={"Items": [{"x": 1}], "NextPageLink": "https://evil.test/steal"}
        )
    )
    async with make_client(timeout=5) as client:
        assert len(await scraper().fetch(client)) == 1


# --- real recorded items (tests/fixtures/azure/real/SOURCE.md) -----------------------------


def test_real_recorded_items() -> None:
    pages = [RawPage(url=BASE, body=fixture_text("azure", "real/retail_items_recorded.json"))]
    result = AzureScraper(ScraperConfig(base_url=BASE)).parse(pages)
    by_key = {(r.instance_type, r.region): r for r in result.records}
    assert sorted(by_key) == [
        ("Standard_NC4as_T4_v3", "eastus"),
        ("Standard_NCC40ads_H100_v5", "eastus2"),
    ]
    t4 = by_key[("Standard_NC4as_T4_v3", "eastus")]
    assert (t4.gpu_model, t4.gpu_count, t4.price_per_hour) == ("t4", 1, 0.526)
    ncc = by_key[("Standard_NCC40ads_H100_v5", "eastus2")]
    # Windows (" Srs Win"), DevTest and the legacy Low Priority row are all ignored
    assert (ncc.gpu_model, ncc.price_per_hour, ncc.spot_price_per_hour) == (
        "h100-nvl",
        6.98,
        1.419034,
    )
    assert result.warnings == []  # the D14 example is DevTest + Windows: dropped, not unknown


def _item(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "armSkuName": "Standard_NC24ads_A100_v4", "armRegionName": "eastus",
        "retailPrice": 3.67, "unitOfMeasure": "1 Hour", "type": "Consumption",
        "skuName": "NC24ads A100 v4", "meterName": "NC24ads A100 v4",
        "productName": "Virtual Machines NCadsA100v4 Series",
        "effectiveStartDate": "2024-01-01T00:00:00Z",
    }  # fmt: skip
    base.update(kw)
    return base


def test_expired_rows_are_ignored_and_the_latest_current_row_wins() -> None:
    items = [
        # an expired spot row listed first, then the current one
        _item(skuName="NC24ads A100 v4 Spot", retailPrice=0.5,
              effectiveEndDate="2025-01-01T00:00:00Z"),
        _item(skuName="NC24ads A100 v4 Spot", retailPrice=0.9,
              effectiveStartDate="2025-02-01T00:00:00Z"),
        # two current on-demand rows: the later start date wins, whatever the order
        _item(retailPrice=4.0, effectiveStartDate="2026-06-01T00:00:00Z"),
        _item(retailPrice=3.67, effectiveStartDate="2024-01-01T00:00:00Z"),
    ]  # fmt: skip
    body = json.dumps({"Items": items, "NextPageLink": None})
    s = AzureScraper(ScraperConfig(base_url=BASE))
    s.clock = lambda: datetime(2026, 12, 3, tzinfo=UTC)  # type: ignore[method-assign]
    (record,) = s.parse([RawPage(url=BASE, body=body)]).records
    assert (record.price_per_hour, record.spot_price_per_hour) == (4.0, 0.9)
