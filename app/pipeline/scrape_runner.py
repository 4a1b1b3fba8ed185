"""Run one provider scrape end to end: lock, fetch, parse, validate, ingest, record the run.

Failure anywhere (HTTP, timeout, parse, a suspiciously small result, the database) leaves every
offer as it was and records the run with a readable error. Each provider runs independently.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from sqlalchemy import Engine, select, text, update
from sqlalchemy.orm import Session, sessionmaker

from app.core.metrics import record_scrape
from app.core.settings import Settings
from app.pipeline.ingest import ScrapeRejected, check_sanity, ingest_records, last_good_count
from app.records import OfferRecord
from app.store.models import ScrapeRun, utcnow
from scrapers.base import FeedFormatError, MissingApiKey, Scraper, ScraperConfig
from scrapers.facts import apply_facts, load_facts
from scrapers.http import make_client

log = logging.getLogger("gpufit.scrape")

MAX_ERROR_CHARS = 2000
MAX_WARNINGS = 50


@dataclass(frozen=True)
class RunResult:
    source: str
    status: str  # ok | partial | failed | skipped | locked
    error: str | None = None
    seen: int = 0
    added: int = 0
    updated: int = 0
    removed: int = 0
    run_id: int | None = None


def scraper_config(scraper_cls: type[Scraper], settings: Settings) -> ScraperConfig:
    """Build a scraper's config from its defaults and the GPUFIT_PROVIDERS__<ID>__* settings."""
    override = settings.provider(scraper_cls.name)
    extra = {**scraper_cls.extra_default_urls, **override.extra_urls}
    return ScraperConfig(
        base_url=override.url or scraper_cls.default_url,
        api_key=override.api_key,
        api_secret=override.api_secret,
        extra_urls=extra,
    )


def interval_minutes(scraper_cls: type[Scraper], settings: Settings) -> float:
    """Configured interval, else 30 min for marketplaces and 6 h for list-price clouds."""
    override = settings.provider(scraper_cls.name).interval_minutes
    if override:
        return override
    if scraper_cls.kind == "marketplace":
        return settings.marketplace_interval_minutes
    return settings.list_interval_minutes


def advisory_lock_key(source: str) -> int:
    """A stable signed 64-bit key per provider for pg_try_advisory_lock."""
    digest = hashlib.sha256(f"gpufit-scrape:{source}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextmanager
def provider_lock(engine: Engine, source: str) -> Iterator[bool]:
    """Hold a Postgres session advisory lock for `source`; yields False if another holds it.

    SQLite has one process per laptop install, so the lock is a no-op there.
    """
    if engine.dialect.name != "postgresql":
        yield True
        return
    key = advisory_lock_key(source)
    with engine.connect() as conn:
        got = bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar())
        conn.commit()
        try:
            yield got
        finally:
            if got:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                conn.commit()


ABANDONED_AFTER = timedelta(hours=1)


def close_abandoned_runs(session: Session, now: datetime) -> int:
    """Mark runs left "running" by a process that died as failed; returns how many."""
    result = session.execute(
        update(ScrapeRun)
        .where(ScrapeRun.status == "running", ScrapeRun.started_at < now - ABANDONED_AFTER)
        .values(
            status="failed", finished_at=now, error="interrupted: the process running it stopped"
        )
    )
    return int(getattr(result, "rowcount", 0) or 0)


def describe_error(exc: BaseException) -> str:
    """A one-line, user-readable description of why a scrape failed (no stack trace)."""
    if isinstance(exc, httpx.TimeoutException):
        url = exc.request.url if exc._request is not None else "the feed"
        message = f"timed out fetching {url}"
    elif isinstance(exc, httpx.HTTPStatusError):
        message = f"HTTP {exc.response.status_code} from {exc.request.url}"
    elif isinstance(exc, httpx.TransportError):
        message = f"network error: {exc or type(exc).__name__}"
    elif isinstance(exc, FeedFormatError):
        message = f"malformed feed: {exc}"
    elif isinstance(exc, ScrapeRejected):
        message = f"rejected: {exc}"
    else:
        message = f"{type(exc).__name__}: {exc}"
    return message.replace("\n", " ")[:MAX_ERROR_CHARS]


