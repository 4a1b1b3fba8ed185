"""The public skypilot-catalog CSV feed: a broad fallback for clouds with no direct scraper.

Each cloud's `vms.csv` lists instance types with GPU model, count and hourly prices (whole
instance, USD). The same parser loads the bundled offline sample (`app/sample/`), including
the hyperscaler catalogs (aws, azure, oci, and gcp, whose host and GPU rows are priced
separately: `parse_gcp_catalog`).

What the files hold differs by cloud (skypilot-catalog's fetchers, `sky/catalog/data_fetchers`):
- `GpuInfo` is a Python-literal dict, JSON-quoted for some clouds, and hyperstack's mixes JSON
  `null` into the Python literal; all three parse.
- `SizeInMiB` is per GPU, the total over all GPUs (vast, primeintellect), or GB rather than MiB
  (shadeform writes 48 for an A6000): values below 1024 are read as GB.
- Some fetchers write only what can be rented now: vast (rentable offers), primeintellect (its
  availability endpoint), fluidstack (available configurations) and shadeform (`available=true`).
  lium (whole free nodes of its public node list) too. Their rows are recorded as in stock at
  capture time. Everywhere else availability is unknown.
- aws, gcp and oci rows are per availability zone; they collapse to one offer per region (the
  cheapest zone), the key the direct scrapers use. OCI prices are the same in every region and
  Lambda's catalog lists every region whatever its capacity, so those collapse further to the
  direct scrapers' "global" / "any".
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, ClassVar

import httpx
from pydantic import ValidationError

from app.gpus.normalize import normalize_gpu_name
from app.records import Availability, OfferRecord
from scrapers import aws, azure, gcp, oci
from scrapers.base import FeedFormatError, ParseResult, RawPage, Scraper, ScraperConfig
from scrapers.facts import display_name
from scrapers.http import get_text

CATALOG_BASE = "https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/master/catalogs"

# Our provider ids where they differ from SkyPilot's cloud names.
PROVIDER_FOR_CLOUD = {"lambda": "lambdalabs", "vast": "vastai"}

# Clouds whose GpuInfo SizeInMiB is the total over all GPUs rather than per GPU (see the
# sample README); everywhere else it is per GPU.
SIZE_IS_TOTAL = frozenset({"vast", "primeintellect"})
# A SizeInMiB below this is GB, not MiB (shadeform); no GPU has under 1 GiB of memory.
MIB_FLOOR = 1024
# Clouds whose catalog lists only what can be rented at capture time (see the module doc).
LISTED_MEANS_AVAILABLE = frozenset({"vast", "primeintellect", "fluidstack", "shadeform", "lium"})
# Clouds whose AvailabilityZone names a separate site with its own offers, not a zone.
ZONE_IS_SITE = frozenset({"primeintellect"})
# One region for every row, matching the direct scraper's key (see the module doc).
REGION_FOR_CLOUD = {"oci": oci.REGION, "lambda": "any"}

# Clouds not in catalogs/v8, read from the v6 copy which has the same columns.
CATALOG_VERSION = {"paperspace": "v6", "fluidstack": "v6", "do": "v6"}

# Clouds covered by this fallback: the ones without a direct scraper in this package.
FALLBACK_CLOUDS = (
    "cudo",
    "do",
    "fluidstack",
    "jarvislabs",
    "lium",
    "nebius",
    "paperspace",
    "hyperstack",
    "primeintellect",
    "seeweb",
    "shadeform",
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


@lru_cache(maxsize=4096)
def _gpu_info(text: str) -> dict[str, Any] | None:
    """Parse GpuInfo (a Python-literal or JSON dict) with lower-cased keys; None if absent.

    Cached: zone rows repeat the same text. Callers only read the result.
    """
    text = text.strip()
    if not text.startswith("{"):
        return None  # paperspace: only the GPU name
    try:
        parsed = json.loads(text)
    except ValueError:
        try:
            parsed = ast.literal_eval(text)  # literal_eval, never eval: the feed is untrusted
        except ValueError:
            parsed = _python_literal(text)
    if not isinstance(parsed, dict):
        raise ValueError("GpuInfo is not a dict")
    result: dict[str, Any] = _lower_keys(parsed)
    return result


# Rows repeat per zone and region; the name mapping depends only on its arguments.
_normalize = lru_cache(maxsize=4096)(normalize_gpu_name)

_JSON_CONSTANTS = {"null": None, "true": True, "false": False}


class _JsonConstants(ast.NodeTransformer):
    """Turn bare `null`/`true`/`false` names into constants; any other name stays a name."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in _JSON_CONSTANTS:
            return ast.copy_location(ast.Constant(_JSON_CONSTANTS[node.id]), node)
        return node


