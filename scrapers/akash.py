"""Akash Network: per-GPU-model marketplace prices and live availability (public, no key).

The Console API's `/v1/gpu-prices` summarises the providers' current bids per GPU model
(vendor, model, memory, interface) with a price band in USD per GPU-hour and how many GPUs are
free network-wide. One record per model, one GPU, region "any" (a decentralized market),
priced at the median bid (`med`, else the weighted average, else the average, else the
minimum). Free GPUs give the availability count: none free is OUT, a handful LIMITED.
"""

from __future__ import annotations

import re
from typing import ClassVar

import httpx
from pydantic import ConfigDict

from app.gpus.normalize import normalize_gpu_name
from app.records import Availability, OfferRecord
from scrapers.base import FeedFormatError, ParseResult, RawPage
from scrapers.http import (
    FeedModel,
    HttpScraper,
    build_record,
    dedupe,
    get_text,
    load_json,
    validated,
)

REGION = "any"
LIMITED_BELOW = 4  # fewer free GPUs than this network-wide reads as limited stock


class _Count(FeedModel):
    model_config = ConfigDict(extra="ignore")

    total: int = 0
    available: int = 0


class _Price(FeedModel):
    model_config = ConfigDict(extra="ignore")

    currency: str = "USD"
    min: float | None = None
    max: float | None = None
    avg: float | None = None
    weightedAverage: float | None = None
    med: float | None = None


class _Model(FeedModel):
    model_config = ConfigDict(extra="ignore")

    vendor: str
    model: str
    ram: str = ""
    interface: str = ""
    availability: _Count = _Count()
    providerAvailability: _Count = _Count()
    price: _Price | None = None


def _gib(ram: str) -> float | None:
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*Gi", ram)
    return float(match.group(1)) if match else None


class AkashScraper(HttpScraper):
    """Akash Console API GPU prices (public, no key)."""

    name: ClassVar[str] = "akash"
    display_name: ClassVar[str] = "Akash Network"
    kind: ClassVar[str] = "marketplace"
    default_url: ClassVar[str] = "https://console-api.akash.network/v1/gpu-prices"

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """One GET: every model in one response."""
        body = await get_text(client, self.base_url, max_bytes=self.max_bytes)
        return [RawPage(url=self.base_url, body=body)]

    def parse(self, pages: list[RawPage]) -> ParseResult:
        """models[] -> one single-GPU record per model with a price."""
        result = ParseResult()
        records: list[OfferRecord] = []
        for page in pages:
            data = load_json(page.body, page.url)
            models = data.get("models") if isinstance(data, dict) else None
            if not isinstance(models, list):
                raise FeedFormatError(f"{page.url}: expected a models list")
            for model in validated(_Model, models, "model", result.warnings):
                record = self._record(model, result.warnings)
                if record:
                    records.append(record)
        result.records = dedupe(records, result.warnings)
        return result

    def _record(self, model: _Model, warnings: list[str]) -> OfferRecord | None:
        band = model.price
        price = None
        if band is not None:
            price = next(
                (p for p in (band.med, band.weightedAverage, band.avg, band.min) if p), None
            )
        if price is None:
            return None  # nobody bids on this model right now: no price to show
        raw = " ".join(p for p in (model.vendor, model.model, model.interface, model.ram) if p)
        vram = _gib(model.ram)
        free = model.availability.available
        if free <= 0:
            level = Availability.OUT
        elif free < LIMITED_BELOW:
            level = Availability.LIMITED
        else:
            level = Availability.IN_STOCK
        slug = "-".join(p for p in (model.vendor, model.model, model.ram, model.interface) if p)
        return build_record(
            warnings,
            raw,
            provider=self.name,
            instance_type=f"1x {slug}".lower(),
            region=REGION,
            gpu_model=normalize_gpu_name(raw, memory_gib=vram, context=model.interface),
            gpu_raw_name=raw,
            gpu_count=1,
            vram_gib_per_gpu=vram,
            price_per_hour=price,
            currency=band.currency.upper() if band and band.currency else "USD",
            availability=level,
            availability_count=max(0, free),
        )
