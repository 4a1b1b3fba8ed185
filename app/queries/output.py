"""Output: one dict per offer feeds JSON and CSV alike."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from app.fit.serialize import fit_dict
from app.queries.rows import RankedOffer

OFFER_FIELDS = (
    "id",
    "provider",
    "provider_name",
    "instance_type",
    "region",
    "continent",
    "spot",
    "gpu_model",
    "gpu_name",
    "gpu_vendor",
    "gpu_raw_name",
    "gpu_count",
    "vram_gib_per_gpu",
    "vram_gib_total",
    "vcpus",
    "ram_gib",
    "disk_gib",
    "interconnect",
    "network",
    "network_gbps",
    "price_per_hour",
    "price_per_gpu_hour",
    "spot_price_per_hour",
    "currency",
    "billing",
    "availability",
    "availability_count",
    "first_seen",
    "last_seen",
    "active",
)
FIT_FIELDS = (  # fit_dict's keys, minus the nested `factors` (JSON only)
    "fits",
    "per_gpu_gib_needed",
    "headroom_pct",
    "est_hours",
    "billed_hours",
    "est_total_cost",
    "cost_per_m_tokens",
    "score",
    "explanation",
    "reason",
    "sharding_used",
)


def offer_dict(item: RankedOffer) -> dict[str, Any]:
    """JSON-ready fields of one offer (plus its fit when ranked); datetimes as ISO 8601."""
    row = item.row
    out: dict[str, Any] = {}
    for name in OFFER_FIELDS:
        value = getattr(row, name)
        out[name] = value.isoformat() if isinstance(value, datetime) else value
    out["url"] = f"/offers/{row.id}"
    if item.fit is not None:
        out.update(fit_dict(item.fit))
    return out


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> Any:
    """Blank for None; scraped text that a spreadsheet would run as a formula gets a quote."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_columns(*, with_fit: bool) -> list[str]:
    """The CSV header: the JSON fields in the same order (fit ones with a workload)."""
    return [*OFFER_FIELDS, "url", *(FIT_FIELDS if with_fit else ())]


def csv_rows(items: Sequence[RankedOffer], *, with_fit: bool, header: bool = False) -> str:
    """CSV lines of `items` (after a header row with `header`)."""
    columns = csv_columns(with_fit=with_fit)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if header:
        writer.writerow(columns)
    for item in items:
        data = offer_dict(item)
        writer.writerow([_csv_cell(data.get(c)) for c in columns])
    return buffer.getvalue()


def to_csv(items: Sequence[RankedOffer], *, with_fit: bool) -> str:
    """CSV text with a header row; the columns are the JSON fields in the same order."""
    return csv_rows(items, with_fit=with_fit, header=True)


def json_lines(items: Sequence[RankedOffer]) -> str:
    """One JSON object per line (JSON Lines), the fields of /api/offers' offers."""
    return "".join(json.dumps(offer_dict(item), separators=(",", ":")) + "\n" for item in items)
