"""Ingest one provider scrape into the database, in one transaction.

Offers are upserted by (provider, instance type, region, spot). Offers of the scraped providers
missing from a successful scrape become inactive (kept, with last seen). A price or
availability change appends a price-history point, and every new, returning, re-priced,
re-stocked or vanished offer a row of the change log (`offer_changes`), which saved-search feeds
read; each scraped provider's price range per GPU model is snapshotted (`gpu_price_points`).
Callers decide whether a scrape is good enough to ingest (`check_sanity`); a rejected scrape
changes no offer.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, insert, literal, select, text, update
from sqlalchemy.orm import Session

from app.gpus.catalog import UNKNOWN
from app.records import OfferRecord
from app.regions import continent_for_region
from app.store.data_cache import bump_data_version
from app.store.models import (
    GpuModel,
    GpuPricePoint,
    Offer,
    OfferChange,
    PricePoint,
    Provider,
    ScrapeRun,
    UTCDateTime,
    per_gpu_sql,
)
from scrapers.facts import display_name

OfferKey = tuple[str, str, str, bool]


@dataclass
class IngestStats:
    seen: int = 0
    added: int = 0
    updated: int = 0
    removed: int = 0
    warnings: list[str] = field(default_factory=list)


class ScrapeRejected(ValueError):
    """The scrape looks incomplete; ingesting it would wrongly deactivate offers."""


def dedupe(records: Iterable[OfferRecord]) -> tuple[list[OfferRecord], list[str]]:
    """Keep the first record per key; feeds repeat rows (primeintellect does), so say so."""
    unique: dict[OfferKey, OfferRecord] = {}
    warnings: list[str] = []
    for record in records:
        if record.key in unique:
            warnings.append(f"duplicate offer {record.instance_type} in {record.region} ignored")
            continue
        unique[record.key] = record
    return list(unique.values()), warnings


def check_sanity(count: int, last_good_count: int | None, min_fraction: float) -> None:
    """Raise ScrapeRejected for an empty scrape or one far smaller than the last good one."""
    if count == 0:
        raise ScrapeRejected("the feed returned no offers")
    if last_good_count and count < min_fraction * last_good_count:
        raise ScrapeRejected(
            f"only {count} offers, fewer than {min_fraction:.0%} of the last good "
            f"scrape's {last_good_count}"
        )


def last_good_count(session: Session, source: str) -> int | None:
    """Offers seen by the last successful run of `source`, if any."""
    return session.scalar(
        select(ScrapeRun.offers_seen)
        .where(ScrapeRun.source == source, ScrapeRun.status == "ok")
        .order_by(ScrapeRun.started_at.desc(), ScrapeRun.id.desc())
        .limit(1)
    )


def offer_values(record: OfferRecord, known_gpus: Collection[str]) -> dict[str, object]:
    """The offers-table column values for a record (bulk loaders reuse it)."""
    slug = record.gpu_model if record.gpu_model in known_gpus else None
    vram_total = (
        None if record.vram_gib_per_gpu is None else record.vram_gib_per_gpu * record.gpu_count
    )
    return {
        "gpu_model_slug": slug,
        "gpu_raw_name": record.gpu_raw_name,
        "gpu_count": record.gpu_count,
        "vram_gib_per_gpu": record.vram_gib_per_gpu,
        "vram_gib_total": vram_total,
        "vcpus": record.vcpus,
        "ram_gib": record.ram_gib,
        "disk_gib": record.disk_gib,
        "interconnect": record.interconnect.value,
        "network": record.network.value,
        "network_gbps": record.network_gbps,
        "price_per_hour": record.price_per_hour,
        "spot_price_per_hour": record.spot_price_per_hour,
        "price_per_gpu_hour": record.price_per_gpu_hour,
        "currency": record.currency,
        "billing": record.billing.value,
        "availability": record.availability.value,
        "availability_count": record.availability_count,
        "continent": continent_for_region(record.region),
        "provider_url": record.provider_url,
    }


_HISTORY_FIELDS = ("price_per_hour", "spot_price_per_hour", "availability", "availability_count")
_VALUE_FIELDS = (
    "gpu_model_slug", "gpu_raw_name", "gpu_count", "vram_gib_per_gpu", "vram_gib_total", "vcpus",
    "ram_gib", "disk_gib", "interconnect", "network", "network_gbps", "price_per_hour",
    "spot_price_per_hour", "price_per_gpu_hour", "currency", "billing", "availability",
    "availability_count", "continent", "provider_url",
)  # fmt: skip
_KEY_FIELDS = ("provider_id", "instance_type", "region", "spot")
_INSERT_FIELDS = (*_KEY_FIELDS, "source", "first_seen", "last_seen", "active", *_VALUE_FIELDS)
_POINT_FIELDS = ("offer_id", "observed_at", *_HISTORY_FIELDS)
_HISTORY_POS = tuple(_VALUE_FIELDS.index(name) for name in _HISTORY_FIELDS)
_PRICE_POS = _VALUE_FIELDS.index("price_per_hour")
_SPOT_POS = _VALUE_FIELDS.index("spot_price_per_hour")
_AVAILABILITY_POS = _VALUE_FIELDS.index("availability")
_CHANGE_FIELDS = (
    "offer_id", "changed_at", "kind", "price_before", "price_after", "spot_before", "spot_after",
    "availability_before", "availability_after",
)  # fmt: skip
# The change log keeps this long; a saved search unread for longer catches up from its start.
CHANGE_LOG_DAYS = 30
# Well under SQLite's and Postgres' bound-parameter limits.
_ID_CHUNK = 5_000


def ensure_providers(session: Session, names: dict[str, str]) -> None:
    """Create provider rows that do not exist yet and correct stale display names (id -> name)."""
    existing = {
        p.id: p for p in session.scalars(select(Provider).where(Provider.id.in_(list(names))))
    }
    for provider_id, display in names.items():
        row = existing.get(provider_id)
        if row is None:
            session.add(Provider(id=provider_id, display_name=display))
        elif row.display_name != display:
            row.display_name = display
    session.flush()


@dataclass
class _Plan:
    """What one scrape does to the offers table, worked out in memory before any write."""

    new: list[tuple[OfferKey, tuple[Any, ...]]] = field(default_factory=list)
    rewrite: list[dict[str, Any]] = field(default_factory=list)  # some column changed
    touch: list[int] = field(default_factory=list)  # unchanged: only last seen moves
    history: list[tuple[int, tuple[Any, ...]]] = field(default_factory=list)
    gone: list[int] = field(default_factory=list)
    # Change-log rows of existing offers: (id, kind, (price, spot, availability) before, after).
    changes: list[tuple[int, str, tuple[Any, ...], tuple[Any, ...] | None]] = field(
        default_factory=list
    )


def _logged(values: Sequence[Any]) -> tuple[Any, ...]:
    return (values[_PRICE_POS], values[_SPOT_POS], values[_AVAILABILITY_POS])


def _change_kind(active: bool, old: Sequence[Any], new: Sequence[Any]) -> str | None:
    """What the change log records for an existing offer seen again (None: nothing)."""
    if not active:
        return "back"
    if old[_PRICE_POS] != new[_PRICE_POS] or old[_SPOT_POS] != new[_SPOT_POS]:
        return "price"
    if old[_AVAILABILITY_POS] != new[_AVAILABILITY_POS]:
        return "availability"
    return None


def _plan(
    unique: Sequence[OfferRecord],
    existing: dict[OfferKey, Sequence[Any]],
    known_gpus: Collection[str],
    source: str,
    now: datetime,
) -> _Plan:
    """Classify every record as new, changed or unchanged, and the missing offers as gone."""
    plan = _Plan()
    for record in unique:
        by_name = offer_values(record, known_gpus)
        values = tuple(by_name[name] for name in _VALUE_FIELDS)
        row = existing.get(record.key)
        if row is None:
            plan.new.append((record.key, values))
            continue
        offer_id, active, old_source, *old = row
        if not active or any(old[i] != values[i] for i in _HISTORY_POS):
            plan.history.append((offer_id, values))
        kind = _change_kind(active, old, values)
        if kind is not None:
            plan.changes.append((offer_id, kind, _logged(old), _logged(values)))
        if active and old_source == source and tuple(old) == values:
            plan.touch.append(offer_id)
        else:
            rewrite = dict(zip(_VALUE_FIELDS, values, strict=True))
            rewrite.update(id=offer_id, source=source, last_seen=now, active=True)
            plan.rewrite.append(rewrite)
    seen = {r.key for r in unique}
    for key, row in existing.items():
        if row[1] and key not in seen:
            plan.gone.append(row[0])
            plan.changes.append((row[0], "gone", _logged(row[3:]), None))
    return plan


def _existing(session: Session, providers: Collection[str]) -> dict[OfferKey, Sequence[Any]]:
    """(id, active, source, *value columns) of the providers' stored offers, by key."""
    columns = [getattr(Offer, name) for name in (*_KEY_FIELDS, "id", "active", "source")]
    columns += [getattr(Offer, name) for name in _VALUE_FIELDS]
    stmt = select(*columns).where(Offer.provider_id.in_(list(providers)))
    # Core rows, not ORM objects: a large provider has tens of thousands of offers.
    return {tuple(row[:4]): tuple(row[4:]) for row in session.connection().execute(stmt)}