class ScrapeRunner:
    """Runs scrapers against one database; shared by the CLI, the worker and the web process."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        session_factory: sessionmaker[Session],
        *,
        clock: Callable[[], datetime] = utcnow,
        before_commit: Callable[[Session], None] | None = None,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.sessions = session_factory
        self.clock = clock
        # Runs in the ingest's transaction after its writes (e.g. app.web.warm warming the new
        # data version's aggregates, so the first request after the commit finds them ready).
        self.before_commit = before_commit

    async def run(self, scraper_cls: type[Scraper], *, scheduled: bool = False) -> RunResult:
        """Scrape one provider; with `scheduled`, skip if another replica ran it this interval."""
        source = scraper_cls.name
        with provider_lock(self.engine, source) as got:
            if not got:
                log.info("scrape skipped, another replica holds the lock", extra={"source": source})
                return RunResult(source=source, status="locked")
            if scheduled and await asyncio.to_thread(self._ran_recently, scraper_cls):
                return RunResult(source=source, status="locked")
            return await self._run_locked(scraper_cls)

    def _ran_recently(self, scraper_cls: type[Scraper]) -> bool:
        # Several replicas fire the same interval job at slightly different (jittered) times;
        # the first takes it, the rest see its run here and stand down.
        window = timedelta(minutes=interval_minutes(scraper_cls, self.settings) / 2)
        with self.sessions() as session:
            last = session.scalar(
                select(ScrapeRun.started_at)
                .where(ScrapeRun.source == scraper_cls.name)
                .order_by(ScrapeRun.started_at.desc())
                .limit(1)
            )
        return last is not None and self.clock() - last < window

    async def _run_locked(self, scraper_cls: type[Scraper]) -> RunResult:
        source = scraper_cls.name
        started = time.monotonic()
        run_id = await asyncio.to_thread(self._start_run, source)
        scraper = scraper_cls(scraper_config(scraper_cls, self.settings))
        try:
            if scraper_cls.needs_key and not scraper.config.api_key:
                raise MissingApiKey("no API key")
            async with make_client(timeout=self.settings.http_timeout_seconds) as client:
                pages = await scraper.fetch(client)
            parsed = scraper.parse(pages)
        except MissingApiKey as exc:
            return await asyncio.to_thread(
                self._finish, run_id, source, "skipped", f"skipped: {exc}", started
            )
        except Exception as exc:  # noqa: BLE001 - any failure is recorded, never raised
            return await asyncio.to_thread(
                self._finish, run_id, source, "failed", describe_error(exc), started
            )
        records = _with_facts(parsed.records)
        return await asyncio.to_thread(
            self._ingest, run_id, source, records, parsed.warnings, started
        )

    def _start_run(self, source: str) -> int:
        with self.sessions.begin() as session:
            run = ScrapeRun(source=source, started_at=self.clock(), status="running")
            session.add(run)
            session.flush()
            return run.id

    def _ingest(
        self,
        run_id: int,
        source: str,
        records: list[OfferRecord],
        warnings: list[str],
        started: float,
    ) -> RunResult:
        try:
            with self.sessions.begin() as session:
                status = "failed" if not records else "partial"
                try:
                    check_sanity(
                        len({r.key for r in records}),
                        last_good_count(session, source),
                        self.settings.min_offer_fraction,
                    )
                except ScrapeRejected as exc:
                    # Raised out of the transaction so nothing it did is kept.
                    raise _Rejected(status, describe_error(exc)) from exc
                stats = ingest_records(session, source=source, records=records, now=self.clock())
                all_warnings = [*warnings, *stats.warnings]
                self._update_run(
                    session,
                    run_id,
                    source,
                    "ok",
                    None,
                    started,
                    seen=stats.seen,
                    added=stats.added,
                    updated=stats.updated,
                    removed=stats.removed,
                    warnings=all_warnings,
                )
                self._before_commit(session, source)
        except _Rejected as rejected:
            return self._finish(run_id, source, rejected.status, rejected.message, started)
        except Exception as exc:  # noqa: BLE001 - e.g. the database went away mid-scrape
            log.exception("ingest failed", extra={"source": source})
            return self._finish(run_id, source, "failed", describe_error(exc), started)
        log.info(
            "scrape ok",
            extra={
                "source": source,
                "seen": stats.seen,
                "added": stats.added,
                "updated": stats.updated,
                "removed": stats.removed,
            },
        )
        return RunResult(
            source=source,
            status="ok",
            seen=stats.seen,
            added=stats.added,
            updated=stats.updated,
            removed=stats.removed,
            run_id=run_id,
        )

    def _before_commit(self, session: Session, source: str) -> None:
        """The before-commit hook in a savepoint: its failure must never undo fresh offers."""
        if self.before_commit is None:
            return
        # SQLite: no savepoint (pysqlite's are unreliable); a failed read there leaves the
        # transaction usable, unlike Postgres where any error aborts it.
        postgres = session.get_bind().dialect.name == "postgresql"
        try:
            with session.begin_nested() if postgres else nullcontext():
                self.before_commit(session)
        except Exception:  # noqa: BLE001 - logged; the data still commits
            log.exception("after-ingest hook failed", extra={"source": source})

    def _update_run(
        self,
        session: Session,
        run_id: int,
        source: str,
        status: str,
        error: str | None,
        started: float,
        *,
        seen: int = 0,
        added: int = 0,
        updated: int = 0,
        removed: int = 0,
        warnings: list[str] | None = None,
    ) -> None:
        record_scrape(source, status, time.monotonic() - started)
        session.execute(
            update(ScrapeRun)
            .where(ScrapeRun.id == run_id)
            .values(
                status=status,
                error=error,
                finished_at=self.clock(),
                offers_seen=seen,
                offers_added=added,
                offers_updated=updated,
                offers_removed=removed,
                warnings="\n".join((warnings or [])[:MAX_WARNINGS]) or None,
            )
        )

    def _finish(
        self, run_id: int, source: str, status: str, error: str, started: float
    ) -> RunResult:
        log.warning("scrape %s: %s", status, error, extra={"source": source})
        try:
            with self.sessions.begin() as session:
                self._update_run(session, run_id, source, status, error, started)
        except Exception:  # noqa: BLE001 - the database itself may be down; the log keeps it
            log.exception("could not record the failed run", extra={"source": source})
        return RunResult(source=source, status=status, error=error, run_id=run_id)


class _Rejected(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _with_facts(records: list[OfferRecord]) -> list[OfferRecord]:
    facts = {p: load_facts(p) for p in {r.provider for r in records}}
    return [apply_facts(r, facts[r.provider]) for r in records]
