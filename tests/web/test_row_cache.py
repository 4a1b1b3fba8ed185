"""Rendered table rows reused while everything they show is the same (app.web.row_cache)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from jinja2 import meta
from markupsafe import Markup
from sqlalchemy.orm import Session, sessionmaker

from app.core.settings import Settings
from app.main import create_app
from app.store.models import utcnow
from app.web.row_cache import ROW_TEMPLATE, RowCache, RowKey
from app.web.templating import templates
from tests.web.helpers import QLORA_8B, ingest, record


def test_the_row_macro_reads_nothing_but_its_arguments() -> None:
    """What makes reuse safe: a name the macro took from the page's context would not be part
    of the key, and a row would show another view's value."""
    source, *_ = templates.env.loader.get_source(templates.env, ROW_TEMPLATE)  # type: ignore[union-attr]
    assert meta.find_undeclared_variables(templates.env.parse(source)) == set()


def test_equal_arguments_and_the_same_fit_reuse_the_html() -> None:
    cache = RowCache(10)
    fit = object()
    calls: list[int] = []

    def render() -> Markup:
        calls.append(1)
        return Markup(f"<tr>{len(calls)}</tr>")

    first = cache.html(RowKey(("offer", 1)), fit, render)  # type: ignore[arg-type]
    assert cache.html(RowKey(("offer", 1)), fit, render) == first  # type: ignore[arg-type]
    assert len(calls) == 1
    # Another fit object under the same key (the fit cache let the first one go): rendered.
    assert cache.html(RowKey(("offer", 1)), object(), render) != first  # type: ignore[arg-type]
    assert cache.html(RowKey(("offer", 2)), fit, render) == "<tr>3</tr>"  # type: ignore[arg-type]
    assert len(calls) == 3


def test_the_cache_keeps_the_most_recently_rendered_rows_and_can_be_off() -> None:
    cache = RowCache(2)
    for i in range(3):
        cache.html(RowKey((i,)), None, lambda i=i: Markup(str(i)))  # type: ignore[misc]
    assert len(cache) == 2
    off = RowCache(0)
    off.html(RowKey((1,)), None, lambda: Markup("x"))
    assert len(off) == 0


def _row_html(html: str, offer_id: int) -> str:
    start = html.index(f'id="o{offer_id}"')
    return html[start : html.index("</tr>", start)]


def test_a_row_shows_what_changed_at_the_next_scrape(
    app: FastAPI, client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    """Rows are reused across data versions only while every value they show is unchanged: a
    new price, a new last-seen time, another job's fit each render the row again."""
    seen = utcnow() - timedelta(hours=3)
    ingest(session_factory, [record(price_per_hour=20.0), record(instance_type="b")], now=seen)
    views: tuple[dict[str, str], ...] = (
        {},
        QLORA_8B,
    )  # unranked rows have no fit: only their own values tell them apart
    pages = [client.get("/", params=params).text for params in views]
    offer_id = int(pages[0].split('id="o', 1)[1].split('"', 1)[0])
    for page in pages:
        assert "$20.00" in _row_html(page, offer_id) and "3 h ago" in _row_html(page, offer_id)
    assert len(app.state.row_cache) == 4
    ingest(session_factory, [record(price_per_hour=31.0), record(instance_type="b")])
    for params in views:
        row = _row_html(client.get("/", params=params).text, offer_id)
        assert "$31.00" in row and "$20.00" not in row
        assert "just now" in row and "3 h ago" not in row
    # Another job (full fine-tuning needs far more memory): the fit cell is rendered anew.
    full = {"model": "llama-3.1-8b", "method": "full"}
    assert _row_html(client.get("/", params=full).text, offer_id) != row


def test_cached_rows_are_the_rows_the_macro_renders(
    settings: Settings, session_factory: sessionmaker[Session]
) -> None:
    ingest(session_factory, [record(), record(instance_type="b", region="eu-west-1")])
    app = create_app(settings.model_copy(update={"page_cache_seconds": 0}), scheduler=False)
    with TestClient(app) as client:
        first = client.get("/", params=QLORA_8B).text  # rendered
        again = client.get("/", params=QLORA_8B).text  # every row from the cache
        app.state.row_cache = RowCache(0)
        off = client.get("/", params=QLORA_8B).text
    assert len(first) > 10_000
    assert _without_token(again) == _without_token(first) == _without_token(off)


def _without_token(html: str) -> str:
    return re.sub(r'name="csrf" value="[^"]*"', "", html)


def test_a_kept_row_still_tells_the_time_since_its_offer_was_seen(
    settings: Settings, session_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.web.row_cache as row_cache

    seen = utcnow() - timedelta(hours=3)
    ingest(session_factory, [record()], now=seen)
    app = create_app(settings.model_copy(update={"page_cache_seconds": 0}), scheduler=False)
    with TestClient(app) as client:
        assert "3 h ago" in client.get("/").text
        monkeypatch.setattr(row_cache, "utcnow", lambda: seen + timedelta(hours=9))
        later = client.get("/").text
    assert "9 h ago" in later and "3 h ago" not in later
