"""Azure Retail Prices API: GPU VM list prices, on-demand with the paired Spot price merged in.

The feed has no GPU specs or availability: the GPU model and count come from the armSkuName
pattern table below. Windows, zero-price, reservation and DevTest rows are dropped, and so are
rows whose `effectiveEndDate` has passed. When a SKU and region has several current rows of one
kind, the latest `effectiveStartDate` wins (a "Spot" row over a legacy "Low Priority" one). A
Spot row is merged into the on-demand record of the same armSkuName + region, and a SKU that
only has a Spot row becomes a spot=True record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx
from pydantic import ConfigDict

from app.gpus.normalize import normalize_gpu_name
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

GPU_FILTER = (
    "serviceName eq 'Virtual Machines' and priceType eq 'Consumption' "
    "and contains(productName, 'Windows') eq false and contains(armSkuName, 'Standard_N')"
)
MAX_PAGES = 200


@dataclass(frozen=True)
class _Sku:
    pattern: re.Pattern[str]
    raw_gpu: str  # a name the normalizer understands, with the form factor spelled out
    memory_gib: float
    counts: dict[str, float]  # the SKU's leading vCPU number -> GPUs (fractional for NV A10 v5)


def _sku(pattern: str, raw: str, memory: float, counts: dict[str, float]) -> _Sku:
    return _Sku(re.compile(pattern, re.I), raw, memory, counts)


# From the Azure VM size docs (NC/ND/NV GPU series pages); count keyed by the size's vCPU number.
SKUS: tuple[_Sku, ...] = (
    _sku(r"^Standard_NC(\d+)ads_A100_v4$", "A100 80GB PCIe", 80, {"24": 1, "48": 2, "96": 4}),
    _sku(r"^Standard_ND(96)asr_v4$", "A100 40GB SXM4", 40, {"96": 8}),
    _sku(r"^Standard_ND(96)amsr_A100_v4$", "A100 80GB SXM4", 80, {"96": 8}),
    _sku(r"^Standard_NC(\d+)adi?s_H100_v5$", "H100 NVL", 94, {"40": 1, "80": 2}),
    _sku(r"^Standard_NCC(\d+)ads_H100_v5$", "H100 NVL", 94, {"40": 1}),  # confidential VM
    _sku(r"^Standard_ND(96)isr_H100_v5$", "H100 SXM5", 80, {"96": 8}),
    _sku(r"^Standard_ND(96)isr_H200_v5$", "H200 SXM5", 141, {"96": 8}),
    _sku(r"^Standard_ND(96)isr_MI300X_v5$", "MI300X", 192, {"96": 8}),
    _sku(r"^Standard_NC(\d+)as_T4_v3$", "Tesla T4", 16, {"4": 1, "8": 1, "16": 1, "64": 4}),
    _sku(r"^Standard_NC(\d+)r?s_v3$", "Tesla V100 16GB", 16, {"6": 1, "12": 2, "24": 4}),
    _sku(r"^Standard_ND(40)rs_v2$", "Tesla V100 SXM2 32GB", 32, {"40": 8}),
    _sku(
        r"^Standard_NV(\d+)adm?s_A10_v5$",
        "A10",
        24,
        {"6": 1 / 6, "12": 1 / 3, "18": 1 / 2, "36": 1, "72": 2},
    ),
)


class _Item(FeedModel):
    model_config = ConfigDict(extra="ignore")

    armSkuName: str
    armRegionName: str
    retailPrice: float
    currencyCode: str = "USD"
    unitOfMeasure: str = ""
    type: str = ""
    skuName: str = ""
    meterName: str = ""
    productName: str = ""
    reservationTerm: str | None = None
    effectiveStartDate: datetime | None = None
    effectiveEndDate: datetime | None = None


def _is_spot(item: _Item) -> bool:
    text = f"{item.skuName} {item.meterName}".lower()
    return "spot" in text or "low priority" in text


def _is_windows(item: _Item) -> bool:
    return bool(re.search(r"\bwin(dows)?\b", item.productName, re.I))


def _aware(when: datetime | None) -> datetime | None:
    return when.replace(tzinfo=UTC) if when is not None and when.tzinfo is None else when


def _better(new: _Item, old: _Item) -> bool:
    """Whether `new` should replace `old` for the same SKU, region and kind."""
    new_legacy = "low priority" in f"{new.skuName} {new.meterName}".lower()
    old_legacy = "low priority" in f"{old.skuName} {old.meterName}".lower()
    if new_legacy != old_legacy:
        return old_legacy  # a "Spot" row beats a legacy "Low Priority" one
    oldest = datetime.min.replace(tzinfo=UTC)
    return (_aware(new.effectiveStartDate) or oldest) > (_aware(old.effectiveStartDate) or oldest)


class AzureScraper(HttpScraper):
    """Azure GPU VM list prices (no auth, no availability)."""

    name: ClassVar[str] = "azure"
    display_name: ClassVar[str] = "Microsoft Azure"
    kind: ClassVar[str] = "list"
    default_url: ClassVar[str] = "https://prices.azure.com/api/retail/prices"

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """Follow NextPageLink until it is empty, an empty page arrives, or MAX_PAGES."""
        host = urlsplit(self.base_url).netloc.split(":")[0]
        url: str | None = self.base_url
        params: dict[str, str] | None = {"$filter": GPU_FILTER}
        pages: list[RawPage] = []
        while url and len(pages) < MAX_PAGES:
            body = await get_text(client, url, params=params, max_bytes=self.max_bytes)
            pages.append(RawPage(url=url, body=body))
            data = load_json(body, url)
            if not isinstance(data, dict) or not data.get("Items"):
                break
            link = data.get("NextPageLink")
            # A next link is untrusted input: only follow it on the feed's own host.
            if not isinstance(link, str) or urlsplit(link).netloc.split(":")[0] != host:
                break
            url, params = link, None
        return pages

    def clock(self) -> datetime:
        """Now, to tell expired price rows; tests replace it."""
        return datetime.now(UTC)

    def parse(self, pages: list[RawPage]) -> ParseResult:
        """Items of every page -> one record per armSkuName + region (spot merged)."""
        result = ParseResult()
        now = self.clock()
        on_demand: dict[tuple[str, str], _Item] = {}
        spot: dict[tuple[str, str], _Item] = {}
        for page in pages:
            for item in validated(_Item, _items(page), "malformed item", result.warnings):
                end = _aware(item.effectiveEndDate)
                if (
                    item.type != "Consumption"
                    or item.reservationTerm
                    or item.unitOfMeasure != "1 Hour"
                    or item.retailPrice <= 0
                    or _is_windows(item)
                    or (end is not None and end <= now)
                ):
                    continue
                key = (item.armSkuName, item.armRegionName)
                target = spot if _is_spot(item) else on_demand
                if key not in target or _better(item, target[key]):
                    target[key] = item
        records = []
        unknown: set[str] = set()
        for key in sorted(on_demand.keys() | spot.keys()):
            od, sp = on_demand.get(key), spot.get(key)
            base = od or sp
            assert base is not None
            found = _gpu(base.armSkuName)
            if found is None:
                unknown.add(base.armSkuName)
                continue
            sku, count = found
            vram = sku.memory_gib * count if count < 1 else sku.memory_gib
            record = build_record(
                result.warnings,
                f"{base.armSkuName} in {base.armRegionName}",
                provider=self.name,
                instance_type=base.armSkuName,
                region=base.armRegionName,
                spot=od is None,
                gpu_model=normalize_gpu_name(
                    sku.raw_gpu, memory_gib=sku.memory_gib, context=base.armSkuName
                ),
                gpu_raw_name=sku.raw_gpu,
                gpu_count=count,
                vram_gib_per_gpu=vram,  # a fractional A10 VM gets its share of the memory
                price_per_hour=od.retailPrice if od else None,
                spot_price_per_hour=sp.retailPrice if sp else None,
                currency=base.currencyCode,
            )
            if record:
                records.append(record)
        if unknown:
            shown = ", ".join(sorted(unknown)[:10])
            result.warnings.append(f"{len(unknown)} GPU SKUs not in the table: {shown}")
        result.records = dedupe(records, result.warnings)
        return result


def _items(page: RawPage) -> list[Any]:
    data = load_json(page.body, page.url)
    if not isinstance(data, dict) or not isinstance(data.get("Items"), list):
        raise FeedFormatError(f"{page.url}: expected an object with an Items list")
    return list(data["Items"])


def sku_gpu(arm_sku: str) -> tuple[str, float] | None:
    """The GPU of an Azure VM size (raw name with form factor, GiB per GPU), or None."""
    found = _gpu(arm_sku)
    return None if found is None else (found[0].raw_gpu, found[0].memory_gib)


def _gpu(arm_sku: str) -> tuple[_Sku, float] | None:
    for sku in SKUS:
        match = sku.pattern.match(arm_sku)
        if match and match.group(1) in sku.counts:
            return sku, sku.counts[match.group(1)]
    return None
