"""Warming: an ingest leaves the new data version's aggregates in the shared cache, so no
process's first request after a scrape (or a restart) recomputes them."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import orjson
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session, sessionmaker

from app.core.settings import ProviderSettings, Settings
from app.main import create_app
from app.pipeline.scrape_runner import ScrapeRunner
from app.queries import OfferFilters, facets
from app.queries.rows import OfferRow
from app.queries.shapes import Shape
from app.store import data_cache
from app.store.models import AggregateCache, Offer, WarmView, utcnow
from app.web import warm
from app.web.warm import hot_views, warm_after_ingest, warm_data_version, warm_views
from scrapers.registry import get_scraper_class
from tests.feed_server import FeedServer
from tests.test_scrape_runner import catalog
from tests.web.helpers import ingest, record, statements

CUDO = get_scraper_class("skypilot-cudo")
AGGREGATES = ("GROUP BY", "count(*)")


@pytest.fixture(autouse=True)
def _forget_noted_views() -> None:
    """Each test's database starts empty: the per-process note throttle must too."""
    warm._noted.clear()


def aggregates(sent: list[str]) -> list[str]:
    return [s for s in sent if any(a in s for a in AGGREGATES) and "aggregate_cache" not in s]


def test_shared_values_survive_the_json_round_trip() -> None:
    from app.fit import OfferFacts

    when = datetime(2026, 12, 3, 8, 30, tzinfo=UTC)
    facts = OfferFacts(gpu_count=8, vram_gib_per_gpu=79.6, bf16_tflops=989.0, fp16_tflops=989.0,
                       memory_type="HBM3")  # fmt: skip
    shape = Shape(("h100-sxm", 8.0, 79.6, "nvswitch"), facts, 3, (20.0, None))
    row = OfferRow(*([1, "p", "P", "s", "i", "r", None, False, "h100-sxm", "H100", "nvidia",
                      "raw", 8.0, 80.0, 640.0, None, None, None, "nvswitch", "none", None, 20.0,
                      None, 2.5, "USD", "second", "in_stock", 3, when, when, True, 989.0, 989.0,
                      "HBM3", 900.0]))  # fmt: skip
    for value in ([shape], [row], {"a": 1, "b": (1.5, float("inf"))}, 7):
        text = orjson.dumps(data_cache.encode_data(value))
        assert data_cache.decode_data(orjson.loads(text)) == value


@pytest.mark.parametrize("vram", [79.6, float("inf")])
def test_plan_shapes_survive_their_column_layout(vram: float) -> None:
    """The machine shapes' own layout (columns) gives back equal shapes and advisor bands; a
    non-finite number, which JSON cannot hold, falls back to the tagged layout."""
    from app.fit import OfferFacts
    from app.queries.shapes import _decode_shapes, _encode_shapes

    shapes = [
        Shape(
            ("h100-sxm", 8.0, vram, "nvswitch", "infiniband", 3200.0, "second", False,
             "in_stock", "nebius", 2, "-"),
            OfferFacts(gpu_count=8, vram_gib_per_gpu=vram, bf16_tflops=989.0, fp16_tflops=None,
                       memory_type="HBM3", spot=True, provider="nebius", listings_available=2),
            3, (20.0, None), (31.5, None), 3,
        ),
        Shape(("a100-80gb", 1.0), OfferFacts(1, 80.0, 312.0, 312.0, "HBM2e"), 1, (None, 1.2)),
    ]  # fmt: skip
    bands = {("aws", "us-east-1", "p5.48xlarge"): "<5%"}
    text = orjson.dumps(_encode_shapes((shapes, bands)))
    assert _decode_shapes(orjson.loads(text)) == (shapes, bands)
    assert _decode_shapes(orjson.loads(orjson.dumps(_encode_shapes(([], {}))))) == ([], {})


