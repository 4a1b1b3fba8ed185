"""CloudRift: VM instance types with per-datacenter node counts (public, no key).

`POST /api/v1/instance-types/list` returns instance types (`brand_short` names the GPU) whose
variants carry a GPU count, memory and disk in bytes, a price in US cents per hour, and node
counts per datacenter (`available_nodes_per_dc` free now, else `nodes_per_dc`). One record per
variant and datacenter, with the free node count as availability.
"""

from __future__ import annotations

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
    load_json,
    post_json_text,
    validated,
)

API_VERSION = "2025-03-21"
QUERY = {
    "version": API_VERSION,
    "data": {"selector": {"ByServiceAndLocation": {"services": ["vm"]}}},
}
GIB = 1024**3


class _Variant(FeedModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    gpu_count: float = 0
    cpu_count: float | None = None
    logical_cpu_count: float | None = None
    dram: float | None = None  # bytes
    disk: float | None = None  # bytes
    vram: float | None = None  # bytes, per GPU
    cost_per_hour: float  # US cents
    nodes_per_dc: dict[str, int] = {}
    available_nodes_per_dc: dict[str, int] | None = None


class _Type(FeedModel):
    model_config = ConfigDict(extra="ignore")

    name: str = ""
    brand_short: str = ""
    variants: list[_Variant] = []


class CloudriftScraper(HttpScraper):
    """CloudRift instance types (public, no key)."""

    name: ClassVar[str] = "cloudrift"
    display_name: ClassVar[str] = "CloudRift"
    kind: ClassVar[str] = "marketplace"
    default_url: ClassVar[str] = "https://api.cloudrift.ai/api/v1/instance-types/list"

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """One POST selecting VM instance types."""
        body = await post_json_text(client, self.base_url, QUERY, max_bytes=self.max_bytes)
        return [RawPage(url=self.base_url, body=body)]

    def parse(self, pages: list[RawPage]) -> ParseResult:
        """data.instance_types[].variants[] -> one record per variant and datacenter."""
        result = ParseResult()
        records: list[OfferRecord] = []
        for page in pages:
            data = load_json(page.body, page.url)
            inner = data.get("data") if isinstance(data, dict) else None
            types = inner.get("instance_types") if isinstance(inner, dict) else None
            if not isinstance(types, list):
                raise FeedFormatError(f"{page.url}: expected data.instance_types")
            for it in validated(_Type, types, "instance type", result.warnings):
                for variant in it.variants:
                    records.extend(self._records(it, variant, result.warnings))
        result.records = dedupe(records, result.warnings)
        return result

    def _records(self, it: _Type, v: _Variant, warnings: list[str]) -> list[OfferRecord]:
        if v.gpu_count <= 0 or v.cost_per_hour <= 0:
            return []
        raw = it.brand_short or it.name or v.name
        vram = round(v.vram / GIB, 1) if v.vram else None
        free = v.available_nodes_per_dc if v.available_nodes_per_dc is not None else None
        out = []
        for dc in sorted(set(v.nodes_per_dc) | set(free or {})):
            nodes = (free or {}).get(dc) if free is not None else None
            if free is None:
                level, count = Availability.UNKNOWN, None
            else:
                level = Availability.IN_STOCK if nodes else Availability.OUT
                count = int(nodes or 0)
            record = build_record(
                warnings,
                f"{v.name} in {dc}",
                provider=self.name,
                instance_type=v.name,
                region=dc,
                gpu_model=normalize_gpu_name(raw, memory_gib=vram, context=v.name),
                gpu_raw_name=raw,
                gpu_count=v.gpu_count,
                vram_gib_per_gpu=vram,
                vcpus=v.logical_cpu_count or v.cpu_count,
                ram_gib=round(v.dram / GIB, 1) if v.dram else None,
                disk_gib=round(v.disk / GIB, 1) if v.disk else None,
                price_per_hour=round(v.cost_per_hour / 100, 6),
                availability=level,
                availability_count=count,
            )
            if record:
                out.append(record)
        return out
