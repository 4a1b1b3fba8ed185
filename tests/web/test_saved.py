"""Saved searches: cookie ownership, CSRF, share links, Atom feed entries, surviving restarts."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import timedelta

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

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
