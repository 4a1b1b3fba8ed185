"""Vultr: Cloud GPU (`vcg`) plans and bare-metal GPU plans from the public plans API (no key).

`/v2/plans` lists Cloud GPU plans with `gpu_type` ("NVIDIA_A100") and the plan's total GPU
memory; a plan with less memory than one GPU is a fractional vGPU slice (gpu_count below 1,
VRAM = the slice). `/v2/plans-metal` names the GPU only in the plan id
("vbm-112c-2048gb-8-h100-gpu": 8x H100). Each plan becomes one record per location listed; the
feed has no stock levels. Bare metal also lists a preemptible hourly price.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar
from urllib.parse import urlencode

import httpx
from pydantic import ConfigDict

from app.gpus.normalize import normalize_gpu_name
from app.records import OfferRecord
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

MAX_PAGES = 20
# One GPU's memory (GB) per Vultr gpu_type, from the Vultr Cloud GPU docs.
GPU_MEMORY = {"A100": 80, "A40": 48, "A16": 16, "L40S": 48, "H100": 80, "GH200": 96,
              "MI300X": 192, "MI325X": 256, "L40": 48, "B200": 180}  # fmt: skip
_METAL_GPU = re.compile(r"-(?P<count>\d+)-(?P<model>[a-z0-9]+)-gpu$")
_METAL_SINGLE = re.compile(r"-(?P<model>[a-z0-9]+)-gpu$")


class _Plan(FeedModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    type: str = ""
    vcpu_count: float | None = None
    cpu_threads: float | None = None
    ram: float | None = None  # MB
    disk: float | None = None  # GB
    hourly_cost: float
    hourly_cost_preemptible: float | None = None
    locations: list[str] = []
    gpu_vram_gb: float | None = None
    gpu_type: str | None = None


class VultrScraper(HttpScraper):
    """Vultr Cloud GPU and bare-metal GPU plans (public, no key)."""

    name: ClassVar[str] = "vultr"
    display_name: ClassVar[str] = "Vultr"
    kind: ClassVar[str] = "list"
    default_url: ClassVar[str] = "https://api.vultr.com/v2"

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """Every page of /plans?type=vcg and /plans-metal (cursor in meta.links.next)."""
        base = self.base_url.rstrip("/")
        pages: list[RawPage] = []
        for path, params in (("/plans", {"type": "vcg"}), ("/plans-metal", {})):
            cursor = ""
            for _ in range(MAX_PAGES):
                query = {**params, "per_page": "500", **({"cursor": cursor} if cursor else {})}
                url = f"{base}{path}?{urlencode(query)}"
                body = await get_text(client, url, max_bytes=self.max_bytes)
                pages.append(RawPage(url=url, body=body))
                data = load_json(body, url)
                links = (data.get("meta") or {}).get("links") if isinstance(data, dict) else None
                cursor = str((links or {}).get("next") or "")
                if not cursor:
                    break
        return pages

    def parse(self, pages: list[RawPage]) -> ParseResult:
        """plans[] (type vcg) and plans_metal[] (GPU ids) -> one record per location."""
        result = ParseResult()
        records: list[OfferRecord] = []
        for page in pages:
            data = load_json(page.body, page.url)
            plans: Any = None
            metal = False
            if isinstance(data, dict) and isinstance(data.get("plans"), list):
                plans = data["plans"]
            elif isinstance(data, dict) and isinstance(data.get("plans_metal"), list):
                plans, metal = data["plans_metal"], True
            if plans is None:
                raise FeedFormatError(f"{page.url}: expected plans or plans_metal")
            for plan in validated(_Plan, plans, "plan", result.warnings):
                gpu = self._metal_gpu(plan) if metal else self._cloud_gpu(plan, result.warnings)
                if gpu is None:
                    continue
                records.extend(self._records(plan, *gpu, result.warnings))
        result.records = dedupe(records, result.warnings)
        return result

    @staticmethod
    def _cloud_gpu(plan: _Plan, warnings: list[str]) -> tuple[str, float, float] | None:
        if plan.type != "vcg" or not plan.gpu_type:
            return None  # CPU plan
        model = plan.gpu_type.split("_", 1)[-1].upper()
        full = GPU_MEMORY.get(model)
        if full is None or not plan.gpu_vram_gb:
            warnings.append(f"skipped {plan.id[:60]}: GPU {plan.gpu_type[:30]} memory unknown")
            return None
        count = plan.gpu_vram_gb / full
        count = round(count) if count >= 1 else round(count, 4)
        per_gpu = plan.gpu_vram_gb if count < 1 else plan.gpu_vram_gb / count
        return model, count, per_gpu

    @staticmethod
    def _metal_gpu(plan: _Plan) -> tuple[str, float, float] | None:
        match = _METAL_GPU.search(plan.id) or _METAL_SINGLE.search(plan.id)
        if not match:
            return None  # CPU-only bare metal
        model = match["model"].upper()
        count = float(match.groupdict().get("count") or 1)
        return model, count, float(GPU_MEMORY.get(model, 0)) or 0.0

    def _records(
        self, plan: _Plan, model: str, count: float, vram: float, warnings: list[str]
    ) -> list[OfferRecord]:
        out = []
        for location in plan.locations:
            record = build_record(
                warnings,
                f"{plan.id} in {location}",
                provider=self.name,
                instance_type=plan.id,
                region=location,
                gpu_model=normalize_gpu_name(model, memory_gib=vram or None, context=plan.id),
                gpu_raw_name=model,
                gpu_count=count,
                vram_gib_per_gpu=vram or None,
                vcpus=plan.vcpu_count or plan.cpu_threads,
                ram_gib=round(plan.ram / 1024, 1) if plan.ram else None,
                disk_gib=plan.disk,
                price_per_hour=plan.hourly_cost if plan.hourly_cost > 0 else None,
                spot_price_per_hour=plan.hourly_cost_preemptible or None,
            )
            if record:
                out.append(record)
        return out
