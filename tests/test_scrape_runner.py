"""The scrape runner: good scrapes ingest; every kind of failure changes nothing and is recorded."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.core.settings import ProviderSettings
from app.pipeline.scrape_runner import ScrapeRunner
from app.store.models import Offer, PricePoint, ScrapeRun
from scrapers.registry import get_scraper_class
from tests.feed_server import FeedServer

CUDO = get_scraper_class("skypilot-cudo")
HEADER = (
    "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice"
)
ROW = (
    "ice-lake-a40-compute_{n}x,A40,{n}.0,4,16,{price},ca-montreal-3,"
    "\"{{'Gpus': [{{'Name': 'A40', 'Manufacturer': 'NVIDIA', 'Count': '{n}.0', "
    "'MemoryInfo': {{'SizeInMiB': 49152}}}}], 'TotalGpuMemoryInMiB': 49152}}\","
)


def catalog(price: float = 0.37, rows: int = 4) -> str:
    lines = [HEADER] + [ROW.format(n=n, price=price * n) for n in range(1, rows + 1)]
    return "\n".join(lines) + "\n"


def snapshot(factory: sessionmaker[Session]) -> list[tuple[object, ...]]:
    """Everything a scrape writes: each offer's stored columns and each history point."""
    with factory() as session:
        offers = session.execute(select(Offer).order_by(Offer.id)).scalars()
        rows: list[tuple[object, ...]] = [
            tuple(getattr(o, c.key) for c in Offer.__table__.columns) for o in offers
        ]
        points = session.execute(
            select(*PricePoint.__table__.columns).order_by(PricePoint.id)
        ).all()
        return [*rows, *(("history", *p) for p in points)]


def runs(factory: sessionmaker[Session]) -> list[tuple[str, str | None]]:
    with factory() as session:
        return list(
            session.execute(select(ScrapeRun.status, ScrapeRun.error).order_by(ScrapeRun.id))
        )


async def test_good_scrape_then_price_change_gives_two_history_points(
    runner: ScrapeRunner, server: FeedServer, session_factory: sessionmaker[Session]
) -> None:
    server.serve("/cudo/vms.csv", catalog(0.37, rows=1), content_type="text/csv")
    assert (await runner.run(CUDO)).status == "ok"
    server.serve("/cudo/vms.csv", catalog(0.40, rows=1), content_type="text/csv")
    result = await runner.run(CUDO)
    assert (result.status, result.updated) == ("ok", 1)
    with session_factory() as session:
        prices = list(session.scalars(select(PricePoint.price_per_hour).order_by(PricePoint.id)))
    assert prices == [pytest.approx(0.37), pytest.approx(0.40)]


@pytest.mark.parametrize(
    ("kind", "expect_status", "expect_error"),
    [
        ("http500", "failed", "HTTP 500"),
        ("timeout", "failed", "timed out"),
        ("truncated", "failed", "malformed feed"),
        ("empty", "failed", "no offers"),
        ("shrunk", "partial", "fewer than 50%"),
    ],
)
async def test_failures_change_nothing_and_are_recorded(
    runner: ScrapeRunner,
    server: FeedServer,
    session_factory: sessionmaker[Session],
    client: TestClient,
    kind: str,
    expect_status: str,
    expect_error: str,
) -> None:
    server.serve("/cudo/vms.csv", catalog(0.37), content_type="text/csv")
    assert (await runner.run(CUDO)).status == "ok"
    before = snapshot(session_factory)

    good = catalog(0.99)  # a changed price that must not land
    responses = {
        "http500": {"body": "oops", "status": 500},
        "timeout": {"body": good, "delay": 3.0},
        "truncated": {"body": good[: len(good) - 40]},
        "empty": {"body": HEADER + "\n"},
        "shrunk": {"body": catalog(0.99, rows=1)},
    }
    server.serve("/cudo/vms.csv", content_type="text/csv", **responses[kind])  # type: ignore[arg-type]
    result = await runner.run(CUDO)

    assert result.status == expect_status
    assert result.error and expect_error in result.error
    assert snapshot(session_factory) == before
    assert runs(session_factory)[-1] == (expect_status, result.error)

    # /api/providers lists providers by id, with the feed that keeps each current as `source`.
    listed = {p["source"]: p for p in client.get("/api/providers").json()["providers"]}
    assert listed[CUDO.name]["last_status"] == expect_status
    assert expect_error in listed[CUDO.name]["last_error"]
    assert listed[CUDO.name]["last_success"] is not None


async def test_one_provider_failing_does_not_touch_another(
    runner: ScrapeRunner, server: FeedServer, session_factory: sessionmaker[Session]
) -> None:
    server.serve("/cudo/vms.csv", catalog(0.37), content_type="text/csv")
    assert (await runner.run(CUDO)).status == "ok"
    nebius = get_scraper_class("skypilot-nebius")
    runner.settings.providers[nebius.name] = ProviderSettings(url=server.url + "/nebius/vms.csv")
    server.serve("/nebius/vms.csv", "boom", status=503)
    assert (await runner.run(nebius)).status == "failed"
    with session_factory() as session:
        active = session.scalar(select(func.count()).select_from(Offer).where(Offer.active))
    assert active == 4


