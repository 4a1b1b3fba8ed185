"""HTTP details: HEAD on every GET route, caching of per-browser responses, HSTS over HTTPS,
Atom feeds that stay valid XML whatever a stored name holds."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.core.settings import Settings
from app.main import ROUTERS, create_app
from app.saved import OWNER_COOKIE, create_saved_search
from app.store.models import SavedSearchEntry, utcnow
from tests.web.helpers import csrf_of

GET_PATHS = sorted(
    route.path
    for router in ROUTERS
    for route in router.routes
    if isinstance(route, APIRoute) and "GET" in route.methods
)


def _concrete(path: str, share: str) -> str:
    return (
        path.replace("{offer_id}", "1")
        .replace("{slug}", "h100-sxm")
        .replace("{share_token}", share)
    )


def test_head_answers_like_get_without_a_body(
    client: TestClient, sample_loaded: int, session_factory: sessionmaker[Session]
) -> None:
    owner = client.get("/").cookies.get(OWNER_COOKIE) or client.cookies[OWNER_COOKIE]
    with session_factory.begin() as session:
        share = create_saved_search(session, owner_token=owner, name="n", query="").share_token
    assert len(GET_PATHS) >= 15
    for path in [*GET_PATHS, "/static/app.css", "/no-such-page"]:
        url = _concrete(path, share)
        get = client.get(url, follow_redirects=False)
        head = client.head(url, follow_redirects=False)
        assert head.status_code == get.status_code != 405, (url, head.status_code)
        assert head.content == b""
        assert head.headers.get("content-type") == get.headers.get("content-type"), url


def test_per_browser_responses_are_never_stored(client: TestClient) -> None:
    first = client.get("/")  # sets the owner cookie
    assert first.headers["cache-control"] == "no-store"
    assert client.get("/").headers["cache-control"] == "private, no-cache"  # has the form token
    for path in ("/saved", "/api/saved", "/saved.csv"):
        assert client.get(path).headers["cache-control"] == "no-store", path
    token = csrf_of(first.text)
    saved = client.post("/saved", data={"csrf": token, "name": "n", "query": ""},
                        follow_redirects=False)  # fmt: skip
    assert saved.headers["cache-control"] == "no-store"
    # Shared data carries no per-browser marker: caches may keep it.
    assert "cache-control" not in client.get("/api/offers").headers


@pytest.mark.parametrize("https", [True, False])
def test_hsts_and_secure_cookies_only_over_https(database_url: str, https: bool) -> None:
    app = create_app(
        Settings(database_url=database_url, https=https, _env_file=None), scheduler=False
    )
    with TestClient(app) as client:
        response = client.get("/")
        hsts = response.headers.get("strict-transport-security")
        cookie = response.headers["set-cookie"]
    if https:
        assert hsts == "max-age=31536000; includeSubDomains"
        assert "Secure" in cookie
    else:
        assert hsts is None and "Secure" not in cookie


def test_atom_feed_is_valid_xml_whatever_the_stored_text(
    client: TestClient, session_factory: sessionmaker[Session], sample_loaded: int
) -> None:
    hostile = "cheap\x00 H100\x1b[31m \x08\x0b\x0c\ufffe\uffff <&> ]]> \U0001f680"
    with session_factory.begin() as session:
        if session.get_bind().dialect.name == "postgresql":
            hostile = hostile.replace("\x00", "")  # Postgres cannot store NUL at all
        # Stored as an older version (or a direct database edit) could have stored it.
        search = create_saved_search(session, owner_token="o" * 43, name="x", query="")
        search.name = hostile
        session.add(
            SavedSearchEntry(saved_search_id=search.id, created_at=utcnow(), kind="price_drop",
                             title=f"dropped {hostile}", summary=f"line one\n{hostile}")
        )  # fmt: skip
        share = search.share_token
    response = client.get(f"/saved/{share}.atom")
    assert response.status_code == 200
    feed = ET.fromstring(response.content)  # raises on invalid XML
    title = feed.findtext("{http://www.w3.org/2005/Atom}title") or ""
    assert title == "gpufit: cheap H100[31m  <&> ]]> \U0001f680"
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]", response.text)
