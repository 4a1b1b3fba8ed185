"""Memoize read-only aggregates over the offers table until the data changes.

Every ingest (and catalog sync) writes a new data-version token in the same transaction as its
offers, so a value cached under the token a request reads is exactly what a fresh query would
return. Each process keeps its own cache; a token read is one primary-key lookup.

Shared namespaces (`share`) are also kept in the `aggregate_cache` table, as JSON, under their
data version: a warmer (the ingesting worker before its commit, a process starting up) writes
them through its session inside `writing_shared`, and every process reads them on a miss, so
no replica's first request after a scrape or a restart recomputes what was warmed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from app.store.models import AggregateCache, DataVersion, utcnow

T = TypeVar("T")

MAX_ENTRIES = 2048

_entries: OrderedDict[tuple[Hashable, ...], Any] = OrderedDict()
_lock = threading.Lock()

# Namespaces kept in the aggregate_cache table, and the dataclasses their JSON may hold.
_SHARED: set[str] = set()
_TYPES: dict[str, type[Any]] = {}
_WRITE_SHARED = "gpufit_write_shared"


def data_version(session: Session) -> str | None:
    """The current data-version token, or None before the first ingest."""
    return session.scalar(select(DataVersion.token).where(DataVersion.id == 1))


def bump_data_version(session: Session, now: datetime | None = None) -> None:
    """A new data-version token, in the caller's transaction: older cache entries stop matching."""
    session.merge(DataVersion(id=1, token=secrets.token_hex(8), changed_at=now or utcnow()))


def share(namespace: str, *types: type[Any]) -> None:
    """Keep `namespace` in the shared table too; its values are JSON of `types` (dataclasses),
    tuples, lists, dicts, datetimes and scalars."""
    _SHARED.add(namespace)
    for cls in types:
        _TYPES[cls.__qualname__] = cls


@contextmanager
def writing_shared(session: Session) -> Iterator[None]:
    """Inside the block, values computed through `session` are also written to the shared
    table, in its transaction (warmers only: requests just read it)."""
    session.info[_WRITE_SHARED] = True
    try:
        yield
    finally:
        session.info.pop(_WRITE_SHARED, None)


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
    shared = namespace in _SHARED
    digest = hashlib.sha256(repr((key, _format())).encode()).hexdigest() if shared else ""
    stored = _read_shared(session, version, namespace, digest) if shared else None
    value = _MISSING
    if stored is not None:
        try:
            value = _decode(json.loads(stored))
        except (KeyError, TypeError, ValueError):
            value = _MISSING  # written by other code (a deploy); computed afresh below
    if value is _MISSING:
        # Outside the lock: two threads may both compute; both get equal values.
        value = compute()
        if shared and session.info.get(_WRITE_SHARED):
            _write_shared(session, version, namespace, digest, value)
    with _lock:
        _entries[full_key] = value
        while len(_entries) > MAX_ENTRIES:
            _entries.popitem(last=False)
    return value


_MISSING: Any = object()


def _format() -> str:
    """The registered dataclasses' fields: part of every shared key, so values written by code
    whose dataclasses differ (another release) are never read back."""
    return ";".join(
        f"{name}:{','.join(f.name for f in dataclasses.fields(cls))}"
        for name, cls in sorted(_TYPES.items())
    )


def _read_shared(session: Session, version: str, namespace: str, digest: str) -> str | None:
    return session.scalar(
        select(AggregateCache.value).where(
            AggregateCache.version == version,
            AggregateCache.namespace == namespace,
            AggregateCache.key == digest,
        )
    )


def _write_shared(session: Session, version: str, namespace: str, digest: str, value: Any) -> None:
    row = {
        "version": version,
        "namespace": namespace,
        "key": digest,
        "value": json.dumps(_encode(value), separators=(",", ":")),
        "created_at": utcnow(),
    }
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        session.execute(pg_insert(AggregateCache).values(row).on_conflict_do_nothing())
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        session.execute(sqlite_insert(AggregateCache).values(row).on_conflict_do_nothing())
    else:  # pragma: no cover - the two supported backends are above
        session.execute(insert(AggregateCache).values(row))


def prune_shared(session: Session, *, keep_version: str) -> int:
    """Delete shared values of every other data version; returns how many rows went."""
    result = session.execute(delete(AggregateCache).where(AggregateCache.version != keep_version))
    return int(getattr(result, "rowcount", 0) or 0)


def _encode(value: Any) -> Any:
    """JSON-ready form; tuples, dicts and registered dataclasses are tagged to come back."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):
        return {"dt": value.isoformat()}
    if isinstance(value, tuple):
        return {"t": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {"m": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__qualname__
        if _TYPES.get(name) is not type(value):
            raise TypeError(f"{name} is not registered with data_cache.share")
        fields = {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"d": name, "f": fields}
    raise TypeError(f"cannot keep a {type(value).__name__} in the shared cache")


def _decode(data: Any) -> Any:
    if isinstance(data, list):
        return [_decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    if "t" in data:
        return tuple(_decode(v) for v in data["t"])
    if "dt" in data:
        return datetime.fromisoformat(data["dt"])
    if "m" in data:
        return {_decode(k): _decode(v) for k, v in data["m"]}
    cls = _TYPES[data["d"]]  # only registered classes: never an arbitrary constructor
    return cls(**{name: _decode(v) for name, v in data["f"].items()})


def clear() -> None:
    """Forget everything in this process (tests)."""
    with _lock:
        _entries.clear()
