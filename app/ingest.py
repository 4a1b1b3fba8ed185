"""Ingest one provider scrape into the database, in one transaction.

Offers are upserted by (provider, instance type, region, spot). Offers of the scraped providers
missing from a successful scrape become inactive (kept, with last seen). A price or
availability change appends a price-history point. Callers decide whether a scrape is good
enough to ingest (`check_sanity`); a rejected scrape changes no offer.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.gpus.catalog import UNKNOWN
from app.models import DataVersion, GpuModel, Offer, PricePoint, Provider, ScrapeRun
from app.records import OfferRecord
from app.regions import continent_for_region

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
    }


_HISTORY_FIELDS = ("price_per_hour", "spot_price_per_hour", "availability", "availability_count")


def _history_point(offer: Offer, now: datetime) -> PricePoint:
    return PricePoint(
        offer_id=offer.id,
        observed_at=now,
        price_per_hour=offer.price_per_hour,
        spot_price_per_hour=offer.spot_price_per_hour,
        availability=offer.availability,
        availability_count=offer.availability_count,
    )


def ensure_providers(session: Session, names: dict[str, str]) -> None:
    """Create provider rows that do not exist yet (id -> display name)."""
    existing = set(session.scalars(select(Provider.id).where(Provider.id.in_(list(names)))))
    for provider_id, display in names.items():
        if provider_id not in existing:
            session.add(Provider(id=provider_id, display_name=display))
    session.flush()


def ingest_records(
    session: Session,
    *,
    source: str,
    records: Sequence[OfferRecord],
    now: datetime,
    provider_names: dict[str, str] | None = None,
) -> IngestStats:
    """Upsert `records` and deactivate the scraped providers' missing offers; caller commits."""
    unique, warnings = dedupe(records)
    stats = IngestStats(seen=len(unique), warnings=warnings)
    providers = {r.provider for r in unique}
    names = {p: (provider_names or {}).get(p, p) for p in providers}
    ensure_providers(session, names)
    known_gpus = set(session.scalars(select(GpuModel.slug)))
    unknown_models = {r.gpu_model for r in unique if r.gpu_model not in known_gpus} - {UNKNOWN}
    if unknown_models:
        stats.warnings.append(f"GPU slugs not in the catalog, stored as unknown: {unknown_models}")

    existing: dict[OfferKey, Offer] = {
        (o.provider_id, o.instance_type, o.region, o.spot): o
        for o in session.scalars(select(Offer).where(Offer.provider_id.in_(list(providers))))
    }
    new_offers: list[Offer] = []
    changed: list[Offer] = []
    for record in unique:
        values = offer_values(record, known_gpus)
        offer = existing.get(record.key)
        if offer is None:
            offer = Offer(
                provider_id=record.provider,
                instance_type=record.instance_type,
                region=record.region,
                spot=record.spot,
                source=source,
                first_seen=now,
                last_seen=now,
                active=True,
                **values,
            )
            session.add(offer)
            new_offers.append(offer)
            stats.added += 1
            continue
        history_changed = not offer.active or any(
            getattr(offer, name) != values[name] for name in _HISTORY_FIELDS
        )
        for name, value in values.items():
            setattr(offer, name, value)
        offer.source = source
        offer.last_seen = now
        offer.active = True
        if history_changed:
            changed.append(offer)
            stats.updated += 1

    seen_keys = {r.key for r in unique}
    for key, offer in existing.items():
        if offer.active and key not in seen_keys:
            offer.active = False
            stats.removed += 1
    session.flush()  # assigns ids to new offers
    session.add_all(_history_point(o, now) for o in (*new_offers, *changed))
    bump_data_version(session, now)
    session.flush()
    return stats


def bump_data_version(session: Session, now: datetime) -> None:
    """Give the offers a new version token; caches keyed on the old one stop matching."""
    session.merge(DataVersion(id=1, token=secrets.token_hex(8), changed_at=now))
