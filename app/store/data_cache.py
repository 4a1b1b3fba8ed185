"""Memoize read-only aggregates over the offers table until the data changes.

Every ingest (and catalog sync) writes a new data-version token in the same transaction as its
offers, so a value cached under the token a request reads is exactly what a fresh query would
return. Each process keeps its own cache; a token read is one primary-key lookup.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.models import DataVersion, utcnow

T = TypeVar("T")

MAX_ENTRIES = 2048

_entries: OrderedDict[tuple[Hashable, ...], Any] = OrderedDict()
_lock = threading.Lock()


def data_version(session: Session) -> str | None:
    """The current data-version token, or None before the first ingest."""
    return session.scalar(select(DataVersion.token).where(DataVersion.id == 1))


def bump_data_version(session: Session, now: datetime | None = None) -> None:
    """A new data-version token, in the caller's transaction: older cache entries stop matching."""
    session.merge(DataVersion(id=1, token=secrets.token_hex(8), changed_at=now or utcnow()))


def cached(session: Session, namespace: str, key: Hashable, compute: Callable[[], T]) -> T:
    """`compute()`, reused while the data version stays the same. Callers must not mutate it.

    Without a token (data written by something other than ingest) nothing is cached.
    """
    version = data_version(session)
    if version is None:
        return compute()
    full_key = (str(session.get_bind().engine.url), version, namespace, key)
    with _lock:
        if full_key in _entries:
            _entries.move_to_end(full_key)
            value: T = _entries[full_key]
            return value
    value = compute()  # outside the lock: two threads may both compute; both get equal values
    with _lock:
        _entries[full_key] = value
        while len(_entries) > MAX_ENTRIES:
            _entries.popitem(last=False)
    return value


def clear() -> None:
    """Forget everything (tests)."""
    with _lock:
        _entries.clear()
