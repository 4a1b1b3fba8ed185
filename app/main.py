"""The FastAPI application factory."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import APIRouter, Depends, FastAPI
from fastapi.staticfiles import StaticFiles

from app.api import estimate, health, metrics, offers, providers
from app.api.openapi import install_openapi
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
from app.saved import OWNER_COOKIE
from app.store.db import make_engine, make_session_factory
from app.web import pages

log = logging.getLogger("gpufit")

ROOT = Path(__file__).resolve().parent.parent
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


def create_app(settings: Settings | None = None, *, scheduler: bool | None = None) -> FastAPI:
    """Build the app; `scheduler` overrides settings.scheduler_enabled (tests pass False)."""
    settings = settings or get_settings()
    engine = make_engine(settings.database_url)
    run_scheduler = settings.scheduler_enabled if scheduler is None else scheduler

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        sched = None
        if run_scheduler:
            from app.pipeline.scheduler import start_scheduler

            sched = start_scheduler(settings)  # its own engine: scrapes never use the web's pool
        app.state.scrape_scheduler = sched
        try:
            yield
        finally:
            if sched is not None:
                await sched.stop()
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
    install_error_handlers(app)
    app.add_middleware(LatencyMiddleware)
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
