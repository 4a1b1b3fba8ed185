"""RunPod GPU types over GraphQL: per-GPU prices for Secure and Community Cloud, stock levels.

The `gpuTypes` query needs no key (other open-source collectors read it keyless); a configured
key is sent as a Bearer token. Each GPU type becomes one instance type per cloud ("secure" /
"community") and GPU count (1, 2, 4, 8 up to maxGpuCount, 1 when the feed omits it), priced
linearly per GPU at `lowestPrice.uninterruptablePrice` (the current on-demand price) when
present, else the list price. Stock is queried for one GPU without a data center
(RunPod-wide), so region is "any"; a count above `maxUnreservedGpuCount` or not in
`availableGpuCounts` is OUT. Responses recorded without per-cloud aliases carry one
`lowestPrice` for both clouds: a null price there means neither cloud has capacity.
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

_LOWEST = (
    "{ stockStatus maxUnreservedGpuCount availableGpuCounts minimumBidPrice uninterruptablePrice }"
)
QUERY = (
    "query GpuTypes { gpuTypes { id displayName manufacturer memoryInGb secureCloud "
    "communityCloud maxGpuCount securePrice communityPrice secureSpotPrice communitySpotPrice "
    f"secure: lowestPrice(input: {{gpuCount: 1, secureCloud: true}}) {_LOWEST} "
    f"community: lowestPrice(input: {{gpuCount: 1, secureCloud: false}}) {_LOWEST} }} }}"
)
COUNTS = (1, 2, 4, 8)
REGION = "any"
_STOCK = {
    "high": Availability.IN_STOCK,
    "medium": Availability.LIMITED,
    "low": Availability.LIMITED,
}


class _Lowest(FeedModel):
    model_config = ConfigDict(extra="ignore")

    stockStatus: str | None = None
    maxUnreservedGpuCount: int | None = None
    availableGpuCounts: list[int] | None = None
    uninterruptablePrice: float | None = None
    minimumBidPrice: float | None = None


class _GpuType(FeedModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    displayName: str = ""
    memoryInGb: float | None = None
    secureCloud: bool = False
    communityCloud: bool = False
    maxGpuCount: int | None = None
    securePrice: float | None = None
    communityPrice: float | None = None
    secureSpotPrice: float | None = None
    communitySpotPrice: float | None = None
    secure: _Lowest | None = None
    community: _Lowest | None = None
    lowestPrice: _Lowest | None = None  # un-aliased: the cheapest over both clouds


def _counts(gpu: _GpuType, lowest: _Lowest | None) -> list[int]:
    if gpu.maxGpuCount is not None:
        return [c for c in COUNTS if c <= max(1, gpu.maxGpuCount)]
    if lowest is not None and lowest.availableGpuCounts:
        return [c for c in COUNTS if c <= max(lowest.availableGpuCounts)]
    return [1]  # nothing says more than one GPU can be rented together


def _lowest_for(gpu: _GpuType, cloud: str, list_price: float | None) -> _Lowest | None:
    """The stock/price block for one cloud: its alias, else the shared `lowestPrice`."""
    own = gpu.secure if cloud == "secure" else gpu.community
    if own is not None or gpu.lowestPrice is None:
        return own
    shared = gpu.lowestPrice
    if shared.uninterruptablePrice is None:
        return shared  # no price anywhere: neither cloud has capacity
    if list_price is not None and abs(shared.uninterruptablePrice - list_price) < 1e-9:
        return shared  # the cheapest offer is this cloud's
    return None  # the cheapest is on the other cloud: this one is not known


def _availability(lowest: _Lowest | None, count: int) -> tuple[Availability, int | None]:
    if lowest is None:
        return Availability.UNKNOWN, None
    if lowest.stockStatus is not None:
        level = _STOCK.get(lowest.stockStatus.lower(), Availability.OUT)
    elif lowest.uninterruptablePrice is not None or lowest.availableGpuCounts:
        level = Availability.IN_STOCK  # a quoted price without a level: rentable now
    else:
        level = Availability.OUT  # null stock and no price: sold out
    free = lowest.maxUnreservedGpuCount
    if (free is not None and count > free) or (
        lowest.availableGpuCounts is not None and count not in lowest.availableGpuCounts
    ):
        level = Availability.OUT
    return level, free


class RunpodScraper(HttpScraper):
    """RunPod pods (keyless GraphQL; a configured key is sent as Bearer)."""

    name: ClassVar[str] = "runpod"
    display_name: ClassVar[str] = "RunPod"
    kind: ClassVar[str] = "marketplace"
    default_url: ClassVar[str] = "https://api.runpod.io/graphql"

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """One GraphQL POST; a key goes in a header, not the URL, to keep it out of logs."""
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        body = await post_json_text(
            client, self.base_url, {"query": QUERY}, headers=headers, max_bytes=self.max_bytes
        )
        return [RawPage(url=self.base_url, body=body)]

    def parse(self, pages: list[RawPage]) -> ParseResult:
        """data.gpuTypes -> records per cloud and GPU count."""
        result = ParseResult()
        records: list[OfferRecord] = []
        for page in pages:
            data = load_json(page.body, page.url)
            if isinstance(data, dict) and data.get("errors") and not data.get("data"):
                raise FeedFormatError(f"{page.url}: GraphQL errors: {str(data['errors'])[:200]}")
            types = data.get("data", {}).get("gpuTypes") if isinstance(data, dict) else None
            if not isinstance(types, list):
                raise FeedFormatError(f"{page.url}: expected data.gpuTypes to be a list")
            for gpu in validated(_GpuType, types, "GPU type", result.warnings):
                records.extend(self._records(gpu, result.warnings))
        result.records = dedupe(records, result.warnings)
        return result

    def _records(self, gpu: _GpuType, warnings: list[str]) -> list[OfferRecord]:
        out = []
        clouds = (
            ("secure", gpu.secureCloud, gpu.securePrice, gpu.secureSpotPrice, gpu.secure),
            ("community", gpu.communityCloud, gpu.communityPrice, gpu.communitySpotPrice,
             gpu.community),
        )  # fmt: skip
        model = normalize_gpu_name(
            gpu.id, memory_gib=gpu.memoryInGb, context=f"runpod {gpu.displayName}"
        )
        for cloud, offered, list_price, spot, _ in clouds:
            lowest = _lowest_for(gpu, cloud, list_price)
            price = lowest.uninterruptablePrice if lowest and lowest.uninterruptablePrice else None
            price = price or list_price
            if not offered or not price or price <= 0:
                continue
            for count in _counts(gpu, lowest):
                availability, free = _availability(lowest, count)
                record = build_record(
                    warnings,
                    f"{gpu.id} ({cloud})",
                    provider=self.name,
                    instance_type=f"{count}x {gpu.id} ({cloud})",
                    region=REGION,
                    gpu_model=model,
                    gpu_raw_name=gpu.id,
                    gpu_count=count,
                    vram_gib_per_gpu=gpu.memoryInGb or None,
                    price_per_hour=round(price * count, 6),
                    spot_price_per_hour=round(spot * count, 6) if spot and spot > 0 else None,
                    availability=availability,
                    availability_count=free,
                )
                if record:
                    out.append(record)
        return out
