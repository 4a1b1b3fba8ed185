"""Warm the table views and GPU pages for a data version before anyone asks for them.

Every ingest changes the data version, so every cached aggregate (counts, facets, regions,
machine shapes, GPU price histories) goes cold with it. The worker that ingested builds the
views people open (the default `/`, and the views opened recently: `warm_views`) inside the
ingest's transaction, writing the aggregates to the shared cache table under the new version
(app.store.data_cache): when the commit makes the data visible, the aggregates are there for
every process, so the first request after a scrape is as fast as the second. A process starting
up does the same in the background for the current version (reading what another process
warmed, computing the rest).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import parse_qsl

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker
from starlette.requests import Request

from app.core.settings import Settings
from app.queries import filters_from_args, workload_from_args
from app.store import data_cache
from app.store.models import WarmView, utcnow
from app.web import urls
from app.web.views import gpu_page_data, index_context

log = logging.getLogger("gpufit.warm")

# Keys that pick a later page, not the view: a view is warmed as its first page is opened, in
# its order and length. The aggregates (counts, facets, regions, ranking shapes) serve every
# page and sort of a view, but a ranked page's head (its ids: app.queries.ranking.ranked_head)
# is the page's own, and at 1,000 rows finding it took ~70 ms of the first request.
PAGE_KEYS = ("offset", "after")
DEFAULT_VIEW = "/"  # the table with no parameters
GPU_PAGE = "/gpus/"
# A view is noted (one upsert) at most this often per process, and forgotten after VIEW_TTL.
NOTE_EVERY_S = 300.0
VIEW_TTL = timedelta(days=7)
_NOTED_MAX = 4096

_noted: OrderedDict[tuple[str, str], float] = OrderedDict()  # (database, view) -> when
_noted_lock = threading.Lock()


def view_of(request: Request) -> str:
    """The view a request shows, as the path that warms it: `/?<query but the later-page
    keys>` for the table and its JSON twin, `/gpus/<slug>` for a GPU page and its twin."""
    path = request.url.path
    if path.startswith(GPU_PAGE) or path.startswith("/api" + GPU_PAGE):
        return GPU_PAGE + path.rsplit("/", 1)[-1]
    return urls.url(DEFAULT_VIEW, urls.without(urls.args_of(request), *PAGE_KEYS))


def _key(view: str) -> str:
    return hashlib.sha256(view.encode()).hexdigest()


def note_request(request: Request) -> None:
    """Remember that this view was opened, so ingests keep it warm (throttled)."""
    view = view_of(request)
    if view == DEFAULT_VIEW:
        return  # always warmed
    now = time.monotonic()
    factory = request.app.state.session_factory
    key = (str(factory.kw["bind"].url), view)
    with _noted_lock:
        last = _noted.get(key)
        if last is not None and now - last < NOTE_EVERY_S:
            return
        _noted[key] = now
        _noted.move_to_end(key)
        while len(_noted) > _NOTED_MAX:
            _noted.popitem(last=False)
    try:
        with factory.begin() as session:
            _upsert(session, view, utcnow())
    except Exception:  # noqa: BLE001 - remembering a view must never fail the request
        log.warning("could not note a warm view", exc_info=True)


def _upsert(session: Session, view: str, now: datetime) -> None:
    row = {"key": _key(view), "query": view, "last_used_at": now}
    update = {"last_used_at": now}
    if session.get_bind().dialect.name == "postgresql":
        pg = postgresql.insert(WarmView).values(row)
        session.execute(pg.on_conflict_do_update(index_elements=[WarmView.key], set_=update))
    else:
        lite = sqlite.insert(WarmView).values(row)
        session.execute(lite.on_conflict_do_update(index_elements=[WarmView.key], set_=update))


def hot_views(session: Session, *, limit: int, now: datetime | None = None) -> list[str]:
    """The default view, then up to `limit` views opened most recently (within VIEW_TTL)."""
    since = (now or utcnow()) - VIEW_TTL
    recent = session.scalars(
        select(WarmView.query)
        .where(WarmView.last_used_at >= since)
        .order_by(WarmView.last_used_at.desc(), WarmView.key)
        .limit(limit)
    )
    return [DEFAULT_VIEW, *(q for q in recent if q != DEFAULT_VIEW)]


class WarmingStopped(Exception):
    """Warming was asked to stop (the process is shutting down); its transaction rolls back."""


@dataclass(frozen=True)
class WarmReport:
    views: int  # built
    failed: int
    seconds: float
    version: str | None


def warm_views(
    session: Session,
    settings: Settings,
    views: list[str],
    stop: threading.Event | None = None,
) -> tuple[int, int]:
    """Build each view as its page would (a table's rows, counts, facets, regions and ranking
    shapes; a GPU page's offers and chart), which leaves every aggregate it reads cached;
    returns (built, failed). Raises WarmingStopped between two views once `stop` is set."""
    built = failed = 0
    for view in views:
        if stop is not None and stop.is_set():
            raise WarmingStopped
        if view.startswith(GPU_PAGE):
            gpu_page_data(session, view.removeprefix(GPU_PAGE))
            built += 1
            continue
        query = view.partition("?")[2]
        args = [(k, v) for k, v in parse_qsl(query, keep_blank_values=False) if v.strip()]
        try:
            filters = filters_from_args(args)
            workload = workload_from_args(args)
        except (ValidationError, RequestValidationError):
            failed += 1  # a view made invalid by a later change of the parameters
            continue
        index_context(session, settings, args=args, filters=filters, workload=workload)
        built += 1
    return built, failed


def warm_data_version(
    session: Session, settings: Settings, stop: threading.Event | None = None
) -> WarmReport:
    """Warm the default and the hot views through `session`, writing what they compute to the
    shared cache under the data version `session` sees; drop older versions' rows and views
    nobody opened lately. The caller commits (the ingest's transaction, or its own)."""
    started = time.perf_counter()
    version = data_cache.data_version(session)
    if version is None:
        return WarmReport(0, 0, 0.0, None)
    views = hot_views(session, limit=settings.warm_views)
    with data_cache.writing_shared(session):
        built, failed = warm_views(session, settings, views, stop)
    data_cache.prune_shared(session, keep_version=version)
    session.execute(delete(WarmView).where(WarmView.last_used_at < utcnow() - VIEW_TTL))
    report = WarmReport(built, failed, time.perf_counter() - started, version)
    log.info(
        "warmed data version",
        extra={"views": built, "failed": failed, "seconds": round(report.seconds, 3)},
    )
    return report


def warm_after_ingest(settings: Settings) -> Callable[[Session], None]:
    """The scrape runner's before-commit hook: warm the new data version in its transaction."""

    def hook(session: Session) -> None:
        warm_data_version(session, settings)

    return hook


def warm_in_background(
    session_factory: sessionmaker[Session], settings: Settings, stop: threading.Event
) -> threading.Thread:
    """Start warming the current data version in a daemon thread (a process starting up); it
    stops between two views once `stop` is set, so shutdown waits for one view at most."""

    def run() -> None:
        try:
            with session_factory.begin() as session:
                warm_data_version(session, settings, stop)
        except WarmingStopped:
            log.info("start-up warm stopped by shutdown")
        except Exception:  # noqa: BLE001 - a cold cache is slower, never wrong
            log.exception("start-up warm failed")

    thread = threading.Thread(target=run, name="warm-on-start", daemon=True)
    thread.start()
    return thread
