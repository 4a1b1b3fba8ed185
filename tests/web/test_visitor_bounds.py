"""Per-visitor bounds: a cap on saved searches per browser, and POST rate limits per browser and
per client address, each a 429 with a clear message."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.core.settings import Settings
from app.main import create_app
from app.saved import OWNER_COOKIE, create_saved_search
from app.store.models import SavedSearch
from tests.web.helpers import csrf_of


def make_app(database_url: str, **limits: object) -> FastAPI:
    settings = Settings(
        database_url=database_url, scheduler_enabled=False, _env_file=None, **limits
    )
    return create_app(settings, scheduler=False)


@pytest.fixture
def roomy_app(database_url: str, session_factory: sessionmaker[Session]) -> FastAPI:
    """Default cap (50), rate limits out of the way."""
    del session_factory  # a clean database
    return make_app(
        database_url, post_rate_limit_per_owner="1000/minute",
        post_rate_limit_per_address="1000/minute",
    )  # fmt: skip


def browser(app: FastAPI) -> Iterator[tuple[TestClient, str]]:
    with TestClient(app) as client:
        yield client, csrf_of(client.get("/").text)


def save(client: TestClient, token: str, name: str, **headers: str) -> int:
    form = {"csrf": token, "name": name, "query": "gpu=h100-sxm"}
    return client.post("/saved", data=form, headers=headers, follow_redirects=False).status_code


def count(factory: sessionmaker[Session]) -> int:
    with factory() as session:
        return int(session.scalar(select(func.count()).select_from(SavedSearch)) or 0)


def test_the_51st_saved_search_is_refused(
    roomy_app: FastAPI, session_factory: sessionmaker[Session]
) -> None:
    for client, token in browser(roomy_app):
        owner = client.cookies[OWNER_COOKIE]
        with session_factory.begin() as session:
            for n in range(49):
                create_saved_search(session, owner_token=owner, name=f"s{n}", query="")
        assert save(client, token, "the 50th") == 303

        response = client.post(
            "/saved",
            data={"csrf": token, "name": "the 51st", "query": ""},
            headers={"accept": "application/json"},
        )
        assert response.status_code == 429
        assert "already keeps 50 saved searches" in response.json()["detail"]
        page = client.post("/saved", data={"csrf": token, "name": "again", "query": ""},
                           headers={"accept": "text/html"})  # fmt: skip
        assert page.status_code == 429 and "delete one before saving another" in page.text
        assert count(session_factory) == 50

        # Deleting one makes room again; another browser has its own 50.
        share = client.get("/api/saved").json()["saved"][0]["share_url"].rsplit("/", 1)[1]
        client.post(f"/saved/{share}/delete", data={"csrf": token})
        assert save(client, token, "the new 50th") == 303
    for other, other_token in browser(roomy_app):
        assert save(other, other_token, "mine") == 303
    assert count(session_factory) == 51


def test_posts_per_browser_are_rate_limited(
    database_url: str, session_factory: sessionmaker[Session]
) -> None:
    app = make_app(
        database_url, post_rate_limit_per_owner="3/minute",
        post_rate_limit_per_address="100/minute",
    )  # fmt: skip
    for client, token in browser(app):
        assert [save(client, token, f"s{n}") for n in range(3)] == [303, 303, 303]
        response = client.post("/saved", data={"csrf": token, "name": "4th", "query": ""},
                               headers={"accept": "application/json"})  # fmt: skip
        assert response.status_code == 429
        assert response.json()["detail"].startswith(
            "Too many changes from this browser: at most 3 per minute. Try again in"
        )
        assert 1 <= int(response.headers["retry-after"]) <= 60
        assert "content-security-policy" in response.headers
        # Any POST counts, a rename or a forged one too.
        assert client.post("/saved/x/delete", data={"csrf": "bad"}).status_code == 429
    for other, other_token in browser(app):  # another browser, same address: its own budget
        assert save(other, other_token, "mine") == 303
    assert count(session_factory) == 4


def test_posts_per_address_are_rate_limited(
    database_url: str, session_factory: sessionmaker[Session]
) -> None:
    app = make_app(
        database_url, post_rate_limit_per_owner="100/minute",
        post_rate_limit_per_address="4/minute",
    )  # fmt: skip
    statuses = []
    for _ in range(3):  # three browsers (fresh cookies) from one address
        for client, token in browser(app):
            statuses += [save(client, token, "a"), save(client, token, "b")]
    assert statuses == [303, 303, 303, 303, 429, 429]
    for client, token in browser(app):
        page = client.post("/saved", data={"csrf": token, "name": "x", "query": ""},
                           headers={"accept": "text/html"})  # fmt: skip
        assert page.status_code == 429
        assert "from your network address: at most 4 per minute" in page.text
    assert count(session_factory) == 4
    assert client.get("/").status_code == 200  # reading is never limited


def test_rate_limit_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="post_rate_limit_per_owner"):
        Settings(post_rate_limit_per_owner="lots", _env_file=None)