def _python_literal(text: str) -> Any:
    """A Python literal that may also hold JSON constants (hyperstack: `'Manufacturer': null`).

    literal_eval still rejects any name or call left after the JSON constants are replaced.
    """
    tree = _JsonConstants().visit(ast.parse(text, mode="eval"))
    return ast.literal_eval(tree)


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
    if mib < MIB_FLOOR:
        return round(mib, 2)  # GB written as MiB (shadeform)
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
    result.records = collapse(result.records)
    return result


def collapse(records: Iterable[OfferRecord]) -> list[OfferRecord]:
    """One record per offer key: the cheapest on-demand and spot price over its rows (zones)."""
    best: dict[tuple[str, str, str, bool], OfferRecord] = {}
    for record in records:
        old = best.get(record.key)
        if old is None:
            best[record.key] = record
            continue
        best[record.key] = old.model_copy(
            update={
                "price_per_hour": _lowest(old.price_per_hour, record.price_per_hour),
                "spot_price_per_hour": _lowest(old.spot_price_per_hour, record.spot_price_per_hour),
            }
        )
    return list(best.values())


def _lowest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def gpu_hint(cloud: str, instance_type: str) -> tuple[str, float | None] | None:
    """The GPU a hyperscaler instance type fixes (raw name with form factor, GiB per GPU).

    Uses the direct scrapers' tables, which cite the providers' instance docs; SkyPilot's
    AcceleratorName ("A100", "H100") leaves the form factor and memory open.
    """
    if cloud == "aws":
        return aws.family_gpu(instance_type)
    if cloud == "azure":
        return azure.sku_gpu(instance_type)
    if cloud == "oci":
        return oci.shape_gpu(oci.clean_shape_name(instance_type))
    if cloud == "gcp":
        machine = gcp.MACHINES.get(instance_type)
        return None if machine is None else (machine.accelerator, machine.vram_gib)
    return None


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
    if zone and cloud in ZONE_IS_SITE:
        region = f"{region}/{zone}"  # primeintellect: country code plus site
    region = REGION_FOR_CLOUD.get(cloud, region)
    hint = gpu_hint(cloud, instance_type)
    if hint is not None:
        raw, documented = hint
        memory = documented or memory
        gpu_model = _normalize(raw, memory_gib=memory, context=instance_type)
    else:
        gpu_model = _normalize(
            accelerator, memory_gib=memory, context=f"{instance_type} {upstream}"
        )
    return OfferRecord(
        provider=provider,
        instance_type=instance_type,
        region=region,
        spot=price is None,
        gpu_model=gpu_model,
        gpu_raw_name=accelerator,
        gpu_count=count,
        vram_gib_per_gpu=memory,
        vcpus=_number(row.get("vCPUs")),
        ram_gib=_number(row.get("MemoryGiB")),
        price_per_hour=price,
        spot_price_per_hour=spot_price,
        availability=(
            Availability.IN_STOCK if cloud in LISTED_MEANS_AVAILABLE else Availability.UNKNOWN
        ),
    )


# SkyPilot's GCP accelerator names -> GCP accelerator type ids (the direct scraper's keys).
GCP_ACCELERATORS = {
    "A100": "nvidia-tesla-a100",
    "A100-80GB": "nvidia-a100-80gb",
    "H100": "nvidia-h100-80gb",
    "H100-MEGA": "nvidia-h100-mega-80gb",
    "L4": "nvidia-l4",
}


