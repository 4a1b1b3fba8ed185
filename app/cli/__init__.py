"""The `gpufit` command line: serve, worker, db upgrade, load-sample, scrape, estimate."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from app.core.settings import get_settings
from app.store.db import make_engine, make_session_factory, session_scope

cli = typer.Typer(
    help="gpufit: cloud GPU offers ranked by fit to your training job.", no_args_is_help=True
)
db_cli = typer.Typer(help="Database commands.", no_args_is_help=True)
cli.add_typer(db_cli, name="db")


def _setup_logging() -> None:
    from app.core.logging_setup import configure_logging

    settings = get_settings()
    configure_logging(settings.log_level, settings)


@db_cli.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Apply migrations and sync the GPU catalog into the database."""
    from app.pipeline.catalog_sync import sync_gpu_catalog
    from app.store.migrate import upgrade

    settings = get_settings()
    upgrade(settings.database_url, revision)
    if revision == "head":
        factory = make_session_factory(make_engine(settings.database_url))
        with session_scope(factory) as session:
            count = sync_gpu_catalog(session)
        print(f"database at head; {count} GPU models in the catalog")


@cli.command("load-sample")
def load_sample_cmd(
    if_empty: Annotated[bool, typer.Option(help="Only load when there are no offers yet.")] = False,
) -> None:
    """Load the bundled recorded sample through the normal ingest path."""
    from app.pipeline.sample_loader import database_is_empty, load_sample, sample_dates

    factory = make_session_factory(make_engine(get_settings().database_url))
    with session_scope(factory) as session:
        if if_empty and not database_is_empty(session):
            print("offers already present; sample not loaded")
            return
        result = load_sample(session)
    dates = sample_dates()
    recorded = f"{dates[0]} to {dates[1]}" if dates else "unknown"
    print(
        f"loaded {result.offers} sample offers from {result.providers} providers "
        f"(recorded {recorded}); {len(result.warnings)} rows skipped or merged"
    )


@cli.command("scrape")
def scrape_cmd(
    providers: Annotated[
        list[str] | None, typer.Argument(help="Provider ids; all if none.")
    ] = None,
) -> None:
    """Scrape providers (and side feeds such as aws-spot-advisor) now; print each outcome."""
    from app.pipeline.scrape_runner import ScrapeRunner
    from app.pipeline.side_feeds import SIDE_FEEDS, SideFeedRunner
    from scrapers.registry import SCRAPERS, get_scraper_class

    _setup_logging()
    settings = get_settings()
    names = providers or [*sorted(SCRAPERS), *sorted(SIDE_FEEDS)]
    side = [n.strip().lower() for n in names if n.strip().lower() in SIDE_FEEDS]
    try:
        classes = [get_scraper_class(n) for n in names if n.strip().lower() not in SIDE_FEEDS]
    except KeyError as exc:
        print(exc.args[0])
        raise typer.Exit(2) from exc
    from app.web.warm import warm_after_ingest

    engine = make_engine(settings.database_url, work_mem_mb=settings.pg_work_mem_mb)
    runner = ScrapeRunner(
        settings,
        engine,
        make_session_factory(engine),
        before_commit=warm_after_ingest(settings),
    )
    side_runner = SideFeedRunner(settings, engine, runner.sessions)

    async def _all() -> list[str]:
        lines = []
        for feed_id in side:
            result = await side_runner.run_feed(feed_id)
            detail = result.error or (
                f"{result.seen} rows: {result.added} added, {result.updated} changed, "
                f"{result.removed} gone"
            )
            lines.append(f"{result.source}: {result.status}: {detail}")
        for cls in classes:
            result = await runner.run(cls)
            detail = result.error or (
                f"{result.seen} offers: {result.added} added, {result.updated} changed, "
                f"{result.removed} gone"
            )
            lines.append(f"{result.source}: {result.status}: {detail}")
        return lines

    lines = asyncio.run(_all())
    print("\n".join(lines))
    if any(": failed:" in line or ": partial:" in line for line in lines):
        raise typer.Exit(1)


@cli.command("serve")
def serve(
    host: Annotated[str | None, typer.Option(help="Default: GPUFIT_HOST.")] = None,
    port: Annotated[int | None, typer.Option(help="Default: GPUFIT_PORT.")] = None,
    scheduler: Annotated[bool, typer.Option(help="Run the scrape scheduler in-process.")] = True,
    workers: Annotated[int, typer.Option(min=1, help="uvicorn worker processes.")] = 1,
) -> None:
    """Serve the web app (with the scheduler unless --no-scheduler)."""
    import os

    import uvicorn

    _setup_logging()
    settings = get_settings()
    if not scheduler:
        os.environ["GPUFIT_SCHEDULER_ENABLED"] = "false"  # reaches worker processes too
    uvicorn.run(
        "app.asgi:app",
        host=host or settings.host,
        port=port or settings.port,
        workers=workers,
        log_config=None,
        timeout_keep_alive=int(settings.keep_alive_seconds),
    )


@cli.command("worker")
def worker() -> None:
    """Run only the scrape scheduler (no web server); SIGTERM stops it cleanly."""
    import signal

    from app.pipeline.scheduler import run_worker_forever
    from app.web.warm import warm_after_ingest

    _setup_logging()
    settings = get_settings()

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run_worker_forever(settings, stop=stop, before_commit=warm_after_ingest(settings))

    asyncio.run(main())


def _register_optional() -> None:
    try:
        from app.cli.estimate import register
    except ModuleNotFoundError:  # pragma: no cover - the fit module ships with the app
        return
    register(cli)


_register_optional()


def main() -> None:
    cli()