def test_scrape_warms_the_new_version_before_its_commit(
    database_url: str,
    engine: Engine,
    session_factory: sessionmaker[Session],
    server: FeedServer,
    sample_loaded: int,
) -> None:
    """After a scrape, a process that never computed anything serves `/` (and a noted workload
    view) without one aggregate query: the worker that ingested stored them all."""
    settings = Settings(
        database_url=database_url,
        providers={"skypilot-cudo": ProviderSettings(url=server.url + "/cudo/vms.csv")},
        _env_file=None,
    )
    app = create_app(settings.model_copy(update={"warm_on_start": False}), scheduler=False)
    workload_view = "/?model=llama-3.1-8b&method=qlora"
    with TestClient(app) as client:
        assert client.get(workload_view).status_code == 200  # noted: a view people open
    with session_factory() as session:
        assert session.scalars(select(WarmView.query)).all() == [workload_view]
    runner = ScrapeRunner(
        settings, engine, session_factory, before_commit=warm_after_ingest(settings)
    )
    server.serve("/cudo/vms.csv", catalog(0.37, rows=3), content_type="text/csv")
    assert asyncio.run(runner.run(CUDO)).status == "ok"
    with session_factory() as session:
        version = data_cache.data_version(session)
        namespaces = set(
            session.scalars(
                select(AggregateCache.namespace).where(AggregateCache.version == version)
            )
        )
        stale = session.scalar(
            select(func.count())
            .select_from(AggregateCache)
            .where(AggregateCache.version != version)
        )
    assert {"count", "facets", "regions", "plan_shapes", "active_offers"} <= namespaces
    assert {"ranked_head", "listing_bands"} <= namespaces
    assert stale == 0  # older versions' rows went with the warm
    data_cache.clear()  # a process that computed nothing yet (another replica, a restart)
    with TestClient(app) as client, statements(engine) as sent:
        assert client.get("/").status_code == 200
        assert client.get(workload_view).status_code == 200
    assert aggregates(sent) == [], aggregates(sent)


