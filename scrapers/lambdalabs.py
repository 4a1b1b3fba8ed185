"""Lambda Cloud instance types: whole-instance prices and the regions that have capacity now.

A type with capacity becomes one in-stock record per listed region. A sold-out type (empty region
list) still becomes one record, region "any" with availability OUT, so it stays visible.
"""

from __future__ import annotations

import re
from typing import ClassVar

import httpx
from pydantic import ConfigDict, ValidationError

from app.gpus.normalize import normalize_gpu_name
from app.records import Availability, OfferRecord
from scrapers.base import FeedFormatError, MissingApiKey, ParseResult, RawPage
from scrapers.http import FeedModel, HttpScraper, build_record, dedupe, get_text, load_json

SOLD_OUT_REGION = "any"
_NAME_COUNT = re.compile(r"^gpu_(\d+)x_", re.I)  # gpu_8x_h100_sxm5
_COUNT_PREFIX = re.compile(r"^\s*(\d+)\s*x\s+", re.I)  # "8x H100 (80 GB SXM5)"


def _count_from_names(it: _Type) -> int | None:
    """GPUs per instance from the type name or description when specs.gpus is missing."""
    for pattern, text in ((_NAME_COUNT, it.name), (_COUNT_PREFIX, it.description)):
        match = pattern.match(text)
        if match:
            return int(match.group(1))
    return None


class _Specs(FeedModel):
    model_config = ConfigDict(extra="ignore")

    vcpus: float | None = None
    memory_gib: float | None = None
    storage_gib: float | None = None
    gpus: int | None = None  # absent in Lambda's own documented example: read from the name


class _Type(FeedModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    description: str = ""
    gpu_description: str = ""
    price_cents_per_hour: float  # an integer, or a numeric string in the documented example
    specs: _Specs


class _Region(FeedModel):
    model_config = ConfigDict(extra="ignore")

    name: str


class _Entry(FeedModel):
    model_config = ConfigDict(extra="ignore")

    instance_type: _Type
    regions_with_capacity_available: list[_Region] = []


class LambdalabsScraper(HttpScraper):
    """Lambda Cloud (API key, Bearer)."""

    name: ClassVar[str] = "lambdalabs"
    display_name: ClassVar[str] = "Lambda"
    kind: ClassVar[str] = "marketplace"
    needs_key: ClassVar[bool] = True
    default_url: ClassVar[str] = "https://cloud.lambdalabs.com/api/v1/instance-types"

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """One GET with the key as a Bearer token."""
        if not self.config.api_key:
            raise MissingApiKey("Lambda needs an API key (GPUFIT_PROVIDERS__LAMBDALABS__API_KEY)")
        headers = {"Authorization": f"Bearer {self.config.api_key}"}
        body = await get_text(client, self.base_url, headers=headers, max_bytes=self.max_bytes)
        return [RawPage(url=self.base_url, body=body)]

    def parse(self, pages: list[RawPage]) -> ParseResult:
        """data{name: {instance_type, regions_with_capacity_available}} -> records."""
        result = ParseResult()
        records: list[OfferRecord] = []
        for page in pages:
            data = load_json(page.body, page.url)
            if not isinstance(data, dict) or not isinstance(data.get("data"), dict):
                raise FeedFormatError(f"{page.url}: expected an object with a data mapping")
            for key, raw in data["data"].items():
                try:
                    entry = _Entry.model_validate(raw)
                except ValidationError as exc:
                    result.warnings.append(f"skipped {str(key)[:60]}: {exc.errors()[0]['msg']}")
                    continue
                records.extend(self._records(entry, result.warnings))
        result.records = dedupe(records, result.warnings)
        return result

    def _records(self, entry: _Entry, warnings: list[str]) -> list[OfferRecord]:
        it = entry.instance_type
        gpus = it.specs.gpus if it.specs.gpus is not None else _count_from_names(it)
        if gpus is None:
            warnings.append(f"skipped {it.name[:60]}: no GPU count in specs, name or description")
            return []
        if gpus < 1:
            return []  # CPU-only types
        raw_gpu = it.gpu_description or _COUNT_PREFIX.sub("", it.description) or it.name
        memory = re.search(r"(\d+)\s*GB", raw_gpu)
        vram = float(memory.group(1)) if memory else None
        regions = [r.name for r in entry.regions_with_capacity_available] or [SOLD_OUT_REGION]
        out = []
        for region in regions:
            available = region != SOLD_OUT_REGION
            record = build_record(
                warnings,
                it.name,
                provider=self.name,
                instance_type=it.name,
                region=region,
                gpu_model=normalize_gpu_name(raw_gpu, memory_gib=vram, context=it.name),
                gpu_raw_name=raw_gpu,
                gpu_count=gpus,
                vram_gib_per_gpu=vram,
                vcpus=it.specs.vcpus,
                ram_gib=it.specs.memory_gib,
                disk_gib=it.specs.storage_gib,
                price_per_hour=it.price_cents_per_hour / 100,
                availability=Availability.IN_STOCK if available else Availability.OUT,
            )
            if record:
                out.append(record)
        return out