def test_abandoned_running_runs_are_closed(session_factory: sessionmaker[Session]) -> None:
    """A run is dead once its heartbeat (its start, before the first beat) is a minute old."""
    from datetime import UTC, datetime, timedelta

    from app.pipeline.scrape_runner import ABANDONED_AFTER, close_abandoned_runs

    now = datetime(2026, 12, 2, tzinfo=UTC)
    stale = now - ABANDONED_AFTER - timedelta(seconds=1)
    fresh = now - ABANDONED_AFTER / 4
    with session_factory.begin() as session:
        session.add_all(
            [
                ScrapeRun(source="azure", started_at=now - timedelta(hours=3), status="running"),
                ScrapeRun(source="oci", started_at=stale, heartbeat_at=stale, status="running"),
                ScrapeRun(
                    source="aws",
                    started_at=now - timedelta(hours=2),
                    heartbeat_at=fresh,
                    status="running",
                ),
                ScrapeRun(source="gcp", started_at=fresh, status="running"),
            ]
        )
    with session_factory.begin() as session:
        assert close_abandoned_runs(session, now) == 2
    assert [status for status, _ in runs(session_factory)] == [
        "failed",
        "failed",
        "running",
        "running",
    ]
    assert runs(session_factory)[0][1] == "interrupted: the process running it stopped"


async def test_scrape_logs_changes_once_and_feeds_read_them(
    runner: ScrapeRunner, server: FeedServer, session_factory: sessionmaker[Session]
) -> None:
    """A scrape writes its change set once; a saved view's feed reads it when next looked at."""
    from app.saved import create_saved_search, feed_entries, refresh_saved_query
    from app.store.models import OfferChange, SavedQuery, SavedSearch

    with session_factory.begin() as session:
        search = create_saved_search(session, owner_token="o" * 43, name="A40s", query="")
        search_id, key = search.id, search.query_key
    with session_factory() as session:
        state_before = session.get_one(SavedQuery, key).computed_at
    server.serve("/cudo/vms.csv", catalog(0.37, rows=2), content_type="text/csv")
    assert (await runner.run(CUDO)).status == "ok"
    with session_factory() as session:
        kinds = session.scalars(select(OfferChange.kind)).all()
        assert kinds == ["new", "new"]
        # The scrape left the saved view alone: no work per saved search.
        assert session.get_one(SavedQuery, key).computed_at == state_before
        kept = feed_entries(session, search=session.get_one(SavedSearch, search_id))
        assert [e.kind for e in kept] == ["created"]
    with session_factory.begin() as session:
        assert refresh_saved_query(session, key=key) == 1
    with session_factory() as session:
        entries = feed_entries(session, search=session.get_one(SavedSearch, search_id))
        assert [e.kind for e in entries] == ["new_offers", "created"]
        assert entries[0].title == "2 new offer(s) match “A40s”"


async def test_scrape_cost_does_not_grow_with_saved_searches(
    runner: ScrapeRunner, server: FeedServer, session_factory: sessionmaker[Session]
) -> None:
    """The statements a scrape sends are the same with 1 or 40 saved searches."""
    from sqlalchemy import event

    from app.saved import create_saved_search

    def statements_of_one_scrape(price: float) -> int:
        count = 0

        def before(*_: object) -> None:
            nonlocal count
            count += 1

        engine = runner.engine
        event.listen(engine, "before_cursor_execute", before)
        try:
            server.serve("/cudo/vms.csv", catalog(price, rows=2), content_type="text/csv")
            assert asyncio.run(runner.run(CUDO)).status == "ok"
        finally:
            event.remove(engine, "before_cursor_execute", before)
        return count

    with session_factory.begin() as session:
        create_saved_search(session, owner_token="o" * 43, name="all", query="")
    await asyncio.to_thread(statements_of_one_scrape, 0.37)
    one = await asyncio.to_thread(statements_of_one_scrape, 0.38)
    with session_factory.begin() as session:
        for i in range(40):
            query = f"min_vram={i}" if i % 2 else f"provider=p{i}&gpu=a40"
            create_saved_search(session, owner_token="o" * 43, name=f"s{i}", query=query)
    forty = await asyncio.to_thread(statements_of_one_scrape, 0.39)
    assert forty == one


async def test_secondary_feed_failure_keeps_primary_offers_as_partial(
    database_url: str,
    engine: object,
    session_factory: sessionmaker[Session],
    server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """AWS's spot feed is down: the on-demand offers land and the run says partial, and why."""
    import scrapers.http
    from app.core.settings import Settings
    from tests.scrapers.conftest import fixture_text

    monkeypatch.setattr(scrapers.http, "RETRY_BASE_SECONDS", 0.001)
    server.serve(
        "/aws/us-east-1/index.csv", fixture_text("aws", "us-east-1.csv"), content_type="text/csv"
    )
    # /aws/spot.json is not served: 404
    aws = ProviderSettings(
        url=server.url + "/aws/{region}/index.csv",
        extra_urls={"spot": server.url + "/aws/spot.json", "regions": "us-east-1"},
    )
    settings = Settings(
        database_url=database_url, http_timeout_seconds=0.5, providers={"aws": aws}, _env_file=None
    )
    runner = ScrapeRunner(settings, engine, session_factory)  # type: ignore[arg-type]
    result = await runner.run(get_scraper_class("aws"))
    assert result.status == "partial"
    assert result.seen == 4 and result.error and "spot prices unavailable" in result.error
    with session_factory() as session:
        active = session.scalar(
            select(func.count()).select_from(Offer).where(Offer.active, Offer.provider_id == "aws")
        )
        spot = session.scalar(
            select(func.count()).select_from(Offer).where(Offer.spot_price_per_hour.is_not(None))
        )
    assert (active, spot) == (4, 0)
    ((status, error),) = runs(session_factory)
    assert status == "partial" and error is not None and "HTTP 404" in error