def test_a_warmed_ranked_view_serves_its_first_page_without_its_shapes(
    client: TestClient,
    session_factory: sessionmaker[Session],
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The warm keeps each hot view's ranked head (ids and counts): another process's first
    request after the ingest neither groups, reads nor assesses the view's machine shapes."""
    import app.queries.ranking as ranking

    ingest(session_factory, [record(), record(instance_type="b", price_per_hour=1.0)])
    view = "/api/offers?model=llama-3.1-8b&method=qlora"
    want = client.get(view).json()
    short = client.get(view + "&sort=time&limit=1").json()  # a view in its own order and length
    with session_factory.begin() as session:
        data_cache.bump_data_version(session)
        warm_data_version(session, settings)
    data_cache.clear()  # another process

    def no_shapes(*_: Any, **__: Any) -> Any:
        raise AssertionError("the warmed head was not used")

    monkeypatch.setattr(ranking, "shape_groups", no_shapes)
    got = client.get(view).json()
    assert [o["id"] for o in got["offers"]] == [o["id"] for o in want["offers"]]
    assert got["total"] == want["total"] and got["fitting"] == want["fitting"]
    assert client.get(view + "&sort=time&limit=1").json()["offers"] == short["offers"]
    # Another page of the view was not warmed: it needs the shapes.
    with pytest.raises(AssertionError, match="not used"):
        client.get(view + "&offset=1")


def test_a_failing_warm_never_loses_the_scrape(
    runner: ScrapeRunner, server: FeedServer, session_factory: sessionmaker[Session]
) -> None:
    def broken(session: Session) -> None:
        session.execute(select(func.count()).select_from(Offer))
        raise RuntimeError("warm failed")

    runner.before_commit = broken
    server.serve("/cudo/vms.csv", catalog(0.37, rows=2), content_type="text/csv")
    assert asyncio.run(runner.run(CUDO)).status == "ok"
    with session_factory() as session:
        assert session.scalar(select(func.count()).select_from(Offer)) == 2


def test_start_up_warms_the_current_version_in_the_background(
    settings: Settings, session_factory: sessionmaker[Session], sample_loaded: int
) -> None:
    app = create_app(settings.model_copy(update={"warm_on_start": True}), scheduler=False)
    with TestClient(app) as client:
        app.state.start_up_warm.join(timeout=60)  # shutdown would stop it between views
        # /healthz tells a deploy (and the bench) when this process is done warming.
        assert client.get("/healthz").json() == {"status": "ok", "start_up_warm": "done"}
    with TestClient(create_app(settings, scheduler=False)) as client:
        assert client.get("/healthz").json()["start_up_warm"] == "off"
    with session_factory() as session:
        version = data_cache.data_version(session)
        cached = session.scalar(
            select(func.count())
            .select_from(AggregateCache)
            .where(AggregateCache.version == version, AggregateCache.namespace == "facets")
        )
        assert cached
        data_cache.clear()
        with statements(session.get_bind().engine) as sent:
            facets(session, filters=OfferFilters())
        assert aggregates(sent) == []


def test_shutdown_stops_the_start_up_warm_between_views(
    settings: Settings,
    session_factory: sessionmaker[Session],
    sample_loaded: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Shutdown returns with no warming query still running (it would race whatever uses the
    database next) and without building the views left."""
    with session_factory.begin() as session:
        session.add(WarmView(key="k", query="/?gpu=h100-sxm", last_used_at=utcnow()))
    building = threading.Event()
    built: list[str] = []

    real_view = warm.index_context

    def slow_view(session: Session, settings: Settings, **kwargs: Any) -> Any:
        built.append(urlencode(kwargs["args"]))
        context = real_view(session, settings, **kwargs)
        building.set()
        time.sleep(0.5)
        return context

    monkeypatch.setattr(warm, "index_context", slow_view)
    app = create_app(settings.model_copy(update={"warm_on_start": True}), scheduler=False)
    with TestClient(app):
        assert building.wait(timeout=30)
    assert not app.state.start_up_warm.is_alive()
    assert built == [""]  # the default view only; "/?gpu=h100-sxm" was never started
    with session_factory() as session:  # rolled back: nothing half-warmed is kept
        version = data_cache.data_version(session)
        kept = select(func.count()).select_from(AggregateCache)
        assert session.scalar(kept.where(AggregateCache.version == version)) == 0


def test_views_people_open_are_noted_once_and_warmed(
    client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    ingest(session_factory, [record()])
    paths = ("/?gpu=h100-sxm&offset=50", "/api/offers?gpu=h100-sxm", "/gpus/h100-sxm", "/",
             "/?gpu=h100-sxm&sort=price&limit=100&offset=100")  # fmt: skip
    for path in paths:
        assert client.get(path).status_code == 200
    client.get("/api/gpus/h100-sxm")
    client.get("/gpus/no-such-gpu")  # a 404 is no view
    with session_factory() as session:
        views = hot_views(session, limit=10)
        # A later page warms as its view's first page, in the order and length it was shown.
        assert views[0] == "/" and sorted(views[1:]) == [
            "/?gpu=h100-sxm",
            "/?gpu=h100-sxm&sort=price&limit=100",
            "/gpus/h100-sxm",
        ]
        assert session.scalar(select(func.count()).select_from(WarmView)) == 3
    with session_factory.begin() as session:
        report = warm_data_version(session, settings)
    assert (report.views, report.failed) == (4, 0)


def test_warm_skips_views_made_invalid(
    session_factory: sessionmaker[Session], settings: Settings
) -> None:
    ingest(session_factory, [record()])
    with session_factory() as session:
        built, failed = warm_views(session, settings, ["/?min_vram=lots", "/?model=llama-3.1-8b"])
    assert (built, failed) == (1, 1)


def test_the_data_version_is_read_once_a_transaction_and_follows_bumps(
    engine: Engine, session_factory: sessionmaker[Session]
) -> None:
    """A ranked page asks for the token half a dozen times: one read per transaction; a bump in
    the transaction, or another's commit seen by the next transaction, is never missed."""
    reads: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().startswith("SELECT data_version.token"):
            reads.append(statement)

    with session_factory.begin() as writer:
        data_cache.bump_data_version(writer)
    event.listen(engine, "before_cursor_execute", count)
    try:
        with session_factory() as session:
            first = data_cache.data_version(session)
            assert data_cache.data_version(session) == first and len(reads) == 1
            data_cache.bump_data_version(session)  # in this transaction
            bumped = data_cache.data_version(session)
            assert bumped not in (None, first)
            session.rollback()
            assert data_cache.data_version(session) == first and len(reads) == 2
            with session_factory.begin() as other:
                data_cache.bump_data_version(other)
            session.commit()  # ends the transaction: the next one reads the other's token
            latest = data_cache.data_version(session)
            assert latest not in (first, bumped) and len(reads) == 3
    finally:
        event.remove(engine, "before_cursor_execute", count)
