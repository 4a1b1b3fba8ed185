"""Saved searches: cookie ownership, CSRF, share links, Atom feed entries, surviving restarts."""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import timedelta

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

import app.saved
from app.core.settings import Settings
from app.main import create_app
from app.saved import OWNER_COOKIE
from app.store.models import SavedSearch, utcnow
from tests.web.helpers import csrf_of, ingest, record

ATOM = "{http://www.w3.org/2005/Atom}"


@pytest.fixture
def other(app: FastAPI) -> Iterator[TestClient]:
    """A second browser: same app, its own cookie jar."""
    with TestClient(app) as c:
        yield c


def save(client: TestClient, name: str, query: str) -> str:
    """Save a search from the index page's form; returns its share token."""
    token = csrf_of(client.get("/").text)
    response = client.post(
        "/saved", data={"name": name, "query": query, "csrf": token}, follow_redirects=False
    )
    assert response.status_code == 303, response.text
    saved = client.get("/api/saved").json()["saved"]
    match = [s for s in saved if s["name"] == name]
    assert match
    return str(match[0]["share_url"].rsplit("/", 1)[1])


def test_owner_cookie_is_httponly_samesite(client: TestClient) -> None:
    cookie = client.get("/").headers["set-cookie"]
    assert cookie.startswith(f"{OWNER_COOKIE}=")
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie
    value = cookie.split("=", 1)[1].split(";", 1)[0]
    assert len(value) >= 43  # token_urlsafe(32)


def test_save_list_rename_delete(client: TestClient, sample_loaded: int) -> None:
    share = save(client, "Cheap H100", "gpu=h100-sxm&sort=price&offset=50")
    html = client.get("/saved").text
    assert "Cheap H100" in html and f"/s/{share}" in html and f"/saved/{share}.atom" in html
    item = client.get("/api/saved").json()["saved"][0]
    assert item["query"] == "gpu=h100-sxm&sort=price"  # page offset dropped
    assert item["match_count"] > 0 and item["best_offer"]["gpu_model"] == "h100-sxm"

    token = csrf_of(html)
    client.post(f"/saved/{share}/rename", data={"name": "H100s", "csrf": token})
    assert [s["name"] for s in client.get("/api/saved").json()["saved"]] == ["H100s"]
    client.post(f"/saved/{share}/delete", data={"csrf": token})
    assert client.get("/api/saved").json()["saved"] == []
    assert client.get(f"/s/{share}", follow_redirects=False).status_code == 404


def test_another_browser_cannot_list_rename_or_delete(
    client: TestClient, other: TestClient, sample_loaded: int
) -> None:
    share = save(client, "Mine", "provider=vastai")
    assert other.get("/api/saved").json()["saved"] == []
    assert "Mine" not in other.get("/saved").text
    their_token = csrf_of(other.get("/").text)  # a valid token for *their* browser
    rename = other.post(f"/saved/{share}/rename", data={"name": "Stolen", "csrf": their_token})
    delete = other.post(f"/saved/{share}/delete", data={"csrf": their_token})
    assert rename.status_code == 404 and delete.status_code == 404
    assert [s["name"] for s in client.get("/api/saved").json()["saved"]] == ["Mine"]
    # The share link itself is public: it opens the view, read-only.
    redirect = other.get(f"/s/{share}", follow_redirects=False)
    assert redirect.status_code == 302 and redirect.headers["location"] == "/?provider=vastai"


def test_csrf_rejections(client: TestClient, other: TestClient) -> None:
    client.get("/")  # gets the owner cookie
    data = {"name": "x", "query": "gpu=a100-80gb-sxm"}
    assert client.post("/saved", data=data).status_code == 403  # no token
    assert client.post("/saved", data={**data, "csrf": "0" * 64}).status_code == 403
    # Another browser's token does not work with this browser's cookie.
    foreign = csrf_of(other.get("/").text)
    assert client.post("/saved", data={**data, "csrf": foreign}).status_code == 403
    good = csrf_of(client.get("/").text)
    cross = client.post(
        "/saved", data={**data, "csrf": good}, headers={"origin": "https://evil.example"}
    )
    assert cross.status_code == 403
    # Without any cookie there is no owner, so nothing can be saved.
    with TestClient(client.app) as fresh:
        assert fresh.post("/saved", data={**data, "csrf": good}).status_code == 403
    assert client.get("/api/saved").json()["saved"] == []
    ok = client.post("/saved", data={**data, "csrf": good}, follow_redirects=False)
    assert ok.status_code == 303


