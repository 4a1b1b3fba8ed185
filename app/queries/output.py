"""Output: one dict per offer feeds JSON and CSV alike."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import fields
from operator import attrgetter, itemgetter
from typing import Any

from app.fit.serialize import fit_dict
from app.gpus.catalog import UNKNOWN
from app.queries.rows import OfferRow, RankedOffer

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
    "provider_url",
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


# One C-level call reads every field of a row (exports run this 100,000 times a request).
_OFFER_VALUES = attrgetter(*OFFER_FIELDS)
_TIME_POS = tuple(i for i, f in enumerate(OFFER_FIELDS) if f in ("first_seen", "last_seen"))
_TEXT_POS = tuple(
    i
    for i, f in enumerate(OFFER_FIELDS)
    if "str" in str({x.name: x.type for x in fields(OfferRow)}[f])
)


def _offer_values(row: OfferRow) -> list[Any]:
    """OFFER_FIELDS' values of a row, datetimes as ISO 8601."""
    values = list(_OFFER_VALUES(row))
    for i in _TIME_POS:
        value = values[i]
        if value is not None:
            values[i] = value.isoformat()
    return values


# The same values straight from a row of `row_select(TEXT_TIME_COLUMNS)` (streamed exports skip
# OfferRow): its columns are OfferRow's fields in order; the fallbacks are rows._to_row's.
_ROW_FIELDS = [f.name for f in fields(OfferRow)]
_RAW_VALUES = itemgetter(*(_ROW_FIELDS.index(f) for f in OFFER_FIELDS))
_RAW_ID = _ROW_FIELDS.index("id")
_SLUG_POS = OFFER_FIELDS.index("gpu_model")
_NAME_POS = OFFER_FIELDS.index("gpu_name")
_RAW_NAME_POS = OFFER_FIELDS.index("gpu_raw_name")


def iso_utc(text: str) -> str:
    """`datetime.isoformat()` of a UTC time given as 'YYYY-MM-DDTHH:MM:SS.ffffff' text."""
    if text.endswith(".000000"):
        text = text[:-7]  # isoformat leaves out a zero fraction
    return text + "+00:00"


def _raw_values(raw: Sequence[Any]) -> list[Any]:
    """OFFER_FIELDS' values of a raw row of `row_select(TEXT_TIME_COLUMNS)`, as
    `_offer_values` of its OfferRow."""
    values = list(_RAW_VALUES(raw))
    if values[_SLUG_POS] is None:
        values[_SLUG_POS] = UNKNOWN
    if not values[_NAME_POS]:
        values[_NAME_POS] = values[_RAW_NAME_POS]
    for i in _TIME_POS:
        value = values[i]
        if value is not None:
            values[i] = iso_utc(value)
    return values


def raw_csv_rows(raws: Sequence[Sequence[Any]]) -> str:
    """`csv_rows` (no fit columns) of raw `row_select(TEXT_TIME_COLUMNS)` rows."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for raw in raws:
        values = _raw_values(raw)
        for i in _TEXT_POS:
            text = values[i]
            if text and text.startswith(_FORMULA_START):
                values[i] = "'" + text
        values.append(f"/offers/{raw[_RAW_ID]}")
        writer.writerow(values)
    return buffer.getvalue()


def raw_json_lines(raws: Sequence[Sequence[Any]]) -> str:
    """`json_lines` (no fit) of raw `row_select(TEXT_TIME_COLUMNS)` rows."""
    lines = []
    for raw in raws:
        data = dict(zip(OFFER_FIELDS, _raw_values(raw), strict=True))
        data["url"] = f"/offers/{raw[_RAW_ID]}"
        lines.append(json.dumps(data, separators=(",", ":")) + "\n")
    return "".join(lines)


def offer_dict(item: RankedOffer, link_query: str = "") -> dict[str, Any]:
    """JSON-ready fields of one offer (plus its fit when ranked); datetimes as ISO 8601.
    `link_query` (the workload and terms) goes on the offer page link."""
    out = dict(zip(OFFER_FIELDS, _offer_values(item.row), strict=True))
    out["url"] = f"/offers/{item.row.id}" + (f"?{link_query}" if link_query else "")
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


def csv_rows(
    items: Sequence[RankedOffer], *, with_fit: bool, header: bool = False, link_query: str = ""
) -> str:
    """CSV lines of `items` (after a header row with `header`); `link_query` as in offer_dict."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")  # writes None as an empty cell
    if header:
        writer.writerow(csv_columns(with_fit=with_fit))
    for item in items:
        values = _offer_values(item.row)
        for i in _TEXT_POS:
            text = values[i]
            if text and text.startswith(_FORMULA_START):
                values[i] = "'" + text
        values.append(f"/offers/{item.row.id}" + (f"?{link_query}" if link_query else ""))
        if with_fit:
            fit = fit_dict(item.fit) if item.fit is not None else {}
            values += [_csv_cell(fit.get(c)) for c in FIT_FIELDS]
        writer.writerow(values)
    return buffer.getvalue()


def to_csv(items: Sequence[RankedOffer], *, with_fit: bool, link_query: str = "") -> str:
    """CSV text with a header row; the columns are the JSON fields in the same order."""
    return csv_rows(items, with_fit=with_fit, header=True, link_query=link_query)


def json_lines(items: Sequence[RankedOffer], link_query: str = "") -> str:
    """One JSON object per line (JSON Lines), the fields of /api/offers' offers."""
    return "".join(
        json.dumps(offer_dict(item, link_query), separators=(",", ":")) + "\n" for item in items
    )
