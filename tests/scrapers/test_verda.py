"""Verda: OAuth2 token, instance types joined with per-location availability, p2p interconnect."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from app.records import OfferRecord
from scrapers.base import FeedFormatError, MissingApiKey, RawPage, ScraperConfig
from scrapers.http import make_client
from scrapers.verda import VerdaScraper
from tests.scrapers.conftest import fixture_text

BASE = "https://verda.test/v1"


def scraper(key: str = "cid", secret: str = "csecret") -> VerdaScraper:
    return VerdaScraper(ScraperConfig(base_url=BASE, api_key=key, api_secret=secret))


def fixture_pages() -> list[RawPage]:
    return [
        RawPage(url=f"{BASE}/instance-types", body=fixture_text("verda", "instance_types.json")),
        RawPage(
            url=f"{BASE}/instance-availability?is_spot=false",
            body=fixture_text("verda", "availability_ondemand.json"),
        ),
        RawPage(
            url=f"{BASE}/instance-availability?is_spot=true",
            body=fixture_text("verda", "availability_spot.json"),
        ),
    ]


def h100(region: str, availability: str) -> OfferRecord:
    return OfferRecord(
        provider="verda", instance_type="8H100.80S.176V", region=region, gpu_model="h100-sxm",
        gpu_raw_name="H100 SXM5 80GB", gpu_count=8, vram_gib_per_gpu=80, vcpus=176,
        ram_gib=1480, price_per_hour=23.92, spot_price_per_hour=9.52, interconnect="nvswitch",
        availability=availability,
    )  # fmt: skip


def ada(region: str) -> OfferRecord:
    return OfferRecord(
        provider="verda", instance_type="2RTX6000ADA.20V", region=region,
        gpu_model="rtx-6000-ada", gpu_raw_name="RTX 6000 Ada 48GB", gpu_count=2,
        vram_gib_per_gpu=48, vcpus=20, ram_gib=120, price_per_hour=1.78,
        spot_price_per_hour=0.62, interconnect="pcie", availability="out",
    )  # fmt: skip


def test_parse_fixture_into_exact_records() -> None:
    result = scraper().parse(fixture_pages())
    assert result.records == [
        h100("FIN-01", "in_stock"), h100("ICE-01", "out"), ada("FIN-01"), ada("ICE-01"),
    ]  # fmt: skip
    assert result.records[0].price_per_gpu_hour == pytest.approx(2.99)
    # the B200 row has no on-demand price: skipped with a warning per location
    assert len(result.warnings) == 2 and all("1B200.30V" in w for w in result.warnings)


def test_malformed() -> None:
    page = RawPage(url=f"{BASE}/instance-types", body=fixture_text("verda", "malformed.json"))
    with pytest.raises(FeedFormatError):
        scraper().parse([page])


async def test_missing_credentials() -> None:
    async with make_client(timeout=5) as client:
        with pytest.raises(MissingApiKey):
            await scraper(key="").fetch(client)
        with pytest.raises(MissingApiKey):
            await scraper(secret="").fetch(client)


@respx.mock
async def test_fetch_gets_token_then_three_feeds() -> None:
    token = respx.post(f"{BASE}/oauth2/token").mock(
        return_value=httpx.Response(
            200, json={"access_token": "tok123", "token_type": "Bearer", "expires_in": 3600}
        )
    )
    types = respx.get(f"{BASE}/instance-types").mock(
        return_value=httpx.Response(200, text=fixture_text("verda", "instance_types.json"))
    )
    avail = respx.get(f"{BASE}/instance-availability", params={"is_spot": "false"}).mock(
        return_value=httpx.Response(200, text=fixture_text("verda", "availability_ondemand.json"))
    )
    spot = respx.get(f"{BASE}/instance-availability", params={"is_spot": "true"}).mock(
        return_value=httpx.Response(200, text=fixture_text("verda", "availability_spot.json"))
    )
    async with make_client(timeout=5) as client:
        pages = await scraper().fetch(client)
    assert json.loads(token.calls.last.request.content) == {
        "grant_type": "client_credentials", "client_id": "cid", "client_secret": "csecret",
    }  # fmt: skip
    for route in (types, avail, spot):
        assert route.calls.last.request.headers["Authorization"] == "Bearer tok123"
    assert all("tok123" not in p.body for p in pages)
    assert len(scraper().parse(pages).records) == 4


# --- real API objects recorded by gpuhunt (tests/fixtures/verda/real/SOURCE.md) ------------


def test_real_instance_types_and_spot_availability() -> None:
    pages = [
        RawPage(
            url=f"{BASE}/instance-types",
            body=fixture_text("verda", "real/instance_types_gpuhunt.json"),
        ),
        RawPage(
            url=f"{BASE}/instance-availability?is_spot=true",
            body=fixture_text("verda", "real/availability_spot_gpuhunt.json"),
        ),
    ]
    result = scraper().parse(pages)
    assert result.warnings == []
    records = {(r.instance_type, r.region): r for r in result.records}
    assert len(records) == 6  # 3 GPU types x 2 locations; the CPU node is skipped
    h100 = records[("1H100.80S.30V", "FIN-01")]
    assert (h100.gpu_model, h100.vram_gib_per_gpu) == ("h100-sxm", 80)
    assert (h100.price_per_hour, h100.spot_price_per_hour) == (3.95, 1.70)
    a6000 = records[("2A6000.20V", "ICE-01")]
    assert (a6000.gpu_model, a6000.vram_gib_per_gpu, a6000.interconnect) == (
        "rtx-a6000",
        48,
        "pcie",
    )  # p2p "50GB/s"
    assert records[("1V100.6V", "FIN-01")].gpu_model == "v100-16gb"
    # only spot availability was recorded: nothing says on-demand capacity exists
    assert {r.availability for r in result.records} == {"out"}


@respx.mock
async def test_spot_availability_down_keeps_on_demand() -> None:
    respx.post(f"{BASE}/oauth2/token").mock(
        return_value=httpx.Response(200, json={"access_token": "tok"})
    )
    respx.get(f"{BASE}/instance-types").mock(
        return_value=httpx.Response(200, text=fixture_text("verda", "instance_types.json"))
    )
    respx.get(f"{BASE}/instance-availability?is_spot=false").mock(
        return_value=httpx.Response(200, text=fixture_text("verda", "availability_ondemand.json"))
    )
    respx.get(f"{BASE}/instance-availability?is_spot=true").mock(
        return_value=httpx.Response(503, text="maintenance")
    )
    s = scraper()
    async with make_client(timeout=5) as client:
        pages = await s.fetch(client)
    assert len(pages) == 2 and s.degraded
    assert "spot availability unavailable" in s.degraded[0]
    assert s.parse(pages).records
