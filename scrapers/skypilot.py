"""The public skypilot-catalog CSV feed: a broad fallback for clouds with no direct scraper.

Each cloud's `vms.csv` lists instance types with GPU model, count and hourly prices (whole
instance, USD). The same parser loads the bundled offline sample (`app/sample/`).
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
from typing import Any, ClassVar

import httpx
from pydantic import ValidationError

from app.gpus.normalize import normalize_gpu_name
from app.records import OfferRecord
from scrapers.base import FeedFormatError, ParseResult, RawPage, Scraper, ScraperConfig
from scrapers.http import get_text

CATALOG_BASE = "https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/master/catalogs"

# Our provider ids where they differ from SkyPilot's cloud names.
PROVIDER_FOR_CLOUD = {"lambda": "lambdalabs", "vast": "vastai"}

# Clouds whose GpuInfo SizeInMiB is the total over all GPUs rather than per GPU (see the
# sample README); everywhere else it is per GPU.
SIZE_IS_TOTAL = frozenset({"vast", "primeintellect"})

# Clouds not in catalogs/v8, read from the v6 copy which has the same columns.
CATALOG_VERSION = {"paperspace": "v6", "fluidstack": "v6", "do": "v6"}

# Clouds covered by this fallback: the ones without a direct scraper in this package.
FALLBACK_CLOUDS = (
    "cudo",
    "do",
    "fluidstack",
    "jarvislabs",
    "nebius",
    "paperspace",
    "primeintellect",
    "seeweb",
)

REQUIRED_COLUMNS = frozenset({"InstanceType", "AcceleratorName", "AcceleratorCount", "Price"})
MAX_ROWS = 200_000


def provider_for_cloud(cloud: str) -> str:
    return PROVIDER_FOR_CLOUD.get(cloud, cloud)


def catalog_url(cloud: str) -> str:
    return f"{CATALOG_BASE}/{CATALOG_VERSION.get(cloud, 'v8')}/{cloud}/vms.csv"


def _number(value: str | None) -> float | None:
    if value is None or not value.strip():
        return None
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"not a finite number: {value!r}")
    return number


def _lower_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k).lower(): _lower_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_lower_keys(v) for v in value]
    return value


def _gpu_info(text: str) -> dict[str, Any] | None:
    """Parse GpuInfo (a Python-literal or JSON dict) with lower-cased keys; None if absent."""
    text = text.strip()
    if not text.startswith("{"):
        return None  # paperspace: only the GPU name
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = ast.literal_eval(text)  # literal_eval, never eval: the feed is untrusted
    if not isinstance(parsed, dict):
        raise ValueError("GpuInfo is not a dict")
    result: dict[str, Any] = _lower_keys(parsed)
    return result


def per_gpu_memory_gib(cloud: str, info: dict[str, Any] | None, count: float) -> float | None:
    """Per-GPU memory from GpuInfo, undoing each cloud's convention; None when unknown."""
    if not info:
        return None
    gpus = info.get("gpus") or []
    if not gpus or not isinstance(gpus, list) or not isinstance(gpus[0], dict):
        return None
    size = (gpus[0].get("memoryinfo") or {}).get("sizeinmib")
    if not isinstance(size, int | float | str):
        return None
    try:
        mib = float(size)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(mib) or mib <= 0:
        return None  # seeweb lists RTX PRO 6000 with 0
    if cloud in SIZE_IS_TOTAL:
        mib /= count
    return round(mib / 1024, 2)


def parse_catalog_csv(cloud: str, text: str) -> ParseResult:
    """Parse one cloud's vms.csv into records; rows with no GPU or price are skipped with a note."""
    reader = csv.DictReader(io.StringIO(text))
    header = set(reader.fieldnames or [])
    missing = REQUIRED_COLUMNS - header
    if missing:
        raise FeedFormatError(f"{cloud} vms.csv lacks columns {sorted(missing)}")
    provider = provider_for_cloud(cloud)
    result = ParseResult()
    for line_no, row in enumerate(reader, start=2):
        if line_no > MAX_ROWS:
            raise FeedFormatError(f"{cloud} vms.csv has more than {MAX_ROWS} rows")
        if None in row or None in row.values():
            raise FeedFormatError(f"{cloud} vms.csv line {line_no} has the wrong number of fields")
        accelerator = (row.get("AcceleratorName") or "").strip()
        if not accelerator:
            continue  # CPU-only instance
        try:
            record = _row_to_record(cloud, provider, row)
        except (ValueError, SyntaxError, ValidationError) as exc:
            result.warnings.append(f"line {line_no}: skipped ({_short(exc)})")
            continue
        if record is None:
            result.warnings.append(f"line {line_no}: skipped (no price)")
            continue
        result.records.append(record)
    return result


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200]


def _row_to_record(cloud: str, provider: str, row: dict[str, str]) -> OfferRecord | None:
    count = _number(row.get("AcceleratorCount"))
    if count is None or count <= 0:
        raise ValueError("AcceleratorCount missing or not positive")
    price = _number(row.get("Price"))
    spot_price = _number(row.get("SpotPrice"))
    if spot_price is not None and spot_price <= 0:
        spot_price = None  # vast writes 0.00 for "no spot price"
    if price is not None and price <= 0:
        price = None
    if price is None and spot_price is None:
        return None
    instance_type = row["InstanceType"].strip()
    upstream = (row.get("UpstreamCloudId") or "").strip()
    memory = per_gpu_memory_gib(cloud, _gpu_info(row.get("GpuInfo") or ""), count)
    accelerator = row["AcceleratorName"].strip()
    region = (row.get("Region") or "").strip() or "unspecified"
    zone = (row.get("AvailabilityZone") or "").strip()
    if zone:
        region = f"{region}/{zone}"  # primeintellect: country code plus site
    return OfferRecord(
        provider=provider,
        instance_type=instance_type,
        region=region,
        spot=price is None,
        gpu_model=normalize_gpu_name(
            accelerator, memory_gib=memory, context=f"{instance_type} {upstream}"
        ),
        gpu_raw_name=accelerator,
        gpu_count=count,
        vram_gib_per_gpu=memory,
        vcpus=_number(row.get("vCPUs")),
        ram_gib=_number(row.get("MemoryGiB")),
        price_per_hour=price,
        spot_price_per_hour=spot_price,
    )


class SkypilotCatalogScraper(Scraper):
    """One cloud's CSV from the skypilot-catalog repository; see `skypilot_scrapers()`."""

    cloud: ClassVar[str]
    kind = "list"

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        url = self.config.base_url or self.default_url
        return [RawPage(url=url, body=await get_text(client, url))]

    def parse(self, pages: list[RawPage]) -> ParseResult:
        result = ParseResult()
        for page in pages:
            parsed = parse_catalog_csv(self.cloud, page.body)
            result.records.extend(parsed.records)
            result.warnings.extend(parsed.warnings)
        return result


def _make(cloud: str) -> type[SkypilotCatalogScraper]:
    return type(
        f"Skypilot_{cloud}",
        (SkypilotCatalogScraper,),
        {
            "cloud": cloud,
            "name": f"skypilot-{cloud}",
            "display_name": f"{cloud} (skypilot-catalog)",
            "default_url": catalog_url(cloud),
        },
    )


def skypilot_scrapers() -> dict[str, type[Scraper]]:
    """One registry entry per fallback cloud, e.g. `skypilot-nebius`."""
    return {f"skypilot-{cloud}": _make(cloud) for cloud in FALLBACK_CLOUDS}


__all__ = ["SkypilotCatalogScraper", "ScraperConfig", "parse_catalog_csv", "skypilot_scrapers"]
