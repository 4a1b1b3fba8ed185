"""Migration 0007 keeps saved searches: each gets its view's key, each view a state seeded from
its searches' old one (so price drops continue), and going back restores the per-search state."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from app.saved import query_key
from app.store.db import make_engine
from app.store.migrate import downgrade, upgrade
from tests.conftest import PG_URL, scratch_postgres_url

T = "2026-12-01 12:00:00.000000"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_existing_saved_searches_survive_the_upgrade_and_back(tmp_path: Path, backend: str) -> None:
    if backend == "postgres":
        if not PG_URL:
            pytest.skip("set GPUFIT_TEST_DATABASE_URL to run on Postgres too")
        url = scratch_postgres_url("m0007")
    else:
        url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0005")
    engine = make_engine(url)
    with engine.begin() as conn:
        for i, query in enumerate(("gpu=h100-sxm&provider=a", "provider=a&gpu=h100-sxm", "q=x")):
            conn.execute(
                text(
                    "INSERT INTO saved_searches (id, share_token, owner_token, name, query, "
                    "created_at, updated_at) VALUES (:i, :s, 'o', 'n', :q, :t, :t)"
                ),
                {"i": i + 1, "s": f"s{i}", "q": query, "t": T},
            )
            conn.execute(
                text(
                    "INSERT INTO saved_search_state (saved_search_id, checked_at, best_price, "
                    "best_offer_id, match_count) VALUES (:i, :t, :p, NULL, 3)"
                ),
                {"i": i + 1, "t": T, "p": 2.5 + i},
            )
        conn.execute(
            text(
                "INSERT INTO saved_search_entries (saved_search_id, created_at, kind, title, "
                "summary) VALUES (1, :t, 'created', 'Saved', '3 offers match.')"
            ),
            {"t": T},
        )
    engine.dispose()

    upgrade(url)
    engine = make_engine(url)
    with engine.connect() as conn:
        keys = conn.execute(text("SELECT query_key FROM saved_searches ORDER BY id")).scalars()
        assert list(keys) == [query_key("gpu=h100-sxm&provider=a")] * 2 + [query_key("q=x")]
        states = conn.execute(
            text("SELECT key, best_price, match_count, version FROM saved_queries ORDER BY key")
        ).all()
        assert sorted((p, n, v) for _, p, n, v in states) == [(2.5, 3, None), (4.5, 3, None)]
        # The feed entry stayed (no table rebuild cascading deletes on SQLite).
        assert conn.execute(text("SELECT count(*) FROM saved_search_entries")).scalar() == 1
    engine.dispose()

    downgrade(url, "0005")
    engine = make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT saved_search_id, best_price FROM saved_search_state ORDER BY 1")
        ).all()
        assert [tuple(r) for r in rows] == [(1, 2.5), (2, 2.5), (3, 4.5)]
    engine.dispose()
