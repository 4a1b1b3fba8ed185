"""Google Cloud: GPU VM prices assembled from Cloud Billing Catalog SKUs (Compute Engine).

The catalog prices resources, not machines: a GPU VM costs vCPUs x core price + GiB x RAM price
+ GPUs x GPU price, each SKU listing the regions it applies to. Machine shapes (vCPUs, RAM, GPU
count) come from the table below (Compute Engine "GPU machine types" docs) for the A2, A3 and G2
families, whose GPUs are attached and billed per GPU. A region gets a record when all three
prices exist there; spot (Preemptible) prices are merged the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx
from pydantic import ConfigDict, ValidationError

from app.gpus.normalize import normalize_gpu_name
from app.records import OfferRecord
from scrapers.base import FeedFormatError, MissingApiKey, ParseResult, RawPage
from scrapers.http import FeedModel, HttpScraper, build_record, dedupe, get_text, load_json

PAGE_SIZE = "5000"
MAX_PAGES = 100


@dataclass(frozen=True)
class Machine:
    family: str  # key of the family's core/RAM SKUs
    accelerator: str  # GCP accelerator type id
    vcpus: int
    ram_gib: float
    gpus: int
    vram_gib: float


def _shapes() -> dict[str, Machine]:
    out: dict[str, Machine] = {}
    for n in (1, 2, 4, 8):
        out[f"a2-highgpu-{n}g"] = Machine("a2", "nvidia-tesla-a100", 12 * n, 85 * n, n, 40)
        out[f"a2-ultragpu-{n}g"] = Machine("a2", "nvidia-a100-80gb", 12 * n, 170 * n, n, 80)
        out[f"a3-highgpu-{n}g"] = Machine("a3", "nvidia-h100-80gb", 26 * n, 234 * n, n, 80)
    out["a2-megagpu-16g"] = Machine("a2", "nvidia-tesla-a100", 96, 1360, 16, 40)
    out["a3-megagpu-8g"] = Machine("a3plus", "nvidia-h100-mega-80gb", 208, 1872, 8, 80)
    for vcpus, gpus in ((4, 1), (8, 1), (12, 1), (16, 1), (24, 2), (32, 1), (48, 4), (96, 8)):
        out[f"g2-standard-{vcpus}"] = Machine("g2", "nvidia-l4", vcpus, 4 * vcpus, gpus, 24)
    return out


MACHINES = _shapes()

# SKU description stems -> accelerator type id ("Nvidia Tesla A100 GPU running in Americas").
GPU_SKUS = {
    "nvidia tesla a100": "nvidia-tesla-a100",
    "nvidia tesla a100 80gb": "nvidia-a100-80gb",
    "nvidia a100 80gb": "nvidia-a100-80gb",
    "nvidia h100 80gb": "nvidia-h100-80gb",
    "nvidia h100 80gb mega": "nvidia-h100-mega-80gb",
    "nvidia h100 80gb plus": "nvidia-h100-mega-80gb",
    "nvidia l4": "nvidia-l4",
}
# Core/RAM SKU description stems -> family key ("A3Plus Instance Core running in Americas").
FAMILY_SKUS = {"a2 instance": "a2", "a3 instance": "a3", "a3plus instance": "a3plus",
               "g2 instance": "g2"}  # fmt: skip
# Both spot spellings are live: "Spot Preemptible Nvidia L4 GPU running in Americas" and
# "Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas".
_DESCRIPTION = re.compile(
    r"^(?:spot preemptible )?(?P<stem>.+?) (?P<kind>core|ram|gpu)"
    r"(?: attached to spot preemptible vms)?(?: running in .*)?$",
    re.I,
)


class _Money(FeedModel):
    model_config = ConfigDict(extra="ignore")

    currencyCode: str = "USD"
    units: str | int = "0"
    nanos: int = 0


class _Tier(FeedModel):
    model_config = ConfigDict(extra="ignore")

    startUsageAmount: float = 0
    unitPrice: _Money


class _Expression(FeedModel):
    model_config = ConfigDict(extra="ignore")

    usageUnit: str = ""
    tieredRates: list[_Tier] = []


class _PricingInfo(FeedModel):
    model_config = ConfigDict(extra="ignore")

    pricingExpression: _Expression


class _Category(FeedModel):
    model_config = ConfigDict(extra="ignore")

    resourceFamily: str = ""
    resourceGroup: str = ""
    usageType: str = ""


class _Sku(FeedModel):
    model_config = ConfigDict(extra="ignore")

    skuId: str = ""
    description: str
    category: _Category
    serviceRegions: list[str] = []
    pricingInfo: list[_PricingInfo] = []


def _hourly(sku: _Sku) -> tuple[float, str] | None:
    if not sku.pricingInfo:
        return None
    expr = sku.pricingInfo[0].pricingExpression
    if expr.usageUnit not in ("h", "GiBy.h"):
        return None
    for tier in expr.tieredRates:
        money = tier.unitPrice
        value = int(money.units) + money.nanos / 1e9
        if value > 0:
            return value, money.currencyCode
    return None


class GcpScraper(HttpScraper):
    """GCP Cloud Billing Catalog (API key)."""

    name: ClassVar[str] = "gcp"
    display_name: ClassVar[str] = "Google Cloud"
    kind: ClassVar[str] = "list"
    needs_key: ClassVar[bool] = True
    default_url: ClassVar[str] = (
        "https://cloudbilling.googleapis.com/v1/services/6F81-5844-456A/skus"
    )

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """Every SKU page, following nextPageToken."""
        if not self.config.api_key:
            raise MissingApiKey("GCP needs a Billing API key (GPUFIT_PROVIDERS__GCP__API_KEY)")
        pages: list[RawPage] = []
        token = ""
        while len(pages) < MAX_PAGES:
            params = {"pageSize": PAGE_SIZE}
            if token:
                params["pageToken"] = token
            # Google APIs take the key in a header too, which keeps it out of every URL.
            headers = {"X-Goog-Api-Key": self.config.api_key}
            body = await get_text(
                client, self.base_url, params=params, headers=headers, max_bytes=self.max_bytes
            )
            # The stored URL names the page but never the key.
            pages.append(RawPage(url=f"{self.base_url}?pageToken={token}", body=body))
            data = load_json(body)
            token = data.get("nextPageToken", "") if isinstance(data, dict) else ""
            if not isinstance(token, str) or not token:
                break
        return pages

    def parse(self, pages: list[RawPage]) -> ParseResult:
        """SKUs -> per-resource prices per (region, spot) -> machine records."""
        result = ParseResult()
        # (kind, stem key, region, spot) -> (price per unit-hour, currency)
        prices: dict[tuple[str, str, str, bool], tuple[float, str]] = {}
        for page in pages:
            data = load_json(page.body, page.url)
            if not isinstance(data, dict) or not isinstance(data.get("skus"), list):
                raise FeedFormatError(f"{page.url}: expected an object with a skus list")
            for raw in data["skus"]:
                self._add_sku(raw, prices, result.warnings)
        regions = sorted({key[2] for key in prices})
        records: list[OfferRecord] = []
        for name, machine in MACHINES.items():
            for region in regions:
                od = self._price(machine, region, False, prices)
                sp = self._price(machine, region, True, prices)
                if od is None and sp is None:
                    continue
                record = build_record(
                    result.warnings,
                    f"{name} in {region}",
                    provider=self.name,
                    instance_type=name,
                    region=region,
                    spot=od is None,
                    gpu_model=normalize_gpu_name(
                        machine.accelerator, memory_gib=machine.vram_gib, context=name
                    ),
                    gpu_raw_name=machine.accelerator,
                    gpu_count=machine.gpus,
                    vram_gib_per_gpu=machine.vram_gib,
                    vcpus=machine.vcpus,
                    ram_gib=machine.ram_gib,
                    price_per_hour=od[0] if od else None,
                    spot_price_per_hour=sp[0] if sp else None,
                    currency=(od or sp or (0.0, "USD"))[1],
                )
                if record:
                    records.append(record)
        result.records = dedupe(records, result.warnings)
        return result

    @staticmethod
    def _add_sku(
        raw: Any, prices: dict[tuple[str, str, str, bool], tuple[float, str]], warnings: list[str]
    ) -> None:
        try:
            sku = _Sku.model_validate(raw)
        except (ValidationError, ValueError) as exc:
            warnings.append(f"skipped SKU: {str(exc)[:120]}")
            return
        if sku.category.resourceFamily != "Compute" or sku.category.usageType not in (
            "OnDemand",
            "Preemptible",
        ):
            return
        match = _DESCRIPTION.match(sku.description.strip())
        if not match:
            return
        kind, stem = match["kind"].lower(), match["stem"].lower()
        key = GPU_SKUS.get(stem) if kind == "gpu" else FAMILY_SKUS.get(stem)
        if key is None:
            return
        try:
            hourly = _hourly(sku)
        except ValueError:
            warnings.append(f"skipped SKU {sku.skuId}: bad unit price")
            return
        if hourly is None:
            return
        spot = sku.category.usageType == "Preemptible"
        for region in sku.serviceRegions:
            prices[(kind, key, region, spot)] = hourly

    @staticmethod
    def _price(
        machine: Machine,
        region: str,
        spot: bool,
        prices: dict[tuple[str, str, str, bool], tuple[float, str]],
    ) -> tuple[float, str] | None:
        core = prices.get(("core", machine.family, region, spot))
        ram = prices.get(("ram", machine.family, region, spot))
        gpu = prices.get(("gpu", machine.accelerator, region, spot))
        if not (core and ram and gpu):
            return None
        total = machine.vcpus * core[0] + machine.ram_gib * ram[0] + machine.gpus * gpu[0]
        return round(total, 6), gpu[1]
