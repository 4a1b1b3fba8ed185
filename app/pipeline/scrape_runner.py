"""Run one provider scrape end to end: lock, fetch, parse, validate, ingest, record the run.

Failure anywhere (HTTP, timeout, parse, a suspiciously small result, the database, a bug, a
stop) leaves every offer as it was and records the run with a readable error, redacted and
without internals (those go to the log). Each provider runs independently.

Only the fetch runs on the event loop; every database call, the lock included, and the parse
run in a worker thread, so a scrape waiting on its database never stalls the web requests
served by the same process. A running scrape beats a heartbeat; runs whose process died are
closed when the provider next runs, or by the scheduler's sweep.
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
from typing import Any

import httpx
from sqlalchemy import Connection, Engine, func, select, text, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.core.metrics import record_scrape
from app.core.redaction import install_log_redaction, redact, register_settings
from app.core.settings import Settings
from app.pipeline.ingest import ScrapeRejected, check_sanity, ingest_records, last_good_count
from app.pipeline.screening import screen_prices
from app.records import OfferRecord
from app.store.models import ScrapeRun, utcnow
from scrapers.base import FeedFormatError, MissingApiKey, ParseResult, Scraper, ScraperConfig
from scrapers.facts import apply_facts, load_facts
from scrapers.http import FetchError, make_client

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


class ProviderLock:
    """A Postgres session advisory lock for one provider, on a connection of its own.

    Blocking calls: the runner makes them in a worker thread. SQLite has one process per laptop
    install, so the lock is a no-op there.
    """

    def __init__(self, engine: Engine, source: str) -> None:
        self.engine = engine
        self.source = source
        self._conn: Connection | None = None

    def acquire(self) -> bool:
        """Try to take the lock; False if another process holds it."""
        if self.engine.dialect.name != "postgresql":
            return True
        conn = self.engine.connect()
        try:
            key = advisory_lock_key(self.source)
            got = bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar())
            conn.commit()
        except BaseException:
            conn.close()
            raise
        if got:
            self._conn = conn
        else:
            conn.close()
        return got

    def release(self) -> None:
        """Release the lock; a connection lost meanwhile (the server released it) is logged."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            key = advisory_lock_key(self.source)
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
            conn.commit()
        except SQLAlchemyError as exc:
            log.warning(
                "scrape lock connection lost; the server released the lock with it: %s",
                type(exc).__name__,
                extra={"source": self.source},
            )
        finally:
            try:
                conn.close()
            except SQLAlchemyError:
                pass


@contextmanager
def provider_lock(engine: Engine, source: str) -> Iterator[bool]:
    """Hold the provider's lock for a block (blocking; see ProviderLock)."""
    lock = ProviderLock(engine, source)
    got = lock.acquire()
    try:
        yield got
    finally:
        lock.release()


# A running scrape refreshes its heartbeat this often; one silent for ABANDONED_AFTER is dead.
HEARTBEAT_SECONDS = 15.0
ABANDONED_AFTER = timedelta(seconds=4 * HEARTBEAT_SECONDS)
INTERRUPTED = "interrupted: the process running it stopped"


def close_abandoned_runs(
    session: Session,
    now: datetime,
    *,
    source: str | None = None,
    stale_after: timedelta | None = None,
) -> int:
    """Mark runs left "running" by a process that died as failed; returns how many.

    A run is dead when its last heartbeat (its start, before the first beat) is older than
    `stale_after` (default ABANDONED_AFTER); with `source`, only that provider's runs.
    """
    last_sign = func.coalesce(ScrapeRun.heartbeat_at, ScrapeRun.started_at)
    cutoff = now - (ABANDONED_AFTER if stale_after is None else stale_after)
    stmt = update(ScrapeRun).where(ScrapeRun.status == "running", last_sign <= cutoff)
    if source is not None:
        stmt = stmt.where(ScrapeRun.source == source)
    result = session.execute(
        stmt.values(status="failed", finished_at=now, error=INTERRUPTED).execution_options(
            synchronize_session=False
        )
    )
    return int(getattr(result, "rowcount", 0) or 0)


def describe_error(exc: BaseException) -> str:
    """A one-line, user-readable description of why a scrape failed: no stack trace, no SQL,
    no credential (internals go to the log)."""
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
    elif isinstance(exc, FetchError | MissingApiKey):
        message = f"{type(exc).__name__}: {exc}"
    elif isinstance(exc, SQLAlchemyError):
        message = f"database error ({type(exc).__name__}); details are in the server log"
    elif isinstance(exc, TimeoutError):
        message = "timed out"
    else:
        message = f"internal error ({type(exc).__name__}); details are in the server log"
    return redact(" ".join(message.split()))[:MAX_ERROR_CHARS]


