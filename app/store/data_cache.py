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
import math
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import orjson
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


@dataclass(frozen=True)
class Codec:
    """A namespace's own JSON layout, for values too big for the generic tagged one (thousands
    of machine shapes: columns decode with `map`, not a Python call per field)."""

    encode: Callable[[Any], Any]  # value -> JSON-ready data
    decode: Callable[[Any], Any]  # JSON data -> value
    version: str  # part of the shared key: change it with the layout


_CODECS: dict[str, Codec] = {}
_WRITE_SHARED = "gpufit_write_shared"


_TOKEN_KEY = "gpufit.data_version"


def data_version(session: Session) -> str | None:
    """The current data-version token, or None before the first ingest (read once per
    transaction: a ranked page asks half a dozen times)."""
    transaction = session.get_transaction()
    held = session.info.get(_TOKEN_KEY)
    if transaction is not None and held is not None and held[0] is transaction:
        return held[1]  # type: ignore[no-any-return]
    token = session.scalar(select(DataVersion.token).where(DataVersion.id == 1))
    session.info[_TOKEN_KEY] = (session.get_transaction(), token)
    return token


def bump_data_version(session: Session, now: datetime | None = None) -> None:
    """A new data-version token, in the caller's transaction: older cache entries stop matching."""
    token = secrets.token_hex(8)
    session.merge(DataVersion(id=1, token=token, changed_at=now or utcnow()))
    session.info[_TOKEN_KEY] = (session.get_transaction(), token)


def share(namespace: str, *types: type[Any], codec: Codec | None = None) -> None:
    """Keep `namespace` in the shared table too; its values are JSON of `types` (dataclasses),
    tuples, lists, dicts, datetimes and scalars, or in `codec`'s layout."""
    _SHARED.add(namespace)
    if codec is not None:
        _CODECS[namespace] = codec
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
    codec = _CODECS.get(namespace)
    layout = (_format(), codec.version if codec else "")
    digest = hashlib.sha256(repr((key, layout)).encode()).hexdigest() if shared else ""
    stored = _read_shared(session, version, namespace, digest) if shared else None
    value = _MISSING
    if stored is not None:
        try:
            data = orjson.loads(stored)
            value = codec.decode(data) if codec else decode_data(data)
        except (KeyError, TypeError, ValueError, IndexError):
            value = _MISSING  # written by other code (a deploy); computed afresh below
    if value is _MISSING:
        # Outside the lock: two threads may both compute; both get equal values.
        value = compute()
        if shared and session.info.get(_WRITE_SHARED):
            data = codec.encode(value) if codec else encode_data(value)
            _write_shared(session, version, namespace, digest, data)
    with _lock:
        _entries[full_key] = value
        while len(_entries) > MAX_ENTRIES:
            _entries.popitem(last=False)
    return value


_MISSING: Any = object()


# Bumped whenever the JSON layout below changes: part of every shared key, like the fields.
_CODEC = "2"


def _format() -> str:
    """The codec and the registered dataclasses' fields: part of every shared key, so values
    written by code whose layout or dataclasses differ (another release) are never read back."""
    return (
        _CODEC
        + ";"
        + ";".join(
            f"{name}:{','.join(f.name for f in dataclasses.fields(cls))}"
            for name, cls in sorted(_TYPES.items())
        )
    )


def _read_shared(session: Session, version: str, namespace: str, digest: str) -> str | None:
    return session.scalar(
        select(AggregateCache.value).where(
            AggregateCache.version == version,
            AggregateCache.namespace == namespace,
            AggregateCache.key == digest,
        )
    )


def _write_shared(session: Session, version: str, namespace: str, digest: str, data: Any) -> None:
    row = {
        "version": version,
        "namespace": namespace,
        "key": digest,
        "value": orjson.dumps(data).decode(),
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


def encode_data(value: Any) -> Any:
    """The generic JSON-ready form of a cached value: tuples, dicts, datetimes, non-finite floats
    and registered dataclasses (their fields by position) are tagged to come back."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"x": repr(value)}  # JSON has no Infinity or NaN (orjson would write null)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):
        return {"dt": value.isoformat()}
    if isinstance(value, tuple):
        return {"t": [encode_data(v) for v in value]}
    if isinstance(value, list):
        return [encode_data(v) for v in value]
    if isinstance(value, dict):
        return {"m": [[encode_data(k), encode_data(v)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__qualname__
        if _TYPES.get(name) is not type(value):
            raise TypeError(f"{name} is not registered with data_cache.share")
        fields = dataclasses.fields(value)
        return {"d": name, "a": [encode_data(getattr(value, f.name)) for f in fields]}
    raise TypeError(f"cannot keep a {type(value).__name__} in the shared cache")


def decode_data(data: Any) -> Any:
    """The value `encode_data` made `data` from."""
    # Scalars are tested inline, not decoded by a call each (values of ~100,000 scalars).
    if isinstance(data, list):
        return [decode_data(v) if isinstance(v, list | dict) else v for v in data]
    if not isinstance(data, dict):
        return data
    if "a" in data:
        cls = _TYPES[data["d"]]  # only registered classes: never an arbitrary constructor
        return cls(*(decode_data(v) if isinstance(v, list | dict) else v for v in data["a"]))
    if "t" in data:
        return tuple(decode_data(v) if isinstance(v, list | dict) else v for v in data["t"])
    if "dt" in data:
        return datetime.fromisoformat(data["dt"])
    if "x" in data:
        return float(data["x"])
    return {decode_data(k): decode_data(v) for k, v in data["m"]}


def clear() -> None:
    """Forget everything in this process (tests)."""
    with _lock:
        _entries.clear()
