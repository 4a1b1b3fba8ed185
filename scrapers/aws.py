"""Amazon EC2: per-region on-demand price list CSVs plus the public spot price feed (spot.js).

The regional bulk CSVs are very large, so `fetch` filters them while streaming and keeps only the
metadata/header lines and Linux, shared-tenancy, on-demand GPU rows. The CSV has GPU counts and
memory but no GPU model, so the model comes from the instance family table (AWS instance type
docs). Spot prices (per region and size, Linux) are merged into the on-demand record of the same
instance type and region; spot.js uses some legacy region names, mapped below.
"""

from __future__ import annotations

import csv
import io
import re
from functools import partial
from typing import Any, ClassVar

import httpx

from app.gpus.normalize import normalize_gpu_name
from app.records import OfferRecord
from scrapers.base import FeedFormatError, ParseResult, RawPage
from scrapers.http import (
    HttpScraper,
    build_record,
    dedupe,
    gather_limited,
    get_text,
    load_json,
    request_text,
    to_float,
)

DEFAULT_REGIONS = ("us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1",
                   "ap-northeast-1", "ap-southeast-1")  # fmt: skip
MAX_DOWNLOAD_BYTES = 8 * 1024**3  # a regional CSV is a few GB; refuse anything absurd
METADATA_LINES = 6  # 5 metadata lines, then the header

# Instance family -> (raw GPU name with form factor, GPU memory GiB) from the EC2 instance docs.
FAMILIES: dict[str, tuple[str, float]] = {
    "p6-b200": ("B200 SXM", 180),
    "p5en": ("H200 SXM", 141),
    "p5e": ("H200 SXM", 141),
    "p5": ("H100 SXM", 80),
    "p4de": ("A100 80GB SXM4", 80),
    "p4d": ("A100 40GB SXM4", 40),
    "p3dn": ("Tesla V100 SXM2 32GB", 32),
    "p3": ("Tesla V100 SXM2 16GB", 16),
    "g6e": ("L40S", 48),
    "g6": ("L4", 24),
    "gr6": ("L4", 24),
    "g5": ("A10G", 24),
    "g4dn": ("Tesla T4", 16),
}
# spot.js legacy region names -> region codes.
SPOT_REGIONS = {
    "us-east": "us-east-1", "us-west": "us-west-1", "eu-ireland": "eu-west-1",
    "apac-sin": "ap-southeast-1", "apac-tokyo": "ap-northeast-1", "apac-syd": "ap-southeast-2",
}  # fmt: skip
_JSONP = re.compile(r"^\s*callback\((?P<body>.*)\)\s*;?\s*$", re.S)


def _keep_row(index: int, line: str) -> bool:
    if index < METADATA_LINES:
        return True
    return (
        '"GPU instance"' in line
        and '"Linux"' in line
        and '"OnDemand"' in line
        and '"Shared"' in line
    )


