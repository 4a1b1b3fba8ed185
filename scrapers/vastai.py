"""Vast.ai marketplace: one bundle offer is one machine (or a slice of one) with live availability.

Prices are per bundle (`dph_total`, whole offer incl. the default storage; recorded responses
without it carry the same figure as `search.totalHour` or `discounted_dph_total`); `min_bid` is
the interruptible price. Host RAM is for the whole machine, so it is scaled by the offer's share
of the CPU cores. The CLI's `--raw` output (a bare list of offers) parses too. `reliability`
has no OfferRecord field and is not kept.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

import httpx
from pydantic import ConfigDict, ValidationError

from app.gpus.normalize import normalize_gpu_name
from app.records import Availability, Interconnect, Network, OfferRecord
from scrapers.base import FeedFormatError, ParseResult, RawPage
from scrapers.http import (
    FeedModel,
    HttpScraper,
    build_record,
    dedupe,
    load_json,
    post_json_text,
    to_float,
)

OFFER_LIMIT = 3000  # the bundles endpoint has no pagination: one large page
QUERY: dict[str, Any] = {
    "rentable": {"eq": True},
    "num_gpus": {"gte": 1},
    "type": "on-demand",
    "order": [["score", "desc"]],
    "limit": OFFER_LIMIT,
}


class _Offer(FeedModel):
    model_config = ConfigDict(extra="ignore")

    id: int
    machine_id: int
    num_gpus: int
    gpu_name: str
    gpu_ram: float | None = None  # MB per GPU
    cpu_cores: float | None = None
    cpu_cores_effective: float | None = None
    cpu_ram: float | None = None  # MB, whole machine
    disk_space: float | None = None  # GB
    dph_total: float | None = None
    discounted_dph_total: float | None = None
    dph_total_adj: float | None = None
    search: dict[str, Any] | None = None
    min_bid: float | None = None
    rentable: bool = False
    rented: bool = False
    geolocation: str | None = None
    bw_nvlink: float | None = None
    inet_down: float | None = None  # Mb/s
    inet_up: float | None = None


def _price(offer: _Offer) -> float | None:
    """The whole-bundle hourly price: dph_total, else the same figure under its other names."""
    total = (offer.search or {}).get("totalHour")
    for value in (offer.dph_total, total, offer.discounted_dph_total, offer.dph_total_adj):
        number = to_float(value)
        if number is not None and number > 0:
            return number
    return None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")[:60] or "gpu"


class VastaiScraper(HttpScraper):
    """Vast.ai bundles search (public; a key is sent when configured)."""

    name: ClassVar[str] = "vastai"
    display_name: ClassVar[str] = "Vast.ai"
    kind: ClassVar[str] = "marketplace"
    default_url: ClassVar[str] = "https://console.vast.ai/api/v0/bundles/"

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """POST the search query; one page holds every matching offer."""
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        body = await post_json_text(
            client, self.base_url, QUERY, headers=headers, max_bytes=self.max_bytes
        )
        return [RawPage(url=self.base_url, body=body)]

    def parse(self, pages: list[RawPage]) -> ParseResult:
        """Offers -> one record per machine and GPU count."""
        result = ParseResult()
        records = []
        for page in pages:
            data = load_json(page.body, page.url)
            offers = data if isinstance(data, list) else None  # `vastai search offers --raw`
            if isinstance(data, dict) and isinstance(data.get("offers"), list):
                offers = data["offers"]
            if offers is None:
                raise FeedFormatError(f"{page.url}: expected an offers list")
            for raw in offers:
                try:
                    offer = _Offer.model_validate(raw)
                except ValidationError as exc:
                    shown = json.dumps(raw)[:60] if isinstance(raw, dict) else type(raw).__name__
                    result.warnings.append(f"skipped offer {shown}: {exc.errors()[0]['msg']}")
                    continue
                record = self._record(offer, result.warnings)
                if record:
                    records.append(record)
        result.records = dedupe(records, result.warnings)
        return result

    def _record(self, offer: _Offer, warnings: list[str]) -> OfferRecord | None:
        price = _price(offer)
        if price is None:
            warnings.append(f"skipped offer {offer.id}: no price (dph_total or search.totalHour)")
            return None
        vram = offer.gpu_ram / 1024 if offer.gpu_ram else None
        available = offer.rentable and not offer.rented
        ram = None
        if offer.cpu_ram and offer.cpu_cores and offer.cpu_cores_effective:
            ram = offer.cpu_ram / 1024 * min(1.0, offer.cpu_cores_effective / offer.cpu_cores)
        interconnect = Interconnect.UNKNOWN
        if offer.num_gpus >= 2 and offer.bw_nvlink is not None:
            interconnect = Interconnect.NVLINK if offer.bw_nvlink > 0 else Interconnect.PCIE
        # Under 1 Mb/s is a host's measurement failing, not a link: speed unknown.
        speeds = [s for s in (offer.inet_down, offer.inet_up) if s and s >= 1]
        return build_record(
            warnings,
            f"offer {offer.id}",
            provider=self.name,
            instance_type=f"vast-{offer.machine_id}-{offer.num_gpus}x{_slug(offer.gpu_name)}",
            region=(offer.geolocation or "").strip() or "unknown",
            gpu_model=normalize_gpu_name(
                offer.gpu_name, memory_gib=vram, context=f"vast {offer.gpu_name}"
            ),
            gpu_raw_name=offer.gpu_name,
            gpu_count=offer.num_gpus,
            vram_gib_per_gpu=round(vram, 1) if vram else None,
            vcpus=offer.cpu_cores_effective,
            ram_gib=round(ram, 1) if ram else None,
            disk_gib=offer.disk_space,
            price_per_hour=price,
            spot_price_per_hour=offer.min_bid if offer.min_bid and offer.min_bid > 0 else None,
            interconnect=interconnect,
            # Hosts reach each other over the public internet: its bandwidth is the fabric.
            network=Network.ETHERNET if speeds else Network.UNKNOWN,
            network_gbps=min(speeds) / 1000 if speeds else None,
            availability=Availability.IN_STOCK if available else Availability.OUT,
            availability_count=offer.num_gpus if available else 0,
        )
