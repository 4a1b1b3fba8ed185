"""Ingest one provider scrape into the database, in one transaction.

Offers are upserted by (provider, instance type, region, spot). Offers of the scraped providers
missing from a successful scrape become inactive (kept, with last seen). A price or
availability change appends a price-history point. Callers decide whether a scrape is good
enough to ingest (`check_sanity`); a rejected scrape changes no offer.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, text, update
from sqlalchemy.orm import Session

from app.gpus.catalog import UNKNOWN
from app.records import OfferRecord
from app.regions import continent_for_region
from app.store.data_cache import bump_data_version
from app.store.models import GpuModel, Offer, PricePoint, Provider, ScrapeRun
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
        if active and old_source == source and tuple(old) == values:
            plan.touch.append(offer_id)
        else:
            rewrite = dict(zip(_VALUE_FIELDS, values, strict=True))
            rewrite.update(id=offer_id, source=source, last_seen=now, active=True)
            plan.rewrite.append(rewrite)
    seen = {r.key for r in unique}
    plan.gone = [row[0] for key, row in existing.items() if row[1] and key not in seen]
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


def _write(session: Session, plan: _Plan, source: str, now: datetime) -> None:
    new_ids = _insert_offers(session, plan, source, now)
    _update_offers(session, plan, now)
    history = [(new_ids[key], values) for key, values in plan.new] + plan.history
    _insert_history(
        session, [(offer_id, now, *(v[i] for i in _HISTORY_POS)) for offer_id, v in history]
    )


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
    _write(session, plan, source, now)
    stats.added, stats.updated, stats.removed = len(plan.new), len(plan.history), len(plan.gone)
    bump_data_version(session, now)
    session.flush()
    # The writes bypassed the identity map; drop any Offer the session already held.
    session.expire_all()
    return stats