def test_invalid_saved_query_is_422_naming_field(client: TestClient) -> None:
    token = csrf_of(client.get("/").text)
    response = client.post("/saved", data={"name": "bad", "query": "min_vram=lots", "csrf": token})
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "min_vram"
    blank = client.post("/saved", data={"name": "  ", "query": "", "csrf": token})
    assert blank.status_code == 422 and blank.json()["detail"][0]["field"] == "name"


def feed(client: TestClient, share: str) -> list[tuple[str, str]]:
    response = client.get(f"/saved/{share}.atom")
    assert response.headers["content-type"].startswith("application/atom+xml")
    root = ET.fromstring(response.content)
    assert root.tag == f"{ATOM}feed"
    return [
        (
            str(e.find(f"{ATOM}category").get("term")),  # type: ignore[union-attr]
            str(e.findtext(f"{ATOM}title")),
        )
        for e in root.findall(f"{ATOM}entry")
    ]


def test_atom_feed_gains_entries_for_new_offers_and_price_drops(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    base = utcnow() - timedelta(hours=2)
    ingest(session_factory, [record(price_per_hour=40.0)], now=base)
    share = save(client, "Eight H100", "gpu=h100-sxm&gpu_count=8")
    assert [kind for kind, _ in feed(client, share)] == ["created"]
    assert [kind for kind, _ in feed(client, share)] == ["created"]  # nothing new: no entry

    # A scrape brings a new, cheaper matching offer; the feed reads it from the change log
    # when it is next fetched (nothing ran per saved search during the scrape).
    ingest(
        session_factory,
        [
            record(price_per_hour=40.0),
            record(instance_type="test.8xh100.cheap", price_per_hour=16.0),
        ],
    )
    entries = feed(client, share)
    kinds = [kind for kind, _ in entries]
    assert sorted(kinds[:2]) == ["new_offers", "price_drop"] and kinds[2] == "created"
    titles = dict(entries[:2])
    assert "1 new offer(s)" in titles["new_offers"] and "$2.00" in titles["price_drop"]

    assert feed(client, share) == entries  # read again: nothing new

    # A non-matching offer (one GPU) adds nothing.
    ingest(
        session_factory,
        [
            record(price_per_hour=40.0),
            record(instance_type="test.8xh100.cheap", price_per_hour=16.0),
            record(instance_type="test.1xh100", gpu_count=1, price_per_hour=1),
        ],
    )
    assert feed(client, share) == entries


def test_saved_search_survives_restart(
    client: TestClient,
    settings: Settings,
    session_factory: sessionmaker[Session],
    sample_loaded: int,
) -> None:
    share = save(client, "Persistent", "provider=lambdalabs&model=llama-3.1-8b&method=qlora")
    owner = client.cookies.get(OWNER_COOKIE)
    restarted = create_app(settings, scheduler=False)
    with TestClient(restarted, cookies={OWNER_COOKIE: str(owner)}) as again:
        saved = again.get("/api/saved").json()["saved"]
        assert [s["name"] for s in saved] == ["Persistent"]
        assert saved[0]["best_offer"]["provider"] == "lambdalabs"
        assert saved[0]["best_price"] > 0  # est. job cost of the best fitting offer
        location = again.get(f"/s/{share}", follow_redirects=False).headers["location"]
        assert location == "/?provider=lambdalabs&model=llama-3.1-8b&method=qlora"
    with session_factory() as session:
        assert session.query(SavedSearch).count() == 1


def test_one_view_saved_by_many_is_computed_once(
    client: TestClient, other: TestClient, session_factory: sessionmaker[Session]
) -> None:
    """The same view however spelled (order, repeats, sort, page) shares one state."""
    from app.store.models import SavedQuery

    ingest(session_factory, [record(), record(instance_type="test.8xh100.b", price_per_hour=30)])
    mine = save(client, "Mine", "gpu=h100-sxm&gpu_count=8&sort=price")
    theirs = save(other, "Theirs", "gpu_count=8&offset=50&gpu=h100-sxm&gpu=h100-sxm")
    with session_factory() as session:
        assert session.scalar(select(func.count()).select_from(SavedQuery)) == 1
    assert client.get("/api/saved").json()["saved"][0]["match_count"] == 2
    assert other.get("/api/saved").json()["saved"][0]["match_count"] == 2
    token = csrf_of(client.get("/saved").text)
    client.post(f"/saved/{mine}/delete", data={"csrf": token})
    with session_factory() as session:  # still saved by the other browser
        assert session.scalar(select(func.count()).select_from(SavedQuery)) == 1
    other.post(f"/saved/{theirs}/delete", data={"csrf": csrf_of(other.get("/saved").text)})
    with session_factory() as session:
        assert session.scalar(select(func.count()).select_from(SavedQuery)) == 0


def test_saved_page_shows_counts_as_of_their_version_and_refreshes_in_background(
    settings: Settings, session_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no time budget /saved re-runs nothing: it shows the stored counts, marked as of
    when, and the background refresher brings them up to date for the next view."""
    # Hold the background refresher until the stale page has been seen: on a fast machine it
    # would otherwise finish between the two requests and the page would already be current.
    release = threading.Event()
    refresh = app.saved.refresh_saved_query

    def held_refresh(session: Session, *, key: str) -> int:
        release.wait(timeout=10)
        return refresh(session, key=key)

    ingest(session_factory, [record()])
    web = create_app(settings.model_copy(update={"saved_refresh_budget_ms": 0}), scheduler=False)
    with TestClient(web) as browser:
        save(browser, "Eight H100", "gpu=h100-sxm")
        assert browser.get("/api/saved").json()["saved"][0]["current"] is True
        monkeypatch.setattr(app.saved, "refresh_saved_query", held_refresh)
        ingest(
            session_factory,
            [record(), record(instance_type="test.8xh100.b", price_per_hour=30)],
        )
        (item,) = browser.get("/api/saved").json()["saved"]
        assert (item["match_count"], item["current"]) == (1, False)
        assert "as of" in browser.get("/saved").text
        release.set()
        assert web.state.saved_refresher.wait_idle(timeout=10)
        (item,) = browser.get("/api/saved").json()["saved"]
        assert (item["match_count"], item["current"]) == (2, True)


def test_feed_says_when_matching_offers_are_available_again(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    ingest(session_factory, [record(availability="out")], now=utcnow() - timedelta(hours=1))
    share = save(client, "Eight H100", "gpu=h100-sxm")
    ingest(session_factory, [record(availability="in_stock")])
    entries = feed(client, share)
    assert [kind for kind, _ in entries] == ["available", "created"]
    assert entries[0][1] == "1 offer(s) matching “Eight H100” available again"


def test_form_tokens_are_masked_afresh_and_still_checked(client: TestClient) -> None:
    """The CSRF secret never repeats in a compressed page (BREACH), yet every copy works."""
    first, second = csrf_of(client.get("/").text), csrf_of(client.get("/").text)
    assert first != second
    data = {"name": "x", "query": "gpu=h100-sxm"}
    for token in (first, second):
        response = client.post("/saved", data={**data, "csrf": token}, follow_redirects=False)
        assert response.status_code == 303
    tampered = first[:-2] + ("00" if first[-2:] != "00" else "11")
    assert client.post("/saved", data={**data, "csrf": tampered}).status_code == 403
