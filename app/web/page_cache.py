"""Rendered table views kept for a few seconds within one data version (a micro-cache).

Everyone who opens the same view (the default table, a popular job) between two scrapes gets
the same rows, so the body is built once: a hit costs the data-version read, a dictionary
lookup and the per-visitor form token, instead of the ranking and the template (~5 ms instead
of 30-100 ms at 100k offers). The key holds the data-version token the request reads, so an
ingest makes every entry unreachable at once; the time limit (`page_cache_seconds`) bounds
what changes without an ingest: "last seen 4 min ago", a feed turning stale in the banner.

Only bodies that are the same for every visitor are kept: the form token each HTML page needs
is a placeholder in the stored body, replaced per request (app.web.pages).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session
from starlette.requests import Request

from app.core.settings import Settings
from app.store.data_cache import data_version

# Stands for the visitor's form token in a stored HTML body (no real token has this shape:
# they are hex).
TOKEN_PLACEHOLDER = "@@gpufit-form-token@@"
# How long a request waits for another's build of the same view before building its own.
BUILD_WAIT_S = 30.0


@dataclass(frozen=True)
class Page:
    """A stored response body and the headers that go with it."""

    body: bytes
    media_type: str
    headers: tuple[tuple[str, str], ...]
    stored_at: float = 0.0  # the cache's clock when kept


class _Building:
    """A view one thread is building; others wait on `done` and take `page`."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.page: Page | None = None


class PageCache:
    """Bodies by (database, data version, path and query), at most `page_cache_mb` in all."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._pages: OrderedDict[tuple[str, ...], Page] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._building: dict[tuple[str, ...], _Building] = {}

    def _key(self, request: Request, session: Session) -> tuple[str, ...] | None:
        version = data_version(session)
        if version is None:
            return None  # data written by something other than an ingest: never cached
        bind = str(session.get_bind().engine.url)
        return (bind, version, request.url.path, request.url.query)

    def fetch(
        self,
        request: Request,
        session: Session,
        settings: Settings,
        build: Callable[[], Page],
    ) -> Page:
        """The stored page for this request's view and data version, else `build()`'s, kept
        (a view that fails raises out of `build`, and nothing is kept).

        Requests for a view that another thread is building wait for that build instead of
        repeating it: after an ingest, every open connection asks for the same few views at
        once, and building each of them 30 times over is what made the load's slowest tail.
        """
        ttl = settings.page_cache_seconds
        key = self._key(request, session) if ttl > 0 else None
        if key is None:
            return build()
        with self._lock:
            page = self._pages.get(key)
            if page is not None and self._clock() - page.stored_at < ttl:
                self._pages.move_to_end(key)
                return page
            building = self._building.get(key)
            if building is None:
                building = self._building[key] = _Building()
                mine = True
            else:
                mine = False
        if not mine:
            if building.done.wait(BUILD_WAIT_S) and building.page is not None:
                return building.page
            return build()  # the other build failed or is stuck: answer on our own
        try:
            page = build()
            stored = Page(page.body, page.media_type, page.headers, self._clock())
            building.page = stored
            self._keep(key, stored, settings.page_cache_mb * 1024 * 1024)
            return stored
        finally:
            with self._lock:
                self._building.pop(key, None)
            building.done.set()

    def _keep(self, key: tuple[str, ...], page: Page, limit: int) -> None:
        if len(page.body) > limit // 8:  # one huge page must not flush the rest
            return
        with self._lock:
            old = self._pages.pop(key, None)
            if old is not None:
                self._bytes -= len(old.body)
            self._pages[key] = page
            self._bytes += len(page.body)
            while self._bytes > limit and self._pages:
                _, evicted = self._pages.popitem(last=False)
                self._bytes -= len(evicted.body)

    def pages(self) -> list[Page]:
        """The pages kept now, oldest first."""
        with self._lock:
            return list(self._pages.values())

    def size_bytes(self) -> int:
        """The bodies' bytes in all."""
        return self._bytes

    def clear(self) -> None:
        """Forget every page (tests)."""
        with self._lock:
            self._pages.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._pages)
