"""TensorDock marketplace (v2 locations): per-location GPU stock with component pricing.

A VM is priced as GPUs x `price_per_hr` plus vCPUs, RAM and storage at the location's per-unit
rates. We price a standard per-GPU host share (HOST_PER_GPU, capped at the location's maximum)
so offers are comparable. Counts 1, 2, 4, 8 up to `max_count` (GPUs free now) are emitted; a
GPU with none free stays visible as one OUT single-GPU offer.
"""

from __future__ import annotations

import re
from typing import ClassVar

import httpx
from pydantic import ConfigDict, ValidationError

from app.gpus.normalize import normalize_gpu_name
from app.records import Availability, OfferRecord
from scrapers.base import FeedFormatError, ParseResult, RawPage
from scrapers.http import FeedModel, HttpScraper, build_record, dedupe, get_text, load_json

COUNTS = (1, 2, 4, 8)
HOST_PER_GPU = {"vcpus": 4.0, "ram_gb": 16.0, "storage_gb": 100.0}


class _Resources(FeedModel):
    model_config = ConfigDict(extra="ignore")

    max_vcpus: float | None = None
    max_ram_gb: float | None = None
    max_storage_gb: float | None = None


class _Pricing(FeedModel):
    model_config = ConfigDict(extra="ignore")

    per_vcpu_hr: float = 0.0
    per_gb_ram_hr: float = 0.0
    per_gb_storage_hr: float = 0.0


class _Gpu(FeedModel):
    model_config = ConfigDict(extra="ignore")

    v0Name: str
    displayName: str = ""
    max_count: int
    price_per_hr: float
    resources: _Resources = _Resources()
    pricing: _Pricing = _Pricing()


class _Location(FeedModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    city: str = ""
    stateprovince: str = ""
    country: str = ""
    gpus: list[dict[str, object]] = []


def _cap(want: float, limit: float | None) -> float:
    return min(want, limit) if limit else want  # 0 = nothing free now, not a real limit


class TensordockScraper(HttpScraper):
    """TensorDock v2 locations (a key is sent as Bearer when configured)."""

    name: ClassVar[str] = "tensordock"
    display_name: ClassVar[str] = "TensorDock"
    kind: ClassVar[str] = "marketplace"
    default_url: ClassVar[str] = "https://dashboard.tensordock.com/api/v2/locations"

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """One GET; the feed lists every location at once."""
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        body = await get_text(client, self.base_url, headers=headers, max_bytes=self.max_bytes)
        return [RawPage(url=self.base_url, body=body)]

    def parse(self, pages: list[RawPage]) -> ParseResult:
        """data.locations[].gpus[] -> one record per location, GPU and count."""
        result = ParseResult()
        records: list[OfferRecord] = []
        for page in pages:
            data = load_json(page.body, page.url)
            locations = data.get("data", {}).get("locations") if isinstance(data, dict) else None
            if not isinstance(locations, list):
                raise FeedFormatError(f"{page.url}: expected data.locations to be a list")
            for raw in locations:
                try:
                    location = _Location.model_validate(raw)
                except ValidationError as exc:
                    result.warnings.append(f"skipped location: {exc.errors()[0]['msg']}")
                    continue
                region = ", ".join(
                    p for p in (location.city, location.stateprovince, location.country) if p
                )
                for raw_gpu in location.gpus:
                    try:
                        gpu = _Gpu.model_validate(raw_gpu)
                    except ValidationError as exc:
                        result.warnings.append(
                            f"skipped GPU in {region or location.id}: {exc.errors()[0]['msg']}"
                        )
                        continue
                    records.extend(self._records(gpu, region or location.id, result.warnings))
        result.records = dedupe(records, result.warnings)
        return result

    def _records(self, gpu: _Gpu, region: str, warnings: list[str]) -> list[OfferRecord]:
        out = []
        raw = gpu.displayName or gpu.v0Name
        memory = re.search(r"(\d+)\s*gb", gpu.v0Name, re.I)
        vram = float(memory.group(1)) if memory else None
        model = normalize_gpu_name(raw, memory_gib=vram, context=gpu.v0Name)
        # A sold-out GPU stays visible as one OUT single-GPU offer.
        in_stock = gpu.max_count >= 1
        for count in [c for c in COUNTS if c <= gpu.max_count] if in_stock else [1]:
            vcpus = _cap(HOST_PER_GPU["vcpus"] * count, gpu.resources.max_vcpus)
            ram = _cap(HOST_PER_GPU["ram_gb"] * count, gpu.resources.max_ram_gb)
            disk = _cap(HOST_PER_GPU["storage_gb"] * count, gpu.resources.max_storage_gb)
            price = (
                gpu.price_per_hr * count
                + vcpus * gpu.pricing.per_vcpu_hr
                + ram * gpu.pricing.per_gb_ram_hr
                + disk * gpu.pricing.per_gb_storage_hr
            )
            record = build_record(
                warnings,
                f"{gpu.v0Name} in {region}",
                provider=self.name,
                instance_type=f"{count}x-{gpu.v0Name}",
                region=region,
                gpu_model=model,
                gpu_raw_name=raw,
                gpu_count=count,
                vram_gib_per_gpu=vram,
                vcpus=vcpus,
                ram_gib=ram,
                disk_gib=disk,
                price_per_hour=round(price, 6),
                availability=Availability.IN_STOCK if in_stock else Availability.OUT,
                availability_count=max(0, gpu.max_count),
            )
            if record:
                out.append(record)
        return out
