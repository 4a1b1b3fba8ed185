"""Ingest semantics: upsert by key, deactivate missing offers, history on change."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.pipeline.ingest import ScrapeRejected, check_sanity, dedupe, ingest_records
from app.records import Availability, OfferRecord
from app.store.models import Offer, PricePoint

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def rec(instance: str = "gpu_8x_h100_sxm5", price: float = 23.92, **kw: object) -> OfferRecord:
    fields: dict[str, object] = {
        "provider": "lambdalabs",
        "instance_type": instance,
        "region": "us-east-1",
        "gpu_model": "h100-sxm",
        "gpu_raw_name": "H100 (80 GB SXM5)",
        "gpu_count": 8,
        "vram_gib_per_gpu": 79.6,
        "price_per_hour": price,
    }
    fields.update(kw)
    return OfferRecord.model_validate(fields)


def ingest(factory: sessionmaker[Session], records: list[OfferRecord], now: datetime) -> None:
    with factory.begin() as session:
        ingest_records(session, source="lambdalabs", records=records, now=now)


def history(session: Session) -> list[tuple[str, float | None]]:
    rows = session.execute(
        select(Offer.instance_type, PricePoint.price_per_hour)
        .join(PricePoint, PricePoint.offer_id == Offer.id)
        .order_by(PricePoint.observed_at, PricePoint.id)
    )
    return list(rows)


def test_price_change_appends_history_and_same_price_does_not(
    session_factory: sessionmaker[Session],
) -> None:
    ingest(session_factory, [rec(price=23.92)], T0)
    ingest(session_factory, [rec(price=23.92)], T0 + timedelta(minutes=30))
    ingest(session_factory, [rec(price=21.50)], T0 + timedelta(hours=1))
    with session_factory() as session:
        assert history(session) == [("gpu_8x_h100_sxm5", 23.92), ("gpu_8x_h100_sxm5", 21.50)]
        offer = session.scalars(select(Offer)).one()
        assert offer.price_per_hour == 21.50
        assert offer.price_per_gpu_hour == pytest.approx(21.50 / 8)
        assert offer.vram_gib_total == pytest.approx(79.6 * 8)
        assert offer.first_seen == T0
        assert offer.last_seen == T0 + timedelta(hours=1)


def test_missing_offer_becomes_inactive_and_is_kept(session_factory: sessionmaker[Session]) -> None:
    ingest(session_factory, [rec("a"), rec("b")], T0)
    ingest(session_factory, [rec("a")], T0 + timedelta(hours=1))
    with session_factory() as session:
        offers = {o.instance_type: o for o in session.scalars(select(Offer))}
        assert offers["a"].active and not offers["b"].active
        assert offers["b"].last_seen == T0  # when it was last really seen
    ingest(session_factory, [rec("a"), rec("b")], T0 + timedelta(hours=2))
    with session_factory() as session:
        b = session.scalars(select(Offer).where(Offer.instance_type == "b")).one()
        assert b.active
        points = session.scalar(
            select(func.count()).select_from(PricePoint).where(PricePoint.offer_id == b.id)
        )
        assert points == 2  # first sighting and the return


def test_other_providers_are_untouched(session_factory: sessionmaker[Session]) -> None:
    ingest(session_factory, [rec("a")], T0)
    with session_factory.begin() as session:
        ingest_records(
            session,
            source="skypilot-cudo",
            records=[rec("x", provider="cudo")],
            now=T0 + timedelta(hours=1),
        )
    with session_factory() as session:
        assert {o.instance_type: o.active for o in session.scalars(select(Offer))} == {
            "a": True,
            "x": True,
        }


def test_availability_change_is_history(session_factory: sessionmaker[Session]) -> None:
    ingest(session_factory, [rec(availability=Availability.IN_STOCK)], T0)
    ingest(session_factory, [rec(availability=Availability.OUT)], T0 + timedelta(hours=1))
    with session_factory() as session:
        avail = list(session.scalars(select(PricePoint.availability).order_by(PricePoint.id)))
        assert avail == ["in_stock", "out"]


def test_unknown_gpu_is_stored_as_unknown_with_raw_name(
    session_factory: sessionmaker[Session],
) -> None:
    ingest(session_factory, [rec(gpu_model="unknown", gpu_raw_name="Mystery GPU 9000")], T0)
    with session_factory() as session:
        offer = session.scalars(select(Offer)).one()
        assert offer.gpu_model_slug is None
        assert offer.gpu_raw_name == "Mystery GPU 9000"


def test_duplicates_keep_first_and_warn() -> None:
    unique, warnings = dedupe([rec(price=1.0), rec(price=2.0), rec("other")])
    assert [r.price_per_hour for r in unique] == [1.0, 23.92]
    assert len(warnings) == 1 and "duplicate" in warnings[0]


@pytest.mark.parametrize(
    ("count", "last", "ok"),
    [(0, None, False), (10, None, True), (49, 100, False), (50, 100, True), (5, 0, True)],
)
def test_sanity_check(count: int, last: int | None, ok: bool) -> None:
    if ok:
        check_sanity(count, last, 0.5)
    else:
        with pytest.raises(ScrapeRejected):
            check_sanity(count, last, 0.5)


def test_non_price_change_is_written_without_history(
    session_factory: sessionmaker[Session],
) -> None:
    ingest(session_factory, [rec(vcpus=208)], T0)
    ingest(session_factory, [rec(vcpus=224)], T0 + timedelta(minutes=30))
    with session_factory() as session:
        offer = session.scalars(select(Offer)).one()
        assert offer.vcpus == 224 and offer.last_seen == T0 + timedelta(minutes=30)
        assert len(history(session)) == 1


def test_unchanged_offer_only_moves_last_seen_and_source(
    session_factory: sessionmaker[Session],
) -> None:
    ingest(session_factory, [rec("a"), rec("b")], T0)
    with session_factory.begin() as session:
        stats = ingest_records(
            session, source="skypilot-lambda", records=[rec("a")], now=T0 + timedelta(hours=1)
        )
    assert (stats.seen, stats.added, stats.updated, stats.removed) == (1, 0, 0, 1)
    with session_factory() as session:
        a = session.scalars(select(Offer).where(Offer.instance_type == "a")).one()
        assert a.source == "skypilot-lambda" and a.last_seen == T0 + timedelta(hours=1)
        assert a.first_seen == T0


def test_large_scrape_round_trips_every_offer(session_factory: sessionmaker[Session]) -> None:
    # More offers than one id chunk, so every bulk statement runs more than once.
    n = 12_000
    first = [rec(f"vm-{i}", price=1.0 + i / 1000) for i in range(n)]
    with session_factory.begin() as session:
        stats = ingest_records(session, source="lambdalabs", records=first, now=T0)
    assert stats.added == n
    second = [rec(f"vm-{i}", price=2.0 if i % 3 == 0 else 1.0 + i / 1000) for i in range(1, n)]
    with session_factory.begin() as session:
        stats = ingest_records(
            session, source="lambdalabs", records=second, now=T0 + timedelta(hours=1)
        )
    assert (stats.added, stats.updated, stats.removed) == (0, len(range(3, n, 3)), 1)
    with session_factory() as session:
        rows = [
            tuple(r) for r in session.execute(select(Offer.instance_type, Offer.price_per_hour))
        ]
        prices = dict(rows)
        assert prices["vm-3"] == 2.0 and prices["vm-4"] == 1.004 and len(prices) == n
        active = session.scalar(select(func.count()).select_from(Offer).where(Offer.active))
        assert active == n - 1
        assert session.scalar(select(func.count()).select_from(PricePoint)) == n + (n - 1) // 3


def test_offers_already_in_the_session_are_refreshed(
    session_factory: sessionmaker[Session],
) -> None:
    ingest(session_factory, [rec(price=10.0)], T0)
    with session_factory.begin() as session:
        held = session.scalars(select(Offer)).one()
        ingest_records(session, source="lambdalabs", records=[rec(price=9.0)], now=T0)
        assert held.price_per_hour == 9.0


def test_change_log_records_each_scrapes_change_set(
    session_factory: sessionmaker[Session],
) -> None:
    """One row per new, re-priced, re-stocked, vanished and returning offer; none unchanged."""
    from app.store.models import GpuPricePoint, OfferChange

    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    ingest(session_factory, [rec("a"), rec("b"), rec("c"), rec("d")], t0)
    ingest(
        session_factory,
        [rec("a"), rec("b", price=20.0), rec("c", availability=Availability.OUT)],
        t0 + timedelta(hours=1),
    )
    ingest(session_factory, [rec("a"), rec("b", price=20.0), rec("d")], t0 + timedelta(hours=2))
    with session_factory() as session:
        rows = session.execute(
            select(
                Offer.instance_type,
                OfferChange.kind,
                OfferChange.price_before,
                OfferChange.price_after,
                OfferChange.availability_after,
            )
            .join(Offer, Offer.id == OfferChange.offer_id)
            .order_by(OfferChange.id)
        ).all()
        snapshots = session.scalars(
            select(GpuPricePoint.min_price_per_gpu).order_by(GpuPricePoint.id)
        ).all()
    assert [(r[0], r[1]) for r in rows] == [
        ("a", "new"), ("b", "new"), ("c", "new"), ("d", "new"),
        ("b", "price"), ("c", "availability"), ("d", "gone"),
        ("d", "back"), ("c", "gone"),
    ]  # fmt: skip
    assert rows[4][2:4] == (23.92, 20.0) and rows[5][4] == "out"
    # The GPU page's history: each scrape's cheapest listed price per GPU-hour.
    assert snapshots == pytest.approx([23.92 / 8, 20.0 / 8, 20.0 / 8])
