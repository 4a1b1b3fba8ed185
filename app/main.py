"""The FastAPI application factory."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import APIRouter, Depends, FastAPI
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.staticfiles import StaticFiles

from app.api import estimate, health, metrics, offers, providers
from app.api.openapi import install_openapi
from app.core.activity import ActivityMiddleware, RequestActivity
from app.core.errors import install_error_handlers
from app.core.metrics import LatencyMiddleware
from app.core.ratelimit import PostRateLimitMiddleware
from app.core.security import (
    BodySizeLimitMiddleware,
    HeadMiddleware,
    SecurityHeadersMiddleware,
    reject_control_characters,
)
from app.core.settings import Settings, get_settings
from app.saved import OWNER_COOKIE, SavedQueryRefresher
from app.store.db import make_engine, make_session_factory
from app.web import pages, warm
from app.web.page_cache import PageCache
from app.web.row_cache import RowCache

log = logging.getLogger("gpufit")

ROOT = Path(__file__).resolve().parent.parent
# Shutdown waits this long for a background thread to finish the view it is building.
SHUTDOWN_WAIT_S = 60.0
STATIC_DIR = ROOT / "static"

# Each feature lives in its own module with a `router`.
ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    providers.router,
    estimate.router,
    offers.router,
    pages.router,
    metrics.router,
)


def _join_background(warming: threading.Thread | None, refresher: SavedQueryRefresher) -> None:
    if warming is not None:
        warming.join(timeout=SHUTDOWN_WAIT_S)
        if warming.is_alive():
            log.warning("start-up warm still running at shutdown")
    refresher.join(timeout=SHUTDOWN_WAIT_S)


def create_app(settings: Settings | None = None, *, scheduler: bool | None = None) -> FastAPI:
    """Build the app; `scheduler` overrides settings.scheduler_enabled (tests pass False)."""
    settings = settings or get_settings()
    engine = make_engine(settings.database_url, work_mem_mb=settings.pg_work_mem_mb)
    run_scheduler = settings.scheduler_enabled if scheduler is None else scheduler

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        sched = None
        stop_warming = threading.Event()
        warming = None
        if settings.warm_on_start:
            warming = warm.warm_in_background(app.state.session_factory, settings, stop_warming)
        app.state.start_up_warm = warming
        if run_scheduler:
            from app.pipeline.scheduler import start_scheduler

            # Its own engine: scrapes never use the web's pool; warming runs in each ingest.
            sched = start_scheduler(settings, before_commit=warm.warm_after_ingest(settings))
        app.state.scrape_scheduler = sched
        try:
            yield
        finally:
            if sched is not None:
                await sched.stop()
            # Both threads stop between two views; waiting for them means no query of this
            # app's is still running once shutdown returns (a new app, or a test's reset of the
            # tables, would otherwise race it).
            stop_warming.set()
            app.state.saved_refresher.stop()
            await asyncio.to_thread(_join_background, warming, app.state.saved_refresher)
            engine.dispose()

    app = FastAPI(
        title="gpufit",
        summary="Cloud GPU offers ranked by fit to a training or fine-tuning job",
        version="0.1.0",
        lifespan=lifespan,
        dependencies=[Depends(reject_control_characters)],
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.session_factory = make_session_factory(engine)
    app.state.page_cache = PageCache()
    app.state.row_cache = RowCache(settings.row_cache_rows)
    app.state.activity = RequestActivity()
    app.state.saved_refresher = SavedQueryRefresher(
        app.state.session_factory, activity=app.state.activity
    )
    install_error_handlers(app)
    # Compresses HTML, JSON, CSV and streamed exports alike (pages shrink ~6x); level 3 packs
    # a 25 MB export in half the time level 5 takes, for 15 % more bytes.
    app.add_middleware(GZipMiddleware, minimum_size=1000, compresslevel=3)
    app.add_middleware(LatencyMiddleware)
    app.add_middleware(ActivityMiddleware, activity=app.state.activity)
    app.add_middleware(BodySizeLimitMiddleware)
    app.add_middleware(
        PostRateLimitMiddleware,
        per_owner=settings.post_rate_limit_per_owner,
        per_address=settings.post_rate_limit_per_address,
        cookie=OWNER_COOKIE,
    )
    app.add_middleware(SecurityHeadersMiddleware, hsts=settings.https)
    app.add_middleware(HeadMiddleware)
    for router in ROUTERS:
        app.include_router(router)
    install_openapi(app, ROUTERS)
    if STATIC_DIR.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
