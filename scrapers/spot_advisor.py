"""AWS Spot Instance Advisor: how often Spot reclaims each instance type, per region and OS.

A side feed, not an offer feed: it prices nothing, so it is not in the scraper registry. It gives
the spot-risk model (app/fit/market.py) its only published per-instance-type interruption data.

Feed (public, no auth): `spot-advisor-data.json` with
- `ranges`: `[{index, label, dots, max}]`, the interruption-frequency bands (`<5%` ... `>20%`);
  AWS: "the rate at which Spot has reclaimed capacity during the trailing month";
- `spot_advisor`: `{region: {Linux|Windows: {instance_type: {s: savings %, r: band index}}}}`;
- `instance_types` (cores, RAM) and `global_rate`, which we do not need.

Only GPU instance families are kept (`p*`, `g*`, `gr*`): the full file has ~15k Linux rows per
fetch, of which ~700 are GPU instances. One bad row is skipped with a warning; a body that is not
this shape at all raises `FeedFormatError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scrapers.base import FeedFormatError, RawPage
from scrapers.http import get_text, load_json, to_float

FEED_ID = "aws-spot-advisor"
PROVIDER_ID = "aws"  # the offers' provider id these bands apply to
DEFAULT_URL = "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"
MAX_BYTES = 16 * 1024 * 1024  # the real file is ~0.9 MB
MAX_ROWS = 50_000
MAX_BANDS = 20
# EC2 accelerated-computing families with NVIDIA/AMD GPUs: p2..p6, g2..g6e, g4ad, g5g, gr6.
GPU_FAMILY = re.compile(r"^(p\d|g\d|gr\d)[a-z0-9-]*\.", re.I)
_REGION = r"^[a-z]{2}(-[a-z0-9]+){1,4}$"
_INSTANCE_TYPE = r"^[a-z0-9][a-z0-9-]*\.[a-z0-9-]+$"


class AdvisorBand(BaseModel):
    """One interruption-frequency band from the feed's `ranges` table."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    index: int = Field(ge=0, le=MAX_BANDS)
    label: str = Field(min_length=1, max_length=16)
    max: float = Field(ge=0, le=100)


class SpotAdvisorRecord(BaseModel):
    """One row of the feed: an instance type's band and savings in one region and OS."""

    model_config = ConfigDict(frozen=True)

    region: str = Field(max_length=64, pattern=_REGION)
    instance_type: str = Field(max_length=64, pattern=_INSTANCE_TYPE)
    os: str = Field(max_length=16, pattern=r"^[A-Za-z]+$")
    band_index: int = Field(ge=0, le=MAX_BANDS)
    band_label: str = Field(min_length=1, max_length=16)
    band_max_pct: float = Field(ge=0, le=100)
    savings_pct: float | None = Field(default=None, ge=0, le=100)


@dataclass
class AdvisorParse:
    records: list[SpotAdvisorRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    bands: list[AdvisorBand] = field(default_factory=list)


class SpotAdvisorFeed:
    """Fetch and parse the Spot Instance Advisor JSON (URL overridable per settings)."""

    id: ClassVar[str] = FEED_ID
    provider_id: ClassVar[str] = PROVIDER_ID
    display_name: ClassVar[str] = (
        "AWS Spot Instance Advisor (interruption bands; count = bands held)"
    )
    default_url: ClassVar[str] = DEFAULT_URL

    def __init__(self, url: str = "") -> None:
        self.url = url or DEFAULT_URL

    async def fetch(self, client: httpx.AsyncClient) -> RawPage:
        """GET the feed with the shared retries, timeout and size cap."""
        return RawPage(url=self.url, body=await get_text(client, self.url, max_bytes=MAX_BYTES))

    def parse(self, page: RawPage) -> AdvisorParse:
        """GPU rows of the feed, one bad row a warning; pure, no I/O."""
        data = load_json(page.body, page.url)
        if not isinstance(data, dict):
            raise FeedFormatError("spot advisor: top level is not an object")
        bands = _bands(data.get("ranges"))
        regions = data.get("spot_advisor")
        if not isinstance(regions, dict) or not regions:
            raise FeedFormatError("spot advisor: 'spot_advisor' is missing or not an object")
        result = AdvisorParse(bands=list(bands.values()))
        for region, systems in regions.items():
            if not isinstance(systems, dict):
                result.warnings.append(f"skipped region {str(region)[:64]!r}: not an object")
                continue
            for os_name, rows in systems.items():
                if not isinstance(rows, dict):
                    result.warnings.append(
                        f"skipped {str(region)[:64]} {str(os_name)[:16]}: not an object"
                    )
                    continue
                for instance_type, row in rows.items():
                    if not GPU_FAMILY.match(str(instance_type)):
                        continue
                    record, warning = _record(
                        str(region), str(os_name), str(instance_type), row, bands
                    )
                    if warning:
                        result.warnings.append(warning)
                    if record is None:
                        continue
                    result.records.append(record)
                    if len(result.records) > MAX_ROWS:
                        raise FeedFormatError(f"spot advisor: more than {MAX_ROWS} GPU rows")
        return result


def _bands(raw: Any) -> dict[int, AdvisorBand]:
    if not isinstance(raw, list) or not raw or len(raw) > MAX_BANDS:
        raise FeedFormatError("spot advisor: 'ranges' is missing or not a list of bands")
    bands: dict[int, AdvisorBand] = {}
    for item in raw:
        try:
            band = AdvisorBand.model_validate(item)
        except ValidationError as exc:
            raise FeedFormatError(f"spot advisor: bad band {str(item)[:80]}: {exc}") from exc
        if band.index in bands:
            raise FeedFormatError(f"spot advisor: band index {band.index} listed twice")
        bands[band.index] = band
    return bands


def _record(
    region: str, os_name: str, instance_type: str, row: Any, bands: dict[int, AdvisorBand]
) -> tuple[SpotAdvisorRecord | None, str | None]:
    """The validated record (None if skipped) and a warning about the row, if any."""
    what = f"{instance_type[:64]} in {region[:64]} ({os_name[:16]})"
    if not isinstance(row, dict):
        return None, f"skipped {what}: not an object"
    index = row.get("r")
    band = bands.get(index) if isinstance(index, int) and not isinstance(index, bool) else None
    if band is None:
        return None, f"skipped {what}: unknown interruption band {str(index)[:20]!r}"
    savings = to_float(row.get("s"))
    warning = None
    if savings is None or not 0 <= savings <= 100:
        warning = f"{what}: savings {str(row.get('s'))[:20]!r} is not a percentage; left empty"
        savings = None
    try:
        record = SpotAdvisorRecord(
            region=region,
            instance_type=instance_type,
            os=os_name,
            band_index=band.index,
            band_label=band.label,
            band_max_pct=band.max,
            savings_pct=savings,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        return None, f"skipped {what}: {'.'.join(map(str, first['loc']))}: {first['msg']}"[:300]
    return record, warning
