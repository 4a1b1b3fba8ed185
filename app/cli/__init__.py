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

    configure_logging(get_settings().log_level)


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
    from app.pipeline.sample_loader import database_is_empty, load_sample, sample_date

    factory = make_session_factory(make_engine(get_settings().database_url))
    with session_scope(factory) as session:
        if if_empty and not database_is_empty(session):
            print("offers already present; sample not loaded")
            return
        result = load_sample(session)
    print(
        f"loaded {result.offers} sample offers from {result.providers} clouds "
        f"(recorded {sample_date()}); {len(result.warnings)} rows skipped or merged"
    )


@cli.command("scrape")
def scrape_cmd(
    providers: Annotated[
        list[str] | None, typer.Argument(help="Provider ids; all if none.")
    ] = None,
) -> None:
    """Scrape providers now and print each run's outcome."""
    from app.pipeline.scrape_runner import ScrapeRunner
    from scrapers.registry import SCRAPERS, get_scraper_class

    _setup_logging()
    settings = get_settings()
    names = providers or sorted(SCRAPERS)
    try:
        classes = [get_scraper_class(n) for n in names]
    except KeyError as exc:
        print(exc.args[0])
        raise typer.Exit(2) from exc
    from app.web.warm import warm_after_ingest

    engine = make_engine(settings.database_url)
    runner = ScrapeRunner(
        settings,
        engine,
        make_session_factory(engine),
        before_commit=warm_after_ingest(settings),
    )

    async def _all() -> list[str]:
        lines = []
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
    )


@cli.command("worker")
def worker() -> None:
    """Run only the scrape scheduler (no web server)."""
    from app.pipeline.scheduler import run_worker_forever
    from app.web.warm import warm_after_ingest

    _setup_logging()
    settings = get_settings()
    engine = make_engine(settings.database_url)
    asyncio.run(
        run_worker_forever(
            settings,
            engine,
            make_session_factory(engine),
            before_commit=warm_after_ingest(settings),
        )
    )


def _register_optional() -> None:
    try:
        from app.cli.estimate import register
    except ModuleNotFoundError:  # pragma: no cover - the fit module ships with the app
        return
    register(cli)


_register_optional()


def main() -> None:
    cli()