def parse_gcp_catalog(vms_text: str, hosts_text: str) -> ParseResult:
    """GCP: a GPU VM costs its host machine row plus the accelerator row of the same zone and
    count (gcp/vms.csv holds the accelerator rows, the host rows are separate).

    Only the machine types the direct GCP scraper knows (`gcp.MACHINES`) are joined, so the
    keys match; a zone missing either half, or a host priced 0, gives no offer.
    """
    result = ParseResult()
    accel_ids = {v: k for k, v in GCP_ACCELERATORS.items()}
    accelerators: dict[tuple[str, float, str], dict[str, str]] = {}
    for row in _rows("gcp", vms_text):
        name = (row.get("AcceleratorName") or "").strip()
        count = _number(row.get("AcceleratorCount"))
        zone = (row.get("AvailabilityZone") or "").strip()
        if name in GCP_ACCELERATORS and count:
            accelerators[(name, count, zone)] = row
    for line_no, host in enumerate(_rows("gcp", hosts_text), start=2):
        instance_type = (host.get("InstanceType") or "").strip()
        machine = gcp.MACHINES.get(instance_type)
        if machine is None:
            continue
        name = accel_ids[machine.accelerator]
        zone = (host.get("AvailabilityZone") or "").strip()
        accel = accelerators.get((name, float(machine.gpus), zone))
        if accel is None:
            continue
        try:
            record = _gcp_record(instance_type, machine, name, host, accel)
        except (ValueError, ValidationError) as exc:
            result.warnings.append(f"hosts line {line_no}: skipped ({_short(exc)})")
            continue
        if record is None:
            result.warnings.append(f"hosts line {line_no}: skipped (no price)")
            continue
        result.records.append(record)
    result.records = collapse(result.records)
    return result


def _rows(cloud: str, text: str) -> list[dict[str, str]]:
    reader = csv.DictReader(io.StringIO(text))
    missing = {"AcceleratorName", "Price", "Region"} - set(reader.fieldnames or [])
    if missing:
        raise FeedFormatError(f"{cloud} csv lacks columns {sorted(missing)}")
    rows = []
    for line_no, row in enumerate(reader, start=2):
        if line_no > MAX_ROWS:
            raise FeedFormatError(f"{cloud} csv has more than {MAX_ROWS} rows")
        if None in row or None in row.values():
            raise FeedFormatError(f"{cloud} csv line {line_no} has the wrong number of fields")
        rows.append(row)
    return rows


def _sum(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a <= 0 or b <= 0:
        return None
    return round(a + b, 6)


def _gcp_record(
    instance_type: str,
    machine: gcp.Machine,
    name: str,
    host: dict[str, str],
    accel: dict[str, str],
) -> OfferRecord | None:
    price = _sum(_number(host.get("Price")), _number(accel.get("Price")))
    spot = _sum(_number(host.get("SpotPrice")), _number(accel.get("SpotPrice")))
    if price is None and spot is None:
        return None
    return OfferRecord(
        provider="gcp",
        instance_type=instance_type,
        region=host["Region"].strip(),
        spot=price is None,
        gpu_model=_normalize(machine.accelerator, memory_gib=machine.vram_gib),
        gpu_raw_name=name,
        gpu_count=machine.gpus,
        vram_gib_per_gpu=machine.vram_gib,
        vcpus=_number(host.get("vCPUs")),
        ram_gib=_number(host.get("MemoryGiB")),
        price_per_hour=price,
        spot_price_per_hour=spot,
    )


class SkypilotCatalogScraper(Scraper):
    """One cloud's CSV from the skypilot-catalog repository; see `skypilot_scrapers()`."""

    cloud: ClassVar[str]
    kind = "list"

    @classmethod
    def provider_id(cls) -> str:
        return provider_for_cloud(cls.cloud)

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
            "display_name": f"{display_name(provider_for_cloud(cloud))} (skypilot-catalog)",
            "default_url": catalog_url(cloud),
        },
    )


def skypilot_scrapers() -> dict[str, type[Scraper]]:
    """One registry entry per fallback cloud, e.g. `skypilot-nebius`."""
    return {f"skypilot-{cloud}": _make(cloud) for cloud in FALLBACK_CLOUDS}


__all__ = [
    "SkypilotCatalogScraper",
    "ScraperConfig",
    "parse_catalog_csv",
    "parse_gcp_catalog",
    "skypilot_scrapers",
]
