"""Verda (formerly DataCrunch): instance types with on-demand/spot prices and per-location stock.

Auth is OAuth2 client credentials (key = client id, secret = client secret); the token never
lands in a RawPage. One record per instance type and location seen in the availability feeds:
IN_STOCK where the type is listed as available on demand there, OUT elsewhere. `p2p` (GPU
peer-to-peer bandwidth) sets the interconnect: >= 100 GB/s is NVLink (NVSwitch on 8-GPU HGX
boards), below that PCIe. The spot availability list is secondary: if it fails, the run is
partial and the on-demand offers still land.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any, ClassVar

import httpx
from pydantic import ConfigDict

from app.gpus.normalize import normalize_gpu_name
from app.records import Availability, Interconnect, OfferRecord
from scrapers.base import FeedFormatError, MissingApiKey, ParseResult, RawPage
from scrapers.http import (
    FeedModel,
    FetchError,
    HttpScraper,
    build_record,
    dedupe,
    gather_limited,
    get_text,
    load_json,
    post_json_text,
    to_float,
    validated,
)

NVLINK_MIN_GBPS = 100.0  # GB/s; PCIe 5.0 x16 tops out near 64


class _Size(FeedModel):
    model_config = ConfigDict(extra="ignore")

    size_in_gigabytes: float | None = None


class _Gpu(FeedModel):
    model_config = ConfigDict(extra="ignore")

    description: str = ""
    number_of_gpus: int = 0


class _Cpu(FeedModel):
    model_config = ConfigDict(extra="ignore")

    number_of_cores: float | None = None


class _Type(FeedModel):
    model_config = ConfigDict(extra="ignore")

    instance_type: str
    gpu: _Gpu
    gpu_memory: _Size = _Size()
    memory: _Size = _Size()
    cpu: _Cpu = _Cpu()
    price_per_hour: Any = None
    spot_price: Any = None
    currency: str = "usd"
    p2p: str | None = None


class _Availability(FeedModel):
    model_config = ConfigDict(extra="ignore")

    location_code: str
    availabilities: list[str]


def _interconnect(p2p: str | None, count: int) -> Interconnect:
    match = re.search(r"([\d.]+)\s*GB/s", p2p or "", re.I)
    if count < 2 or not match:
        return Interconnect.UNKNOWN
    if float(match.group(1)) < NVLINK_MIN_GBPS:
        return Interconnect.PCIE
    # An 8-GPU NVLink machine is an HGX board: all GPUs meet through NVSwitch.
    return Interconnect.NVSWITCH if count >= 8 else Interconnect.NVLINK


class VerdaScraper(HttpScraper):
    """Verda GPU instances (OAuth2 client credentials)."""

    name: ClassVar[str] = "verda"
    display_name: ClassVar[str] = "Verda (DataCrunch)"
    kind: ClassVar[str] = "marketplace"
    needs_key: ClassVar[bool] = True
    default_url: ClassVar[str] = "https://api.verda.com/v1"

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """Get a token, then instance types and both availability lists concurrently."""
        if not self.config.api_key or not self.config.api_secret:
            raise MissingApiKey("Verda needs a client id (API key) and client secret")
        base = self.base_url.rstrip("/")
        token_body = await post_json_text(
            client,
            f"{base}/oauth2/token",
            {
                "grant_type": "client_credentials",
                "client_id": self.config.api_key,
                "client_secret": self.config.api_secret,
            },
            attempts=2,
        )
        token = load_json(token_body).get("access_token") if token_body else None
        if not isinstance(token, str) or not token:
            raise FetchError("Verda token response has no access_token")
        headers = {"Authorization": f"Bearer {token}"}
        urls = [f"{base}/instance-types", f"{base}/instance-availability?is_spot=false"]

        async def one(url: str) -> RawPage:
            return RawPage(url=url, body=await get_text(client, url, headers=headers))

        pages = await gather_limited(self.limit, [partial(one, u) for u in urls])
        # Spot availability is secondary: without it the on-demand offers still land.
        spot_url = f"{base}/instance-availability?is_spot=true"
        try:
            pages.append(await one(spot_url))
        except (FetchError, httpx.HTTPError) as exc:
            self.degrade(f"spot availability unavailable ({str(exc)[:200]}); on-demand kept")
        return pages

    def parse(self, pages: list[RawPage]) -> ParseResult:
        """Join instance types with the availability lists."""
        result = ParseResult()
        types: list[_Type] = []
        on_demand: dict[str, set[str]] = {}
        spot: dict[str, set[str]] = {}
        for page in pages:
            data = load_json(page.body, page.url)
            if not isinstance(data, list):
                raise FeedFormatError(f"{page.url}: expected a JSON list")
            if "instance-availability" in page.url:
                target = spot if "is_spot=true" in page.url else on_demand
                for avail in validated(_Availability, data, "availability", result.warnings):
                    target.setdefault(avail.location_code, set()).update(avail.availabilities)
                continue
            types += validated(_Type, data, "instance type", result.warnings)
        locations = sorted(on_demand.keys() | spot.keys())
        records: list[OfferRecord] = []
        for it in types:
            count = it.gpu.number_of_gpus
            if count < 1:
                continue  # CPU-only node
            raw_gpu = re.sub(r"^\s*\d+\s*x\s*", "", it.gpu.description) or it.instance_type
            total = it.gpu_memory.size_in_gigabytes
            vram = total / count if total else None
            price, spot_price = to_float(it.price_per_hour), to_float(it.spot_price)
            for location in locations:
                available = it.instance_type in on_demand.get(location, set())
                record = build_record(
                    result.warnings,
                    f"{it.instance_type} in {location}",
                    provider=self.name,
                    instance_type=it.instance_type,
                    region=location,
                    gpu_model=normalize_gpu_name(
                        raw_gpu, memory_gib=vram, context=it.instance_type
                    ),
                    gpu_raw_name=raw_gpu,
                    gpu_count=count,
                    vram_gib_per_gpu=vram,
                    vcpus=it.cpu.number_of_cores,
                    ram_gib=it.memory.size_in_gigabytes,
                    price_per_hour=price,
                    spot_price_per_hour=spot_price if spot_price and spot_price > 0 else None,
                    currency=it.currency.upper(),
                    interconnect=_interconnect(it.p2p, count),
                    availability=Availability.IN_STOCK if available else Availability.OUT,
                )
                if record:
                    records.append(record)
        result.records = dedupe(records, result.warnings)
        return result
