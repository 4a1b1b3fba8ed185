"""TensorDock marketplace: per-location GPU stock with component pricing.

The v2 `locations` feed documents Bearer auth, so without a key the run is skipped. Both feed
generations parse: v2 `data.locations[].gpus[]` and the older v0 `hostnodes{}` map (one
location per hostnode, `specs.gpu{model: {amount, price}}`). A VM is priced as GPUs x the GPU
price plus vCPUs, RAM and storage at the per-unit rates. We price a standard per-GPU host share
(HOST_PER_GPU, capped at the location's maximum) so offers are comparable. Counts 1, 2, 4, 8 up
to the GPUs free now are emitted; a GPU with none free stays visible as one OUT single-GPU offer.
"""

from __future__ import annotations

import re
from typing import ClassVar

import httpx
from pydantic import ConfigDict, ValidationError

from app.gpus.normalize import normalize_gpu_name
from app.records import Availability, OfferRecord
from scrapers.base import FeedFormatError, MissingApiKey, ParseResult, RawPage
from scrapers.http import (
    FeedModel,
    HttpScraper,
    build_record,
    dedupe,
    get_text,
    load_json,
    validated,
)

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


class _Amount(FeedModel):
    model_config = ConfigDict(extra="ignore")

    amount: float = 0
    price: float = 0.0


class _GpuAmount(FeedModel):
    model_config = ConfigDict(extra="ignore")

    amount: int
    price: float


class _Specs(FeedModel):
    model_config = ConfigDict(extra="ignore")

    cpu: _Amount = _Amount()
    ram: _Amount = _Amount()
    storage: _Amount = _Amount()
    gpu: dict[str, _GpuAmount] = {}


class _Hostnode(FeedModel):
    model_config = ConfigDict(extra="ignore")

    location: dict[str, object] = {}
    specs: _Specs
    status: dict[str, object] = {}


def _cap(want: float, limit: float | None) -> float:
    return min(want, limit) if limit else want  # 0 = nothing free now, not a real limit


class TensordockScraper(HttpScraper):
    """TensorDock v2 locations (API key, Bearer)."""

    name: ClassVar[str] = "tensordock"
    display_name: ClassVar[str] = "TensorDock"
    kind: ClassVar[str] = "marketplace"
    needs_key: ClassVar[bool] = True
    default_url: ClassVar[str] = "https://dashboard.tensordock.com/api/v2/locations"

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """One GET; the feed lists every location at once."""
        if not self.config.api_key:
            raise MissingApiKey(
                "TensorDock needs an API key (GPUFIT_PROVIDERS__TENSORDOCK__API_KEY)"
            )
        headers = {"Authorization": f"Bearer {self.config.api_key}"}
        body = await get_text(client, self.base_url, headers=headers, max_bytes=self.max_bytes)
        return [RawPage(url=self.base_url, body=body)]

    def parse(self, pages: list[RawPage]) -> ParseResult:
        """data.locations[].gpus[] -> one record per location, GPU and count."""
        result = ParseResult()
        records: list[OfferRecord] = []
        for page in pages:
            data = load_json(page.body, page.url)
            if isinstance(data, dict) and isinstance(data.get("hostnodes"), dict):
                records.extend(self._v0(data["hostnodes"], result.warnings))
                continue
            inner = data.get("data") if isinstance(data, dict) else None
            locations = inner.get("locations") if isinstance(inner, dict) else None
            if not isinstance(locations, list):
                raise FeedFormatError(f"{page.url}: expected data.locations to be a list")
            for location in validated(_Location, locations, "location", result.warnings):
                region = ", ".join(
                    p for p in (location.city, location.stateprovince, location.country) if p
                )
                where = region or location.id
                for gpu in validated(_Gpu, location.gpus, f"GPU in {where}", result.warnings):
                    records.extend(self._records(gpu, where, result.warnings))
        result.records = dedupe(records, result.warnings)
        return result

    def _v0(self, hostnodes: dict[str, object], warnings: list[str]) -> list[OfferRecord]:
        """v0 hostnodes -> the v2 shape (one location per hostnode) -> records."""
        out: list[OfferRecord] = []
        for uuid, raw in hostnodes.items():
            try:
                node = _Hostnode.model_validate(raw)
            except ValidationError as exc:
                warnings.append(f"skipped hostnode {str(uuid)[:40]}: {exc.errors()[0]['msg']}")
                continue
            if node.status.get("online") is False or node.status.get("listed") is False:
                continue
            where = node.location
            region = ", ".join(
                str(p) for p in (where.get("city"), where.get("region"), where.get("country")) if p
            )
            specs = node.specs
            for model, offer in specs.gpu.items():
                gpu = _Gpu(
                    v0Name=model,
                    max_count=offer.amount,
                    price_per_hr=offer.price,
                    resources=_Resources(
                        max_vcpus=specs.cpu.amount,
                        max_ram_gb=specs.ram.amount,
                        max_storage_gb=specs.storage.amount,
                    ),
                    pricing=_Pricing(
                        per_vcpu_hr=specs.cpu.price,
                        per_gb_ram_hr=specs.ram.price,
                        per_gb_storage_hr=specs.storage.price,
                    ),
                )
                out.extend(self._records(gpu, region or str(uuid)[:40], warnings))
        return out

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
