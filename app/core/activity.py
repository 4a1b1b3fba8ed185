"""How busy this process is serving requests, for background work that should wait its turn.

Background threads (the saved-view refresher) share the interpreter lock and the database with
requests; run while a request is being served, a 50 ms refresh made that request 5-10x slower
(the first requests after a scrape, measured at 100k offers: 25 ms pages took 200-270 ms).
So such work starts in a quiet moment (`wait_quiet`) and gives way when a request arrives
(`requests_started`, checked by app.saved between two statements).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send


class RequestActivity:
    """Requests in flight and when the last one ended, shared by threads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._in_flight = 0
        self._started = 0
        self._last_end = float("-inf")
        self._changed = threading.Condition()

    def started(self) -> None:
        with self._changed:
            self._in_flight += 1
            self._started += 1
            self._changed.notify_all()

    def requests_started(self) -> int:
        """How many requests have started so far (background work notes it, then checks
        whether one arrived since)."""
        return self._started  # one int read: atomic under the interpreter lock

    def ended(self) -> None:
        with self._changed:
            self._in_flight -= 1
            self._last_end = self._clock()
            self._changed.notify_all()

    def wait_started_since(self, mark: int, stop: threading.Event, poll_s: float = 0.005) -> bool:
        """Block until a request starts after `requests_started()` was `mark` (True), or until
        `stop` is set (False; noticed within `poll_s`)."""
        with self._changed:
            while not stop.is_set():
                if self._started != mark:
                    return True
                self._changed.wait(poll_s)
        return False

    def quiet_for(self) -> float:
        """Seconds since the last request ended with none in flight (0 while one is)."""
        with self._changed:
            return 0.0 if self._in_flight else max(0.0, self._clock() - self._last_end)

    def wait_quiet(self, quiet_s: float, max_wait_s: float, stop: threading.Event) -> bool:
        """Block until no request has been served for `quiet_s`, at most `max_wait_s` (then go
        ahead: background work must not starve under steady load), or until `stop` is set.
        Returns whether it was quiet."""
        deadline = self._clock() + max_wait_s
        while not stop.is_set():
            quiet = self.quiet_for()
            if quiet >= quiet_s:
                return True
            left = deadline - self._clock()
            if left <= 0:
                return False
            with self._changed:
                self._changed.wait(min(left, quiet_s - quiet, 0.05))
        return False


class ActivityMiddleware:
    """Counts HTTP requests in flight into a RequestActivity (pure ASGI, like the others)."""

    def __init__(self, app: ASGIApp, activity: RequestActivity) -> None:
        self.app = app
        self.activity = activity

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.activity.started()
        try:
            await self.app(scope, receive, send)
        finally:
            self.activity.ended()
