"""Keyset pagination: `after=` names the last row shown, and the next page starts past it.

An offset makes the database walk every row before the page (offset 90,000 reads 90,050 index
entries); a keyset page is one range scan of the sort's index, wherever it is. The cursor is an
opaque URL-safe token holding the sort, the market (it changes the price the sorts read), the
last row's sort-key values and id, and its position (only to say "showing 90,001-90,050").

Sort keys are never NULL for offers ingest writes (a listing always has the price of its market:
app.records.OfferRecord; unknown VRAM sorts as -1), so the comparisons below need no NULL cases.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fastapi.exceptions import RequestValidationError
from sqlalchemy import ColumnElement, and_, or_

from app.queries.filters import sort_keys
from app.queries.params import OfferFilters, Sort
from app.queries.rows import OfferRow
from app.store.models import NO_VRAM, Offer

KEYSET_SORTS: tuple[Sort, ...] = ("price", "price_per_gpu", "vram", "newest")


@dataclass(frozen=True)
class Cursor:
    sort: Sort
    market: str
    values: tuple[Any, ...]  # the last row's sort-key values, in sort_keys order
    last_id: int
    position: int  # rows before the page this cursor starts


def _bad(message: str, value: str) -> RequestValidationError:
    return RequestValidationError(
        [{"type": "bad_cursor", "loc": ("query", "after"), "msg": message, "input": value}]
    )


def encode_cursor(cursor: Cursor) -> str:
    values = [v.isoformat() if isinstance(v, datetime) else v for v in cursor.values]
    raw = json.dumps(
        [cursor.sort, cursor.market, values, cursor.last_id, cursor.position],
        separators=(",", ":"),
    )
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(text: str, *, sort: Sort, filters: OfferFilters) -> Cursor:
    """The cursor of an `after=` value for this sort and market; a 422 naming `after` if it is
    malformed or was made for another order."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        sort_name, market, values, last_id, position = json.loads(raw)
    except (ValueError, TypeError, binascii.Error) as exc:
        raise _bad("not a page cursor from this table", text) from exc
    if sort_name != sort or market != filters.market:
        raise _bad("made for another sort or market; start from the first page", text)
    kinds = _value_kinds(sort)
    if (
        not isinstance(values, list)
        or len(values) != len(kinds)
        or not isinstance(last_id, int)
        or not isinstance(position, int)
        or position < 0
    ):
        raise _bad("not a page cursor from this table", text)
    parsed: list[Any] = []
    for kind, value in zip(kinds, values, strict=True):
        try:
            if kind == "time":
                parsed.append(datetime.fromisoformat(value))
            elif isinstance(value, int | float) and not isinstance(value, bool):
                parsed.append(float(value))
            else:
                raise TypeError(value)
        except (TypeError, ValueError) as exc:
            raise _bad("not a page cursor from this table", text) from exc
    return Cursor(sort, market, tuple(parsed), last_id, position)


def _value_kinds(sort: Sort) -> tuple[str, ...]:
    if sort == "newest":
        return ("time",)
    if sort == "vram":
        return ("number", "number")
    return ("number",)


def row_values(row: OfferRow, sort: Sort, filters: OfferFilters) -> tuple[Any, ...]:
    """A row's sort-key values, computed as the SQL of `sort_keys` computes them (the same
    IEEE double division, so a keyset comparison meets the stored row exactly)."""
    if filters.market == "spot":
        price = row.spot_price_per_hour
    else:
        price = row.price_per_hour if row.price_per_hour is not None else row.spot_price_per_hour
    per_gpu = None if price is None else price / row.gpu_count
    if sort == "price":
        return (price,)
    if sort == "vram":
        total = row.vram_gib_total if row.vram_gib_total is not None else NO_VRAM
        return (total, per_gpu)
    if sort == "newest":
        return (row.first_seen,)
    return (per_gpu,)


def next_cursor(
    rows: Sequence[OfferRow], *, sort: Sort, filters: OfferFilters, position: int
) -> str | None:
    """The `after=` value of the page following `rows` (which start at `position`)."""
    if not rows or sort not in KEYSET_SORTS:
        return None
    last = rows[-1]
    values = row_values(last, sort, filters)
    if any(v is None for v in values):
        return None  # not an offer ingest writes; offset paging still reaches what follows
    return encode_cursor(Cursor(sort, filters.market, values, last.id, position + len(rows)))


def after_clause(cursor: Cursor, filters: OfferFilters) -> ColumnElement[bool]:
    """Rows strictly after the cursor in the sort's order.

    The first key's bound comes first on its own (key >= v, or <= v descending) so both
    planners seek the sort's index to it; the OR chain only settles ties at that value.
    """
    keys = sort_keys(cursor.sort, filters)[:-1]  # the trailing id is the cursor's last_id
    first, first_desc = keys[0]
    bound = first <= cursor.values[0] if first_desc else first >= cursor.values[0]
    return and_(bound, _beyond(keys, cursor.values, cursor.last_id, 0))


def _beyond(
    keys: Sequence[tuple[ColumnElement[Any], bool]],
    values: Sequence[Any],
    last_id: int,
    i: int,
) -> ColumnElement[bool]:
    if i == len(keys):
        return Offer.id > last_id
    key, desc = keys[i]
    past = key < values[i] if desc else key > values[i]
    return or_(past, and_(key == values[i], _beyond(keys, values, last_id, i + 1)))