def _family(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


class AwsScraper(HttpScraper):
    """AWS EC2 GPU instances (no auth, no availability)."""

    name: ClassVar[str] = "aws"
    display_name: ClassVar[str] = "Amazon EC2"
    kind: ClassVar[str] = "list"
    limit: ClassVar[int] = 2  # each regional download is large
    default_url: ClassVar[str] = (
        "https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2/current/{region}/index.csv"
    )
    extra_default_urls: ClassVar[dict[str, str]] = {
        "spot": "https://spot-price.s3.amazonaws.com/spot.js",
        "regions": ",".join(DEFAULT_REGIONS),  # comma-separated region codes
    }

    def regions(self) -> list[str]:
        """Region codes to fetch (config extra_urls["regions"], comma-separated)."""
        return [r.strip() for r in self.url("regions").split(",") if r.strip()]

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """Each region's filtered on-demand CSV, then the spot feed."""

        async def region_page(region: str) -> RawPage:
            url = self.base_url.replace("{region}", region)
            body = await request_text(
                client,
                "GET",
                url,
                max_bytes=self.max_bytes,
                line_filter=_keep_row,
                max_total_bytes=MAX_DOWNLOAD_BYTES,
            )
            return RawPage(url=url, body=body)

        pages = await gather_limited(self.limit, [partial(region_page, r) for r in self.regions()])
        spot_url = self.url("spot")
        pages.append(RawPage(url=spot_url, body=await get_text(client, spot_url)))
        return pages

    def parse(self, pages: list[RawPage]) -> ParseResult:
        """On-demand CSV rows -> records, with spot.js prices merged in."""
        result = ParseResult()
        spot: dict[tuple[str, str], float] = {}
        rows: list[dict[str, str]] = []
        for page in pages:
            if page.body.lstrip().startswith("callback("):
                spot.update(self._spot(page, result.warnings))
            else:
                rows.extend(_csv_rows(page))
        records: list[OfferRecord] = []
        for row in rows:
            record = self._record(row, spot, result.warnings)
            if record:
                records.append(record)
        result.records = dedupe(records, result.warnings)
        return result

    def _record(
        self, row: dict[str, str], spot: dict[tuple[str, str], float], warnings: list[str]
    ) -> OfferRecord | None:
        instance = row.get("Instance Type", "")
        region = row.get("Region Code", "")
        if (
            row.get("TermType") != "OnDemand"
            or row.get("Tenancy") != "Shared"
            or row.get("Operating System") != "Linux"
            or row.get("CapacityStatus", "Used") != "Used"
            or row.get("Pre Installed S/W", "NA") not in ("NA", "")
            or row.get("MarketOption", "OnDemand") != "OnDemand"
            or row.get("Unit") != "Hrs"
        ):
            return None
        price = to_float(row.get("PricePerUnit"))
        if not price:
            return None  # zero-priced placeholder rows
        count = to_float(row.get("GPU"))
        family = FAMILIES.get(_family(instance))
        if not count:
            return None  # not a GPU instance
        if family is None:
            warnings.append(f"skipped {instance[:40]}: GPU family not in the table")
            return None
        raw_gpu, vram = family
        total_memory = _gib(row.get("GPU Memory", ""))
        if total_memory and count >= 1:
            vram = total_memory / count
        return build_record(
            warnings,
            f"{instance} in {region}",
            provider=self.name,
            instance_type=instance,
            region=region,
            gpu_model=normalize_gpu_name(raw_gpu, memory_gib=vram, context=instance),
            gpu_raw_name=raw_gpu,
            gpu_count=count,
            vram_gib_per_gpu=vram,
            vcpus=to_float(row.get("vCPU")),
            ram_gib=_gib(row.get("Memory", "")),
            price_per_hour=price,
            spot_price_per_hour=spot.get((instance, region)),
            currency=row.get("Currency") or "USD",
        )

    @staticmethod
    def _spot(page: RawPage, warnings: list[str]) -> dict[tuple[str, str], float]:
        text = page.body.strip()
        match = _JSONP.match(text)
        if not match:
            raise FeedFormatError(f"{page.url}: spot feed is not callback(...) JSONP")
        data: Any = load_json(match["body"], page.url)
        regions = data.get("config", {}).get("regions") if isinstance(data, dict) else None
        if not isinstance(regions, list):
            raise FeedFormatError(f"{page.url}: expected config.regions in the spot feed")
        out: dict[tuple[str, str], float] = {}
        for region in regions:
            if not isinstance(region, dict):
                continue
            code = str(region.get("region", ""))
            code = SPOT_REGIONS.get(code, code)
            for itype in region.get("instanceTypes") or []:
                for size in (itype or {}).get("sizes") or []:
                    name = str((size or {}).get("size", ""))
                    for column in size.get("valueColumns") or []:
                        if (column or {}).get("name") != "linux":
                            continue
                        price = to_float((column.get("prices") or {}).get("USD"))
                        if price and price > 0 and name:
                            out[(name, code)] = price
        return out


def _gib(text: str) -> float | None:
    match = re.match(r"\s*([\d.,]+)\s*GiB|\s*([\d.,]+)\s*GB", text or "")
    if not match:
        return None
    return to_float((match.group(1) or match.group(2)).replace(",", ""))


def _csv_rows(page: RawPage) -> list[dict[str, str]]:
    lines = page.body.splitlines()
    start = next(
        (i for i, line in enumerate(lines[:20]) if line.startswith('"SKU"')),
        None,
    )
    if start is None:
        raise FeedFormatError(f"{page.url}: no price list header row")
    reader = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    needed = {"Instance Type", "Region Code", "PricePerUnit", "GPU", "TermType"}
    if not needed <= set(reader.fieldnames or []):
        raise FeedFormatError(f"{page.url}: price list lacks columns {sorted(needed)}")
    return [row for row in reader if isinstance(row, dict)]
