"""Background work waits for a quiet moment in the requests (app.core.activity)."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from app import saved
from app.core.activity import RequestActivity
from app.core.settings import Settings
from app.main import create_app
from app.store.models import WarmView, utcnow


def test_wait_quiet_waits_for_the_requests_in_flight_and_a_quiet_spell() -> None:
    activity = RequestActivity()
    stop = threading.Event()
    activity.started()
    waited: list[float] = []

    def background() -> None:
        began = time.monotonic()
        assert activity.wait_quiet(0.1, 5.0, stop)
        waited.append(time.monotonic() - began)

    thread = threading.Thread(target=background)
    thread.start()
    time.sleep(0.3)
    assert thread.is_alive()  # a request is still in flight
    activity.ended()
    thread.join(5)
    assert waited and 0.35 <= waited[0] < 2.0  # the request, then the quiet spell


def test_wait_quiet_gives_up_after_its_limit_and_on_stop() -> None:
    activity = RequestActivity()
    activity.started()  # never ends: steady load
    began = time.monotonic()
    assert activity.wait_quiet(0.1, 0.3, threading.Event()) is False
    assert 0.25 <= time.monotonic() - began < 2.0
    stop = threading.Event()
    stop.set()
    assert activity.wait_quiet(0.1, 60.0, stop) is False


def test_the_app_counts_its_requests(settings: Settings) -> None:
    app = create_app(settings, scheduler=False)
    activity: RequestActivity = app.state.activity
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        assert activity.quiet_for() < 5.0  # a request just ended
        time.sleep(0.2)
        assert activity.quiet_for() >= 0.2


def test_the_saved_view_refresher_waits_while_a_request_is_served(
    session_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    refreshed: list[str] = []
    monkeypatch.setattr(saved, "refresh_saved_query", lambda session, key: refreshed.append(key))
    monkeypatch.setattr(saved, "REFRESH_QUIET_S", 0.05)
    activity = RequestActivity()
    refresher = saved.SavedQueryRefresher(session_factory, activity=activity)
    activity.started()
    refresher.submit(["a-view"])
    time.sleep(0.3)
    assert refreshed == []  # a request is in flight
    activity.ended()
    assert refresher.wait_idle(5.0)
    assert refreshed == ["a-view"]
    refresher.stop()
    assert refresher.join(5.0)


def _refresh_one_view(
    session_factory: sessionmaker[Session], activity: RequestActivity, timeout_s: float = 5.0
) -> saved.SavedQueryRefresher:
    """A refresher that refreshed one view and stopped."""
    refresher = saved.SavedQueryRefresher(session_factory, activity=activity)
    refresher.submit(["v"])
    assert refresher.wait_idle(timeout_s)
    refresher.stop()
    assert refresher.join(5.0)
    return refresher


def _note(session: Session, view: str) -> None:
    session.add(WarmView(key=view, query=view, last_used_at=utcnow()))
    session.flush()


def test_a_refresh_gives_way_to_a_request_and_is_done_after_it(
    session_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request arriving mid-refresh rolls the refresh back at its next statement; it runs
    again, whole, once the requests are quiet."""
    activity = RequestActivity()
    attempts: list[int] = []

    def refresh(session: Session, key: str) -> None:
        attempts.append(1)
        _note(session, f"{key}-{len(attempts)}")
        if len(attempts) == 1:  # a request starts (and ends) while this refresh runs
            activity.started()
            activity.ended()
        session.execute(text("SELECT 1"))

    monkeypatch.setattr(saved, "refresh_saved_query", refresh)
    monkeypatch.setattr(saved, "REFRESH_QUIET_S", 0.05)
    refresher = _refresh_one_view(session_factory, activity)
    assert (len(attempts), refresher.gave_way) == (2, 1)
    with session_factory() as session:  # the first attempt's write was rolled back
        assert session.scalars(select(WarmView.query)).all() == ["v-2"]


def test_under_steady_load_a_refresh_stops_giving_way_after_the_longest_wait(
    session_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    activity = RequestActivity()
    attempts: list[int] = []

    def refresh(session: Session, key: str) -> None:
        attempts.append(1)
        activity.started()  # a request arrives during every attempt
        activity.ended()
        session.execute(text("SELECT 1"))

    monkeypatch.setattr(saved, "refresh_saved_query", refresh)
    monkeypatch.setattr(saved, "REFRESH_QUIET_S", 0.01)
    monkeypatch.setattr(saved, "REFRESH_MAX_DEFER_S", 0.3)
    refresher = _refresh_one_view(session_factory, activity)
    assert refresher.gave_way == len(attempts) - 1 >= 1  # the last attempt went through


def test_a_request_cancels_the_statement_a_refresh_is_running(
    session_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh's long statement (a grouping scan takes up to half a second of a core at 100k
    offers) is cancelled when a request arrives, not run to its end."""
    activity = RequestActivity()
    attempts: list[float] = []
    long_sql = {
        "postgresql": "SELECT pg_sleep(20)",
        "sqlite": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
        "SELECT count(*) FROM (SELECT i FROM n LIMIT 2000000000)",
    }

    def refresh(session: Session, key: str) -> None:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            threading.Timer(0.3, lambda: (activity.started(), activity.ended())).start()
            session.execute(text(long_sql[session.get_bind().dialect.name]))
        session.execute(text("SELECT 1"))

    monkeypatch.setattr(saved, "refresh_saved_query", refresh)
    monkeypatch.setattr(saved, "REFRESH_QUIET_S", 0.05)
    started = time.monotonic()
    refresher = _refresh_one_view(session_factory, activity, timeout_s=15.0)
    assert (len(attempts), refresher.gave_way) == (2, 1)
    assert attempts[1] - started < 5.0  # not the 20 s the statement would have run
    with session_factory() as session:  # the pool still serves working connections
        assert session.scalar(text("SELECT 1")) == 1
