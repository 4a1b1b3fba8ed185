"""Amazon EC2: per-region on-demand price list CSVs plus the public spot price feed.

The regional bulk CSVs are very large, so `fetch` filters them while streaming and keeps only the
metadata/header lines and Linux, shared-tenancy, on-demand GPU rows. The CSV has GPU counts and
memory but no GPU model, so the model comes from the instance family table (AWS instance type
docs). Older price lists (before the `Region Code` column) name the region only by its display
name ("EU (Ireland)"); the page URL's region fills the gap.

Spot prices come from `spot.json` (the feed behind the AWS spot pricing page; the older
`spot.js` JSONP copy has been frozen since 2024-05 and is still read if configured). The spot
feed is secondary: if it fails, the on-demand offers land without spot prices and the run is
recorded as partial with the reason.
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
    FetchError,
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
PREAMBLE_LINES = 10  # metadata lines (5 today, plus an optional "sep=," line) before the header

# Instance family -> (raw GPU name with form factor, GPU memory GiB per GPU) from the EC2
# accelerated-computing instance docs. Families not listed are skipped with a warning.
FAMILIES: dict[str, tuple[str, float]] = {
    "p6-b300": ("B300 SXM", 268),
    "p6-b200": ("B200 SXM", 180),
    "p5en": ("H200 SXM", 141),
    "p5e": ("H200 SXM", 141),
    "p5": ("H100 SXM", 80),
    "p4de": ("A100 80GB SXM4", 80),
    "p4d": ("A100 40GB SXM4", 40),
    "p3dn": ("Tesla V100 SXM2 32GB", 32),
    "p3": ("Tesla V100 SXM2 16GB", 16),
    "p2": ("Tesla K80", 12),
    "g7e": ("RTX PRO 6000 Blackwell Server", 96),
    "g6e": ("L40S", 48),
    "g6f": ("L4", 24),  # fractional L4 slices: the CSV's GPU count is below 1
    "g6": ("L4", 24),
    "gr6": ("L4", 24),
    "g5g": ("T4G", 16),
    "g5": ("A10G", 24),
    "g4dn": ("Tesla T4", 16),
    "g4ad": ("Radeon Pro V520", 8),
}
# spot.js / spot.json legacy region names -> region codes.
SPOT_REGIONS = {
    "us-east": "us-east-1", "us-west": "us-west-1", "eu-ireland": "eu-west-1",
    "apac-sin": "ap-southeast-1", "apac-tokyo": "ap-northeast-1", "apac-syd": "ap-southeast-2",
}  # fmt: skip
# Price list "Location" display names -> region codes, for lists without a Region Code column.
LOCATIONS = {
    "US East (N. Virginia)": "us-east-1", "US East (Ohio)": "us-east-2",
    "US West (N. California)": "us-west-1", "US West (Oregon)": "us-west-2",
    "EU (Ireland)": "eu-west-1", "EU (London)": "eu-west-2", "EU (Paris)": "eu-west-3",
    "EU (Frankfurt)": "eu-central-1", "EU (Stockholm)": "eu-north-1",
    "Asia Pacific (Tokyo)": "ap-northeast-1", "Asia Pacific (Seoul)": "ap-northeast-2",
    "Asia Pacific (Singapore)": "ap-southeast-1", "Asia Pacific (Sydney)": "ap-southeast-2",
    "Asia Pacific (Mumbai)": "ap-south-1", "Canada (Central)": "ca-central-1",
    "South America (Sao Paulo)": "sa-east-1",
}  # fmt: skip
_JSONP = re.compile(r"^\s*callback\((?P<body>.*)\)\s*;?\s*$", re.S)
_URL_REGION = re.compile(r"/current/(?P<region>[a-z]{2}(?:-[a-z]+)+-\d)/")
_ROW_WORDS = ("GPU instance", "Linux", "OnDemand", "Shared")


_HEADER = re.compile(r'^"?SKU"?,')


class _RowFilter:
    """Keeps the metadata lines up to the header, then only Linux on-demand GPU rows."""

    def __init__(self) -> None:
        self.header_seen = False

    def __call__(self, index: int, line: str) -> bool:
        if not self.header_seen and index < PREAMBLE_LINES:
            self.header_seen = bool(_HEADER.match(line))
            return True
        # Every non-empty field is quoted in current lists and unquoted in older ones: match
        # whole fields ("Red Hat Enterprise Linux" in a description must not pass as "Linux").
        return all(f'"{word}"' in line or f",{word}," in line for word in _ROW_WORDS)


def _family(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def family_gpu(instance_type: str) -> tuple[str, float] | None:
    """The GPU of an EC2 instance type (raw name with form factor, GiB per GPU), or None."""
    return FAMILIES.get(_family(instance_type))


def _is_spot_page(page: RawPage) -> bool:
    head = page.body.lstrip()[:20]
    return head.startswith(("{", "callback("))


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
        "spot": "https://website.spot.ec2.aws.a2z.com/spot.json",
        "regions": ",".join(DEFAULT_REGIONS),  # comma-separated region codes
    }

    def regions(self) -> list[str]:
        """Region codes to fetch (config extra_urls["regions"], comma-separated)."""
        return [r.strip() for r in self.url("regions").split(",") if r.strip()]

    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """Each region's filtered on-demand CSV, then the spot feed (optional)."""

        async def region_page(region: str) -> RawPage:
            url = self.base_url.replace("{region}", region)
            body = await request_text(
                client,
                "GET",
                url,
                max_bytes=self.max_bytes,
                line_filter=_RowFilter(),
                max_total_bytes=MAX_DOWNLOAD_BYTES,
            )
            return RawPage(url=url, body=body)

        pages = await gather_limited(self.limit, [partial(region_page, r) for r in self.regions()])
        spot_url = self.url("spot")
        try:
            pages.append(RawPage(url=spot_url, body=await get_text(client, spot_url)))
        except (FetchError, httpx.HTTPError) as exc:
            self.degrade(f"spot prices unavailable ({str(exc)[:200]}); on-demand offers kept")
        return pages

    def parse(self, pages: list[RawPage]) -> ParseResult:
        """On-demand CSV rows -> records, with spot prices merged in."""
        result = ParseResult()
        spot: dict[tuple[str, str], float] = {}
        rows: list[dict[str, str]] = []
        for page in pages:
            if _is_spot_page(page):
                try:
                    spot.update(self._spot(page))
                except FeedFormatError as exc:
                    result.degraded.append(f"spot feed unreadable ({exc}); on-demand offers kept")
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
        instance = (row.get("Instance Type") or "").strip()
        if (
            row.get("TermType") != "OnDemand"
            or row.get("Tenancy") != "Shared"
            or row.get("Operating System") != "Linux"
            or (row.get("CapacityStatus") or "Used") != "Used"
            or (row.get("Pre Installed S/W") or "NA") != "NA"
            or (row.get("MarketOption") or "OnDemand") != "OnDemand"
            or row.get("Unit") != "Hrs"
        ):
            return None
        price = to_float(row.get("PricePerUnit"))
        count = to_float(row.get("GPU"))
        if not price or not count or count <= 0:
            return None  # zero-priced placeholder rows, or not a GPU instance
        family = FAMILIES.get(_family(instance))
        if family is None:
            warnings.append(f"skipped {instance[:40]}: GPU family not in the table")
            return None
        region = _region(row)
        if not region:
            warnings.append(f"skipped {instance[:40]}: no region code")
            return None
        raw_gpu, vram = family
        total_memory = _gib(row.get("GPU Memory", ""))
        if count < 1:
            # A fractional slice (g6f) gets its share of one GPU's memory.
            vram = total_memory if total_memory else round(vram * count, 2)
        elif total_memory:
            vram = total_memory / count
        return build_record(
            warnings,
            f"{instance} in {region}",
            provider=self.name,
            instance_type=instance,
            region=region,
            gpu_model=normalize_gpu_name(raw_gpu, memory_gib=family[1], context=instance),
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
    def _spot(page: RawPage) -> dict[tuple[str, str], float]:
        """(size, region) -> Linux spot price, from spot.json or the legacy spot.js JSONP."""
        text = page.body.strip()
        match = _JSONP.match(text)
        data: Any = load_json(match["body"] if match else text, page.url)
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
                    for column in (size or {}).get("valueColumns") or []:
                        if (column or {}).get("name") != "linux":
                            continue
                        # "N/A*" marks sizes without a Linux spot price.
                        price = to_float((column.get("prices") or {}).get("USD"))
                        if price and price > 0 and name:
                            out[(name, code)] = price
        return out


def _region(row: dict[str, str]) -> str:
    code = (row.get("Region Code") or "").strip()
    if code:
        return code
    location = (row.get("Location") or "").strip()
    return LOCATIONS.get(location, "") or (row.get("_page_region") or "")


def _gib(text: str) -> float | None:
    match = re.match(r"\s*([\d.,]+)\s*GiB|\s*([\d.,]+)\s*GB", text or "")
    if not match:
        return None
    return to_float((match.group(1) or match.group(2)).replace(",", ""))


def _csv_rows(page: RawPage) -> list[dict[str, str]]:
    lines = page.body.splitlines()
    start = next(
        (i for i, line in enumerate(lines[:PREAMBLE_LINES]) if _HEADER.match(line)),
        None,
    )
    if start is None:
        raise FeedFormatError(f"{page.url}: no price list header row")
    reader = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    needed = {"Instance Type", "PricePerUnit", "GPU", "TermType"}
    fields = set(reader.fieldnames or [])
    if not needed <= fields or not fields & {"Region Code", "Location"}:
        raise FeedFormatError(f"{page.url}: price list lacks columns {sorted(needed)}")
    url_region = _URL_REGION.search(page.url)
    rows = []
    for row in reader:
        if not isinstance(row, dict):
            continue
        row = {k: v for k, v in row.items() if isinstance(k, str) and isinstance(v, str)}
        if url_region:
            row["_page_region"] = url_region["region"]
        rows.append(row)
    return rows
