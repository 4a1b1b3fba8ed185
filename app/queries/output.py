"""Output: one dict per offer feeds JSON and CSV alike."""

from __future__ import annotations

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
FIT_FIELDS = (  # fit_dict's keys, minus the nested `factors` and `setup` (JSON only)
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
    "tokens_per_s_per_gpu",
    "mfu",
    "comm_share",
    "tight",
    "nodes",
    "plan_gpu_count",
    "plan",
    "market_used",
    "price_used_per_hour",
    "plan_price_per_hour",
    "run_hours",
    "setup_hours",
    "checkpoint_hours",
    "spot_overhead_hours",
    "spot_rate_per_hour",
    "spot_risk_source",
    "alternative",
    "checkpoints",
)


def offer_dict(item: RankedOffer, link_query: str = "") -> dict[str, Any]:
    """JSON-ready fields of one offer (plus its fit when ranked); datetimes as ISO 8601.
    `link_query` (the workload and terms) goes on the offer page link."""
    row = item.row
    out: dict[str, Any] = {}
    for name in OFFER_FIELDS:
        value = getattr(row, name)
        out[name] = value.isoformat() if isinstance(value, datetime) else value
    out["url"] = f"/offers/{row.id}" + (f"?{link_query}" if link_query else "")
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


def to_csv(items: Sequence[RankedOffer], *, with_fit: bool, link_query: str = "") -> str:
    """CSV text with a header row; the columns are the JSON fields in the same order."""
    import csv
    import io

    columns = [*OFFER_FIELDS, "url", *(FIT_FIELDS if with_fit else ())]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for item in items:
        data = offer_dict(item, link_query)
        writer.writerow([_csv_cell(data.get(c)) for c in columns])
    return buffer.getvalue()