def _expected(exc: BaseException) -> bool:
    """Failures a feed or the network causes; anything else is logged with its traceback."""
    return isinstance(
        exc, httpx.HTTPError | FeedFormatError | ScrapeRejected | FetchError | TimeoutError
    )


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
        self._active: set[asyncio.Task[RunResult]] = set()
        register_settings(settings)
        install_log_redaction()
        # Runs in the ingest's transaction after its writes (e.g. app.web.warm warming the new
        # data version's aggregates, so the first request after the commit finds them ready).
        self.before_commit = before_commit

    async def run(self, scraper_cls: type[Scraper], *, scheduled: bool = False) -> RunResult:
        """Scrape one provider; with `scheduled`, skip if another replica ran it this interval.

        Never raises for a failure (a stop, CancelledError, still propagates, after the run is
        recorded as interrupted).
        """
        source = scraper_cls.name
        task = asyncio.current_task()
        if task is not None:
            self._active.add(task)
        lock = ProviderLock(self.engine, source)
        try:
            acquiring = asyncio.ensure_future(asyncio.to_thread(lock.acquire))
            try:
                got = await asyncio.shield(acquiring)
            except asyncio.CancelledError:
                # The thread goes on and may take the lock: wait for it, then let go.
                await _settled(acquiring)
                await asyncio.to_thread(lock.release)
                raise
            except Exception as exc:  # noqa: BLE001 - no database: nothing can be recorded
                log.exception("scrape could not start", extra={"source": source})
                return RunResult(source=source, status="failed", error=describe_error(exc))
            if not got:
                log.info("scrape skipped, another replica holds the lock", extra={"source": source})
                return RunResult(source=source, status="locked")
            try:
                if scheduled and await asyncio.to_thread(self._ran_recently, scraper_cls):
                    return RunResult(source=source, status="locked")
                return await self._run_locked(scraper_cls)
            except Exception as exc:  # noqa: BLE001 - before a run row exists: log and report
                log.exception("scrape could not start", extra={"source": source})
                return RunResult(source=source, status="failed", error=describe_error(exc))
            finally:
                await asyncio.to_thread(lock.release)
        finally:
            if task is not None:
                self._active.discard(task)

    async def stop(self, timeout: float = 10.0) -> None:
        """Cancel the scrapes in progress and wait (up to `timeout`) until each is recorded."""
        tasks = [t for t in self._active if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

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
        await asyncio.to_thread(self._close_abandoned, source)
        starting = asyncio.ensure_future(asyncio.to_thread(self._start_run, source))
        try:
            run_id = await asyncio.shield(starting)
        except asyncio.CancelledError:
            # Stopped while the run row was being written: close it as soon as it exists.
            if await _settled(starting):
                await asyncio.to_thread(
                    self._finish, starting.result(), source, "failed", INTERRUPTED, started
                )
            raise
        beat = asyncio.create_task(self._heartbeat(run_id, source))
        try:
            return await self._fetch_and_ingest(scraper_cls, run_id, started)
        except asyncio.CancelledError:
            # A stop (SIGTERM, shutdown) mid-run: say so now rather than leave it "running".
            await asyncio.to_thread(self._finish, run_id, source, "failed", INTERRUPTED, started)
            raise
        except Exception as exc:  # noqa: BLE001 - a crash is recorded with its reason
            log.exception("scrape crashed", extra={"source": source})
            return await asyncio.to_thread(
                self._finish, run_id, source, "failed", describe_error(exc), started
            )
        finally:
            beat.cancel()

    async def _fetch_and_ingest(
        self, scraper_cls: type[Scraper], run_id: int, started: float
    ) -> RunResult:
        source = scraper_cls.name
        scraper = scraper_cls(scraper_config(scraper_cls, self.settings))
        deadline = asyncio.timeout(self.settings.scrape_run_deadline_seconds)
        try:
            if scraper_cls.needs_key and not scraper.config.api_key:
                raise MissingApiKey("no API key")
            async with deadline:
                async with make_client(
                    timeout=self.settings.http_timeout_seconds,
                    deadline=self.settings.http_request_deadline_seconds,
                ) as client:
                    pages = await scraper.fetch(client)
            parsed = await asyncio.to_thread(scraper.parse, pages)
        except MissingApiKey as exc:
            return await asyncio.to_thread(
                self._finish, run_id, source, "skipped", f"skipped: {exc}", started
            )
        except Exception as exc:  # noqa: BLE001 - any failure is recorded, never raised
            if deadline.expired():
                error = (
                    "timed out: the fetch passed the run deadline of "
                    f"{self.settings.scrape_run_deadline_seconds:g} s"
                )
            else:
                error = describe_error(exc)
                if not _expected(exc):
                    log.exception("scrape failed", extra={"source": source})
            return await asyncio.to_thread(self._finish, run_id, source, "failed", error, started)
        records, warnings = await asyncio.to_thread(self._screen, parsed)
        degraded = [*scraper.degraded, *parsed.degraded]
        return await asyncio.to_thread(
            self._ingest, run_id, source, records, warnings, started, degraded
        )

    def _screen(self, parsed: ParseResult) -> tuple[list[OfferRecord], list[str]]:
        """Provider facts applied, then offers with absurd prices skipped with a warning."""
        records, skipped = screen_prices(
            _with_facts(parsed.records),
            floor=self.settings.min_price_per_gpu_hour,
            ceiling=self.settings.max_price_per_gpu_hour,
        )
        return records, [*parsed.warnings, *skipped]

    async def _heartbeat(self, run_id: int, source: str) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            try:
                await asyncio.to_thread(self._beat, run_id)
            except Exception:  # noqa: BLE001 - a missed beat is not a failed run
                log.warning("scrape heartbeat failed", extra={"source": source}, exc_info=True)

    def _beat(self, run_id: int) -> None:
        with self.sessions.begin() as session:
            session.execute(
                update(ScrapeRun).where(ScrapeRun.id == run_id).values(heartbeat_at=self.clock())
            )

    def _close_abandoned(self, source: str) -> None:
        # Under the provider's advisory lock (Postgres) no live process can be running this
        # provider, so any run still "running" is dead; on SQLite the heartbeat decides.
        stale_after = timedelta(0) if self.engine.dialect.name == "postgresql" else None
        with self.sessions.begin() as session:
            closed = close_abandoned_runs(
                session, self.clock(), source=source, stale_after=stale_after
            )
        if closed:
            log.warning("closed %d abandoned run(s)", closed, extra={"source": source})

    def _start_run(self, source: str) -> int:
        with self.sessions.begin() as session:
            now = self.clock()
            run = ScrapeRun(source=source, started_at=now, heartbeat_at=now, status="running")
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
        degraded: list[str] | None = None,
    ) -> RunResult:
        # A secondary feed failed: the primary offers land, the run says partial and why.
        final = "partial" if degraded else "ok"
        reason = "degraded: " + "; ".join(degraded)[:MAX_ERROR_CHARS] if degraded else None
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
                    final,
                    reason,
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
            status=final,
            error=reason,
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
                # Every stored error passes here: a degraded feed's reason may echo a request too.
                error=None if error is None else redact(error)[:MAX_ERROR_CHARS],
                finished_at=self.clock(),
                offers_seen=seen,
                offers_added=added,
                offers_updated=updated,
                offers_removed=removed,
                warnings="\n".join(redact(w) for w in (warnings or [])[:MAX_WARNINGS]) or None,
            )
        )

    def _finish(
        self, run_id: int, source: str, status: str, error: str, started: float
    ) -> RunResult:
        error = redact(error)[:MAX_ERROR_CHARS]
        log.warning("scrape %s: %s", status, error, extra={"source": source})
        try:
            with self.sessions.begin() as session:
                self._update_run(session, run_id, source, status, error, started)
        except Exception:  # noqa: BLE001 - the database itself may be down; the log keeps it
            log.exception("could not record the failed run", extra={"source": source})
        return RunResult(source=source, status=status, error=error, run_id=run_id)


async def _settled(future: asyncio.Future[Any]) -> bool:
    """Wait for a thread's future to finish; whether it finished with a result."""
    await asyncio.wait([future])
    return not future.cancelled() and future.exception() is None


class _Rejected(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _with_facts(records: list[OfferRecord]) -> list[OfferRecord]:
    facts = {p: load_facts(p) for p in {r.provider for r in records}}
    return [apply_facts(r, facts[r.provider]) for r in records]
