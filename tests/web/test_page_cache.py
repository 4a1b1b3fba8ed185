"""The rendered-view micro-cache (app.web.page_cache): one build per view and data version,
per-visitor form tokens, an ingest or the time limit ends a page."""

from __future__ import annotations

import threading
import time
from contextlib import AbstractContextManager
from types import SimpleNamespace

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.core.settings import Settings
from app.main import create_app
from app.web.page_cache import TOKEN_PLACEHOLDER, Page, PageCache
from tests.web.helpers import csrf_of, ingest, record, statements

HTML = {"accept": "text/html"}


def offer_reads(engine: Engine) -> AbstractContextManager[list[str]]:
    """Statements that read the offers table while the block runs."""
    return statements(engine, lambda s: "offers" in s and "data_version" not in s)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(app: FastAPI) -> Clock:
    clock = Clock()
    app.state.page_cache = PageCache(clock=clock)
    return clock


@pytest.fixture
def offers(session_factory: sessionmaker[Session]) -> None:
    ingest(session_factory, [record(), record(instance_type="test.1xh100", gpu_count=1)])


@pytest.mark.parametrize("path", ["/", "/api/offers", "/?model=llama-3.1-8b&method=qlora"])
def test_a_view_is_built_once_per_data_version(
    app: FastAPI, client: TestClient, offers: None, clock: Clock, path: str
) -> None:
    first = client.get(path, headers=HTML)
    with offer_reads(app.state.engine) as reads:
        again = client.get(path, headers=HTML)
    assert first.status_code == again.status_code == 200
    assert reads == []  # served from the cache: no query touched the offers
    assert again.headers["link"] == first.headers["link"]
    if path.startswith("/api"):
        assert again.content == first.content
    else:
        assert TOKEN_PLACEHOLDER not in again.text  # each visitor gets a real token


def test_an_ingest_ends_every_kept_view(
    client: TestClient, session_factory: sessionmaker[Session], offers: None, clock: Clock
) -> None:
    assert client.get("/api/offers").json()["total"] == 2
    ingest(session_factory, [record(), record(instance_type="test.2xh100", gpu_count=2),
                             record(instance_type="test.4xh100", gpu_count=4)])  # fmt: skip
    assert client.get("/api/offers").json()["total"] == 3


def test_a_kept_view_expires_after_the_time_limit(
    app: FastAPI, client: TestClient, offers: None, clock: Clock, settings: Settings
) -> None:
    client.get("/")
    clock.now += settings.page_cache_seconds - 1
    with offer_reads(app.state.engine) as reads:
        client.get("/")
    assert reads == []
    clock.now += 2
    with offer_reads(app.state.engine) as reads:
        client.get("/")
    assert reads  # rebuilt: "last seen ... ago" and the banners are at most that old


def test_each_visitor_gets_a_form_token_of_their_own_from_a_kept_page(
    app: FastAPI, offers: None, clock: Clock
) -> None:
    """A page built for one browser and served to another must carry the second's token:
    saving a search with it works, and the first browser's token is refused for the second."""
    with TestClient(app) as first, TestClient(app) as second:
        token_first = csrf_of(first.get("/", headers=HTML).text)
        token_second = csrf_of(second.get("/", headers=HTML).text)
        assert token_first != token_second
        assert len(app.state.page_cache) == 1  # the second page came from the cache
        query = {"query": "gpu=h100-sxm", "name": "h100s"}
        refused = second.post("/saved", data={"csrf": token_first, **query})
        assert refused.status_code == 403
        saved = second.post("/saved", data={"csrf": token_second, **query}, follow_redirects=False)
        assert saved.status_code == 303


def test_the_cache_can_be_turned_off(database_url: str, offers: None) -> None:
    settings = Settings(
        database_url=database_url, page_cache_seconds=0, warm_on_start=False, _env_file=None
    )
    app = create_app(settings, scheduler=False)
    with TestClient(app) as client:
        client.get("/api/offers")
        with offer_reads(app.state.engine) as reads:
            client.get("/api/offers")
    assert reads


def test_the_cache_keeps_within_its_size_and_keeps_no_huge_page(
    app: FastAPI, client: TestClient, offers: None, clock: Clock
) -> None:
    app.state.settings = app.state.settings.model_copy(update={"page_cache_mb": 1})
    cache: PageCache = app.state.page_cache
    for limit in range(1, 60):
        client.get(f"/?limit={limit}")
    assert cache.size_bytes() <= 1024 * 1024
    assert 0 < len(cache) < 59  # the oldest went first
    rows = [record(instance_type=f"test.{i}", region=f"r{i}") for i in range(400)]
    ingest(app.state.session_factory, rows)
    client.get("/?limit=400")  # one page over an eighth of the budget
    assert all(len(page.body) <= 1024 * 1024 // 8 for page in cache.pages())


def test_requests_for_a_view_being_built_wait_for_that_build(
    session_factory: sessionmaker[Session], offers: None, settings: Settings
) -> None:
    """After an ingest every open connection asks for the same views at once: one builds,
    the others take its page."""
    cache = PageCache()
    request = SimpleNamespace(url=SimpleNamespace(path="/", query="gpu=h100-sxm"))
    release = threading.Event()
    builds: list[str] = []

    def build() -> Page:
        builds.append(threading.current_thread().name)
        release.wait(10)
        return Page(b"the view", "text/plain", ())

    def ask(out: list[Page]) -> None:
        with session_factory() as session:
            out.append(cache.fetch(request, session, settings, build))  # type: ignore[arg-type]

    results: list[Page] = []
    threads = [threading.Thread(target=ask, args=(results,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while not builds and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # the other three are waiting by now
    release.set()
    for thread in threads:
        thread.join(10)
    assert len(builds) == 1
    assert [r.body for r in results] == [b"the view"] * 4
