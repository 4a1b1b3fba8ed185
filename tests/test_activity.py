"""Background work waits for a quiet moment in the requests (app.core.activity)."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app import saved
from app.core.activity import RequestActivity
from app.core.settings import Settings
from app.main import create_app


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