def _chunks(ids: Sequence[int]) -> Iterator[Sequence[int]]:
    for i in range(0, len(ids), _ID_CHUNK):
        yield ids[i : i + _ID_CHUNK]


def _is_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def _copy(
    session: Session, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """COPY rows into a Postgres table on the session's own connection (same transaction)."""
    driver = session.connection().connection.driver_connection
    with driver.cursor() as cursor:  # type: ignore[union-attr]
        with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


def _insert_offers(
    session: Session, plan: _Plan, source: str, now: datetime
) -> dict[OfferKey, int]:
    """Insert the new offers; returns their ids by key."""
    if not plan.new:
        return {}
    rows = [(*key, source, now, now, True, *values) for key, values in plan.new]
    returning = (Offer.id, *(getattr(Offer, name) for name in _KEY_FIELDS))
    if _is_postgres(session):
        names = ", ".join(_INSERT_FIELDS)
        # COPY into a scratch table, then one INSERT ... SELECT: SQLAlchemy's multi-row
        # INSERT statements cost seconds of client-side parameter handling at 10k offers.
        session.execute(
            text(
                f"CREATE TEMP TABLE ingest_new_offers ON COMMIT DROP AS "
                f"SELECT {names} FROM offers WITH NO DATA"
            )
        )
        _copy(session, "ingest_new_offers", _INSERT_FIELDS, rows)
        result = session.execute(
            text(
                f"INSERT INTO offers ({names}) SELECT {names} FROM ingest_new_offers "
                "RETURNING id, provider_id, instance_type, region, spot"
            )
        )
        session.execute(text("DROP TABLE ingest_new_offers"))
    else:
        stmt = insert(Offer).returning(*returning, sort_by_parameter_order=True)
        result = session.execute(
            stmt, [dict(zip(_INSERT_FIELDS, row, strict=True)) for row in rows]
        )
    ids = {(p, i, r, bool(s)): offer_id for offer_id, p, i, r, s in result}
    if len(ids) != len(plan.new):
        raise RuntimeError(f"inserted {len(plan.new)} offers but {len(ids)} ids came back")
    return ids


def _insert_history(session: Session, points: Sequence[tuple[Any, ...]]) -> None:
    if not points:
        return
    if _is_postgres(session):
        _copy(session, "price_history", _POINT_FIELDS, points)
    else:
        session.execute(
            insert(PricePoint), [dict(zip(_POINT_FIELDS, p, strict=True)) for p in points]
        )


def _update_offers(session: Session, plan: _Plan, now: datetime) -> None:
    """Rewrite changed offers, move last seen on unchanged ones, deactivate the missing."""
    no_sync = {"synchronize_session": False}
    if plan.rewrite:
        # ORM bulk UPDATE by primary key: one executemany.
        session.execute(update(Offer), plan.rewrite, execution_options=no_sync)
    for ids in _chunks(plan.touch):
        session.execute(
            update(Offer).where(Offer.id.in_(ids)).values(last_seen=now),
            execution_options=no_sync,
        )
    for ids in _chunks(plan.gone):
        session.execute(
            update(Offer).where(Offer.id.in_(ids)).values(active=False),
            execution_options=no_sync,
        )


def _write(session: Session, plan: _Plan, source: str, now: datetime) -> dict[OfferKey, int]:
    """Every write of the plan but the change log; returns the new offers' ids by key."""
    new_ids = _insert_offers(session, plan, source, now)
    _update_offers(session, plan, now)
    history = [(new_ids[key], values) for key, values in plan.new] + plan.history
    _insert_history(
        session, [(offer_id, now, *(v[i] for i in _HISTORY_POS)) for offer_id, v in history]
    )
    return new_ids


def _log_changes(
    session: Session, plan: _Plan, new_ids: dict[OfferKey, int], now: datetime
) -> None:
    """Append the scrape's change set to the change log and drop entries past its retention.

    Called after the data-version bump: that row lock orders concurrent ingests, so change ids
    grow in commit order and a reader that has seen id n has seen every change before it.
    """
    rows: list[tuple[Any, ...]] = [
        (new_ids[key], now, "new", *_pair(None, _logged(values))) for key, values in plan.new
    ]
    for offer_id, kind, before, after in plan.changes:
        rows.append((offer_id, now, kind, *_pair(before, after)))
    if rows:
        if _is_postgres(session):
            _copy(session, "offer_changes", _CHANGE_FIELDS, rows)
        else:
            session.execute(
                insert(OfferChange), [dict(zip(_CHANGE_FIELDS, r, strict=True)) for r in rows]
            )
    cutoff = now - timedelta(days=CHANGE_LOG_DAYS)
    session.execute(
        delete(OfferChange).where(OfferChange.changed_at < cutoff),
        execution_options={"synchronize_session": False},
    )


def _snapshot_gpu_prices(session: Session, providers: Collection[str], now: datetime) -> None:
    """Record the scraped providers' cheapest and dearest on-demand price per GPU-hour of each
    GPU model now listed (one INSERT ... SELECT: a few rows per GPU model and provider)."""
    per_gpu = per_gpu_sql(Offer.price_per_hour.expression)
    snapshot = (
        select(
            Offer.gpu_model_slug,
            Offer.provider_id,
            literal(now, UTCDateTime()),
            func.min(per_gpu),
            func.max(per_gpu),
            func.count(),
        )
        .where(
            Offer.provider_id.in_(sorted(providers)),
            Offer.active.is_(True),
            Offer.gpu_model_slug.is_not(None),
            Offer.price_per_hour.is_not(None),
        )
        .group_by(Offer.gpu_model_slug, Offer.provider_id)
    )
    columns = ["gpu_model_slug", "provider_id", "observed_at", "min_price_per_gpu",
               "max_price_per_gpu", "offers"]  # fmt: skip
    session.execute(insert(GpuPricePoint).from_select(columns, snapshot))


def _pair(before: tuple[Any, ...] | None, after: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """(price before, after, spot before, after, availability before, after)."""
    b = before or (None, None, None)
    a = after or (None, None, None)
    return (b[0], a[0], b[1], a[1], b[2], a[2])


def ingest_records(
    session: Session,
    *,
    source: str,
    records: Sequence[OfferRecord],
    now: datetime,
    provider_names: dict[str, str] | None = None,
) -> IngestStats:
    """Upsert `records` and deactivate the scraped providers' missing offers; caller commits.

    Set-based: one read of the providers' offers, then bulk writes (COPY on Postgres).
    """
    unique, warnings = dedupe(records)
    stats = IngestStats(seen=len(unique), warnings=warnings)
    providers = {r.provider for r in unique}
    names = {p: (provider_names or {}).get(p) or display_name(p) for p in providers}
    ensure_providers(session, names)
    known_gpus = set(session.scalars(select(GpuModel.slug)))
    unknown_models = {r.gpu_model for r in unique if r.gpu_model not in known_gpus} - {UNKNOWN}
    if unknown_models:
        stats.warnings.append(f"GPU slugs not in the catalog, stored as unknown: {unknown_models}")
    plan = _plan(unique, _existing(session, providers), known_gpus, source, now)
    new_ids = _write(session, plan, source, now)
    stats.added, stats.updated, stats.removed = len(plan.new), len(plan.history), len(plan.gone)
    bump_data_version(session, now)
    session.flush()  # the bump's row lock, before any change id is drawn
    _log_changes(session, plan, new_ids, now)
    _snapshot_gpu_prices(session, providers, now)
    # The writes bypassed the identity map; drop any Offer the session already held.
    session.expire_all()
    return stats
