"""SQL type instances made once, and rows sent to Postgres as zipped arrays.

SQLAlchemy keys its statement cache by each type's constructor arguments, found by inspecting
the class for every new type instance (~80 us each; a ranked page built ~50 a request, 5 ms of
its 25), so statements built per request use these instances instead of new ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ARRAY, Boolean, Float, Integer, Select, String, bindparam, func, select

STRING, FLOAT, BOOLEAN, INTEGER = String(), Float(), Boolean(), Integer()
ARRAYS: dict[Any, Any] = {t: ARRAY(t) for t in (STRING, FLOAT, BOOLEAN, INTEGER)}


def unnest_rows(prefix: str, columns: Sequence[tuple[str, Any, Sequence[Any]]]) -> Select[Any]:
    """Rows as one array parameter per column (name, one of the types above, values), zipped by
    `unnest` (Postgres): SQLAlchemy compiles a VALUES list at ~35 us per bound value, and an IN
    list of n values is an n-placeholder statement the driver parses anew each time."""
    return select(
        *(
            func.unnest(bindparam(f"{prefix}_{name}", list(data), type_=ARRAYS[type_])).label(name)
            for name, type_, data in columns
        )
    )
