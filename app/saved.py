"""Saved searches: owned by a browser's unguessable cookie token, shared by their own token.

A saved search is a name plus the canonical query string of `/`. Searches of the same view share
one `SavedQuery` (keyed by `query_key`), so whatever a view costs is paid once however many
people saved it: its match count and best offer as of a data version, and its feed entries (new
matching offers, a lower best price, offers available again), read from the change log every
ingest writes (app.queries.changes). Nothing runs per saved search during or after a scrape: a
view is brought up to date when someone looks at it (`refresh_saved_query`), its feed or the
/saved page, and a view left stale there is refreshed in the background
(`SavedQueryRefresher`).

CSRF: the form token is an HMAC-free derivation of the owner token (SHA-256 of a label and the
token). The owner token lives only in an HttpOnly cookie, so another site can neither read it nor
compute the form token; with SameSite=Lax the cookie is not even sent on cross-site POSTs. Each
page carries it XOR a fresh random mask, so compressed pages that also echo the query string
never repeat the secret (BREACH).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import queue
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from sqlalchemy import delete, event, func, select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from app.core.activity import RequestActivity
from app.fit import Workload
from app.queries import (
    OfferFilters,
    OfferPage,
    OfferRow,
    RankedOffer,
    changed_matches,
    filters_from_args,
    get_offer,
    last_change_id,
    search_offers,
    workload_from_args,
)
from app.queries.params import LIST_KEYS
from app.store.data_cache import data_version
from app.store.models import SavedQuery, SavedQueryEntry, SavedSearch, SavedSearchEntry, utcnow

log = logging.getLogger("gpufit.saved")

OWNER_COOKIE = "gpufit_owner"
MAX_NAME = 200
MAX_QUERY = 4000
# Keys that only change which page is shown; a saved search is the view, not the page.
_PAGE_KEYS = frozenset({"offset", "limit", "after"})
# Nor does the order change what a view matches (its best offer has its own order).
_KEY_IGNORED = _PAGE_KEYS | {"sort"}
_PRICE_EPSILON = 1e-9
_NEW_OFFERS_LISTED = 10
FEED_ENTRIES = 50
REFRESH_PAUSE_S = 0.01
# The background refresher starts a view once no request has been served for this long, or
# after waiting this long whatever the traffic (app.core.activity).
REFRESH_QUIET_S = 0.25
REFRESH_MAX_DEFER_S = 10.0


def new_token() -> str:
    """An unguessable token (256 bits of randomness)."""
    return secrets.token_urlsafe(32)


def _form_secret(owner_token: str) -> bytes:
    return hashlib.sha256(b"gpufit-csrf:" + owner_token.encode()).digest()


def csrf_token(owner_token: str) -> str:
    """The form token for a browser, masked afresh on every call (see the module docs)."""
    secret = _form_secret(owner_token)
    mask = secrets.token_bytes(len(secret))
    return (mask + bytes(a ^ b for a, b in zip(mask, secret, strict=True))).hex()


def csrf_ok(owner_token: str | None, submitted: str | None) -> bool:
    """Whether a submitted form token belongs to this browser (constant-time compare)."""
    if not owner_token or not submitted:
        return False
    try:
        raw = bytes.fromhex(submitted)
    except ValueError:
        return False
    secret = _form_secret(owner_token)
    if len(raw) != 2 * len(secret):
        return False
    mask, masked = raw[: len(secret)], raw[len(secret) :]
    return hmac.compare_digest(bytes(a ^ b for a, b in zip(mask, masked, strict=True)), secret)


class SavedSearchError(ValueError):
    """A save/rename request that cannot be honoured; `field` names the bad form field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def canonical_query(query: str) -> str:
    """The query string without blanks and page keys, with a leading '?' removed."""
    pairs = parse_qsl(query.lstrip("?"), keep_blank_values=False)
    return urlencode([(k, v) for k, v in pairs if k not in _PAGE_KEYS and v.strip()])


def query_key(query: str) -> str:
    """The key of the view a query string selects: order of parameters, repeats of a list
    value, blanks, the page and the sort make no difference (SHA-256 hex).

    migrations/versions/0007 holds a frozen copy: a change here needs a data migration.
    """
    seen: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    for key, value in parse_qsl(query.lstrip("?"), keep_blank_values=False):
        value = value.strip()
        if key in _KEY_IGNORED or not value:
            continue
        if key in LIST_KEYS:
            pairs.add((key, value))
        elif key not in seen:  # a scalar parameter's first value is the one that counts
            seen.add(key)
            pairs.add((key, value))
    return hashlib.sha256(urlencode(sorted(pairs)).encode()).hexdigest()


@dataclass(frozen=True)
class ParsedQuery:
    filters: OfferFilters
    workload: Workload | None


def parse_query(query: str) -> ParsedQuery:
    """Filters and workload of a saved query string; SavedSearchError names a bad field."""
    pairs = parse_qsl(query, keep_blank_values=False)
    try:
        filters = filters_from_args(pairs)
        workload = workload_from_args(pairs)
    except ValidationError as exc:
        loc = exc.errors()[0].get("loc") or ("query",)
        raise SavedSearchError(str(loc[0]), f"invalid filter {loc[0]}") from exc
    except RequestValidationError as exc:
        err = exc.errors()[0]
        field = str(err.get("loc", ("query", "query"))[-1])
        raise SavedSearchError(field, f"invalid workload field {field}: {err.get('msg')}") from exc
    return ParsedQuery(filters, workload)


def _clean_name(name: str) -> str:
    text = " ".join(name.split())
    if not text:
        raise SavedSearchError("name", "give the search a name")
    if len(text) > MAX_NAME:
        raise SavedSearchError("name", f"name longer than {MAX_NAME} characters")
    return text


class SavedSearchLimitReached(Exception):
    """This browser already keeps the most saved searches one browser may keep."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"This browser already keeps {limit} saved searches, the most allowed; "
            "delete one before saving another."
        )
        self.limit = limit


def check_owner_capacity(session: Session, *, owner_token: str, limit: int) -> None:
    """Raise SavedSearchLimitReached when the owner already has `limit` saved searches.

    On Postgres a transaction-scoped lock per owner makes concurrent saves count one at a time.
    """
    if session.get_bind().dialect.name == "postgresql":
        key = int.from_bytes(hashlib.sha256(b"gpufit-owner:" + owner_token.encode()).digest()[:8],
                             "big", signed=True)  # fmt: skip
        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
    count = session.scalar(
        select(func.count()).select_from(SavedSearch).where(SavedSearch.owner_token == owner_token)
    )
    if (count or 0) >= limit:
        raise SavedSearchLimitReached(limit)


def create_saved_search(
    session: Session,
    *,
    owner_token: str,
    name: str,
    query: str,
    now: datetime | None = None,
    max_per_owner: int | None = None,
) -> SavedSearch:
    """Store a search for this browser and record its first feed entry; caller commits.

    With `max_per_owner`, raise SavedSearchLimitReached instead of storing one too many.
    """
    if max_per_owner is not None:
        check_owner_capacity(session, owner_token=owner_token, limit=max_per_owner)
    if len(query) > MAX_QUERY:
        raise SavedSearchError("query", f"query longer than {MAX_QUERY} characters")
    canonical = canonical_query(query)
    parse_query(canonical)  # reject what would fail later, with the field named now
    now = now or utcnow()
    key = query_key(canonical)
    search = SavedSearch(
        share_token=new_token(),
        owner_token=owner_token,
        name=_clean_name(name),
        query=canonical,
        query_key=key,
        created_at=now,
        updated_at=now,
    )
    session.add(search)
    if session.get(SavedQuery, key) is None:
        session.add(SavedQuery(key=key, query=canonical, created_at=now))
    session.flush()
    # One view brought up to date: a user's own action, never a scrape's.
    refresh_saved_query(session, key=key, now=now)
    state = session.get_one(SavedQuery, key)
    best = None
    if state.best_offer_id is not None:
        best = get_offer(session, offer_id=state.best_offer_id)
    summary = f"{state.match_count} offers match."
    if best is not None and state.best_price is not None:
        label = _price_label(parse_query(canonical))
        summary += f" Best: {_describe_row(best)} at ${state.best_price:,.2f} {label}."
    session.add(
        SavedSearchEntry(
            saved_search_id=search.id,
            created_at=now,
            kind="created",
            title=f"Saved search “{search.name}”",
            summary=summary,
            offer_id=state.best_offer_id,
        )
    )
    session.flush()
    return search


def owned_searches(session: Session, *, owner_token: str | None) -> list[SavedSearch]:
    """This browser's saved searches, newest first (none without a token)."""
    if not owner_token:
        return []
    stmt = (
        select(SavedSearch)
        .where(SavedSearch.owner_token == owner_token)
        .order_by(SavedSearch.created_at.desc(), SavedSearch.id.desc())
    )
    return list(session.scalars(stmt))


def owned_search(
    session: Session, *, owner_token: str | None, share_token: str
) -> SavedSearch | None:
    """The search with `share_token` if this browser owns it; None otherwise (no hint which)."""
    if not owner_token:
        return None
    search = by_share_token(session, share_token=share_token)
    if search is None or not hmac.compare_digest(search.owner_token, owner_token):
        return None
    return search


def by_share_token(session: Session, *, share_token: str) -> SavedSearch | None:
    """A saved search by its public share token."""
    return session.scalar(select(SavedSearch).where(SavedSearch.share_token == share_token))


def rename_saved_search(session: Session, *, search: SavedSearch, name: str) -> None:
    """Rename an (owned) search; caller commits."""
    search.name = _clean_name(name)
    search.updated_at = utcnow()


def delete_saved_search(session: Session, *, search: SavedSearch) -> None:
    """Delete an (owned) search with its feed, and its view's state once nobody saves it."""
    # Explicit deletes: SQLite honours ON DELETE CASCADE only with foreign keys enabled.
    session.execute(delete(SavedSearchEntry).where(SavedSearchEntry.saved_search_id == search.id))
    key = search.query_key
    session.delete(search)
    session.flush()
    others = session.scalar(
        select(func.count()).select_from(SavedSearch).where(SavedSearch.query_key == key)
    )
    if not others:
        session.execute(delete(SavedQueryEntry).where(SavedQueryEntry.query_key == key))
        session.execute(delete(SavedQuery).where(SavedQuery.key == key))


# ---------------------------------------------------------------------------------------------
# A view's state: counts as of a data version, and its feed from the change log


@dataclass(frozen=True)
class BestMatch:
    """A saved search's current result: match count and the best offer with its price."""

    count: int
    best: RankedOffer | None
    price: float | None  # est. total job cost with a workload, else price per GPU-hour
    price_label: str


def _best_page(parsed: ParsedQuery) -> OfferFilters:
    # Best by job cost with a workload (fitting offers only), else by price per GPU-hour.
    sort = "cost" if parsed.workload is not None else "price_per_gpu"
    return parsed.filters.model_copy(
        update={
            "sort": sort,
            "limit": 1,
            "offset": 0,
            "fits_only": parsed.workload is not None or parsed.filters.fits_only,
        }
    )


def current_match(session: Session, *, query: str) -> BestMatch:
    """How many offers match a saved query now, and the best of them."""
    parsed = parse_query(query)
    return _match(session, parsed)


def _match(session: Session, parsed: ParsedQuery) -> BestMatch:
    page: OfferPage = search_offers(session, filters=_best_page(parsed), workload=parsed.workload)
    best = page.offers[0] if page.offers else None
    return BestMatch(page.total, best, _price_of(best, parsed), _price_label(parsed))


def _price_label(parsed: ParsedQuery) -> str:
    return "est. job cost" if parsed.workload is not None else "per GPU-hour"


def _price_of(item: RankedOffer | None, parsed: ParsedQuery) -> float | None:
    if item is None:
        return None
    if parsed.workload is not None:
        return item.fit.est_total_cost if item.fit else None
    row = item.row
    price = (
        row.spot_price_per_hour
        if parsed.filters.market == "spot"
        else (row.price_per_hour if row.price_per_hour is not None else row.spot_price_per_hour)
    )
    return None if price is None else price / row.gpu_count


def _describe_row(row: OfferRow) -> str:
    where = f"{row.provider_name} {row.instance_type} ({row.region})"
    return f"{where}: {row.gpu_count:g}× {row.gpu_name}"


def _describe(item: RankedOffer) -> str:
    return _describe_row(item.row)


def _listing(items: Sequence[RankedOffer], count: int) -> str:
    lines = [_describe(item) for item in items[:_NEW_OFFERS_LISTED]]
    more = count - len(lines)
    return "\n".join(lines) + (f"\n… and {more} more" if more > 0 else "")


@dataclass(frozen=True)
class Position:
    """Where the data stands: the data-version token and the newest change-log id."""

    version: str | None
    change_id: int


def position(session: Session) -> Position:
    """The data version and the change log's end, read in that order (see `is_current`)."""
    return Position(data_version(session), last_change_id(session))


def is_current(state: SavedQuery, at: Position) -> bool:
    """Whether a view's counts are those of the data version `at` and its feed has read the
    change log up to there."""
    return (
        state.computed_at is not None
        and state.version == at.version
        and state.checked_change_id >= at.change_id
    )


# Per key, so two threads of one process never refresh the same view at once (Postgres also
# locks the row, for other processes; SQLite runs one process).
_KEY_LOCKS: dict[str, threading.Lock] = {}
_KEY_LOCKS_GUARD = threading.Lock()


def _key_lock(key: str) -> threading.Lock:
    with _KEY_LOCKS_GUARD:
        if len(_KEY_LOCKS) > 10_000:
            _KEY_LOCKS.clear()  # locks not held are free to drop; a held one keeps its holder
        return _KEY_LOCKS.setdefault(key, threading.Lock())


def refresh_saved_query(session: Session, *, key: str, now: datetime | None = None) -> int:
    """Bring one view up to date: feed entries for the change log since it last read it (new
    matching offers, offers available again), its count and best offer now, and an entry when
    the best price dropped. Returns the entries added; caller commits.

    A view's first refresh records no entries: there is nothing to compare with yet.
    """
    with _key_lock(key):
        return _refresh(session, key, now or utcnow())


def _refresh(session: Session, key: str, now: datetime) -> int:
    stmt = select(SavedQuery).where(SavedQuery.key == key)
    if session.get_bind().dialect.name == "postgresql":
        stmt = stmt.with_for_update()
    state = session.scalars(stmt.execution_options(populate_existing=True)).first()
    if state is None:
        return 0
    at = position(session)
    if is_current(state, at):
        return 0
    try:
        parsed = parse_query(state.query)
    except SavedSearchError:
        # A query made invalid by a later change of the filters: nothing to report.
        state.version, state.computed_at, state.checked_change_id = at.version, now, at.change_id
        return 0
    entries: list[SavedQueryEntry] = []
    first = state.computed_at is None
    if not first:
        entries += _change_entries(session, state, parsed, at.change_id, now)
    match = _match(session, parsed)
    old = state.best_price
    if (
        match.price is not None
        and old is not None
        and match.price < old - _PRICE_EPSILON
        and match.best is not None
    ):
        entries.append(
            SavedQueryEntry(
                query_key=key,
                created_at=now,
                kind="price_drop",
                title=f"Best price for “{{name}}” dropped to ${match.price:,.2f}",
                summary=(
                    f"{_describe(match.best)}: ${match.price:,.2f} {match.price_label}, "
                    f"was ${old:,.2f}."
                ),
                offer_id=match.best.row.id,
            )
        )
    state.version = at.version
    state.computed_at = now
    state.checked_change_id = max(state.checked_change_id, at.change_id)
    state.match_count = match.count
    state.best_price = match.price
    state.best_offer_id = match.best.row.id if match.best else None
    session.add_all(entries)
    session.flush()
    return len(entries)


# Entries read from the change log: (changes.changed_matches kind, entry kind, title).
_CHANGE_ENTRIES = (
    ("new", "new_offers", "{n} new offer(s) match “{{name}}”"),
    ("available", "available", "{n} offer(s) matching “{{name}}” available again"),
)


def _change_entries(
    session: Session, state: SavedQuery, parsed: ParsedQuery, upto: int, now: datetime
) -> list[SavedQueryEntry]:
    out = []
    for change, kind, title in _CHANGE_ENTRIES:
        found = changed_matches(
            session,
            filters=parsed.filters,
            workload=parsed.workload,
            after=state.checked_change_id,
            upto=upto,
            kind=change,
        )
        if found.count:
            out.append(
                SavedQueryEntry(
                    query_key=state.key,
                    created_at=now,
                    kind=kind,
                    title=title.format(n=found.count),
                    summary=_listing(found.best, found.count),
                    offer_id=found.best[0].row.id,
                )
            )
    return out


def saved_states(session: Session, keys: Iterable[str]) -> dict[str, SavedQuery]:
    """The stored states of these views (one query)."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    rows = session.scalars(select(SavedQuery).where(SavedQuery.key.in_(wanted)))
    return {row.key: row for row in rows}


@dataclass(frozen=True)
class FeedItem:
    """One Atom entry of a saved search's feed."""

    atom_id: str  # unique within the feed
    created_at: datetime
    kind: str
    title: str
    summary: str
    offer_id: int | None


def feed_entries(
    session: Session, *, search: SavedSearch, limit: int = FEED_ENTRIES
) -> list[FeedItem]:
    """The newest entries of a search's feed: its own, and its view's since it was saved."""
    own = session.scalars(
        select(SavedSearchEntry)
        .where(SavedSearchEntry.saved_search_id == search.id)
        .order_by(SavedSearchEntry.created_at.desc(), SavedSearchEntry.id.desc())
        .limit(limit)
    )
    shared = session.scalars(
        select(SavedQueryEntry)
        .where(
            SavedQueryEntry.query_key == search.query_key,
            SavedQueryEntry.created_at >= search.created_at,
        )
        .order_by(SavedQueryEntry.created_at.desc(), SavedQueryEntry.id.desc())
        .limit(limit)
    )
    items = [FeedItem(str(e.id), e.created_at, e.kind, e.title, e.summary, e.offer_id) for e in own]
    items += [
        FeedItem(
            f"q{e.id}",
            e.created_at,
            e.kind,
            e.title.replace("{name}", search.name),
            e.summary,
            e.offer_id,
        )
        for e in shared
    ]
    # Shared entries win ties: a view's change is newer news than the search's creation.
    items.sort(key=lambda i: (i.created_at, i.atom_id.startswith("q")), reverse=True)
    return items[:limit]


# ---------------------------------------------------------------------------------------------
# Refreshing views off the request path


class GaveWay(Exception):
    """A request arrived while a background refresh ran: the refresh rolls back to let it be."""


@contextmanager
def _giving_way(session: Session, activity: RequestActivity | None) -> Iterator[None]:
    """Inside the block, a request that starts makes the refresh give way (GaveWay): its
    running statement is cancelled, and each later statement checks first. A ranked refresh
    took 50-650 ms at 100k offers (one grouping scan alone up to half a second of a core), and
    the page that arrived meanwhile 5-10x its time. A connection a cancel was sent to is
    dropped, not pooled: the cancel may land after the statement it was meant for."""
    if activity is None:
        yield
        return
    mark = activity.requests_started()
    gave = threading.Event()
    done = threading.Event()

    def check(*_: Any) -> None:
        if activity.requests_started() != mark:
            gave.set()
            raise GaveWay

    connection = session.connection()
    raw = connection.connection.dbapi_connection

    def watch() -> None:
        if activity.wait_started_since(mark, done):
            gave.set()
            _cancel_statement(raw)

    watcher = threading.Thread(target=watch, name="saved-refresh-watch", daemon=True)
    event.listen(connection, "before_cursor_execute", check)
    watcher.start()
    try:
        yield
        if gave.is_set():
            raise GaveWay  # a cancel raced the end of the refresh: roll back all the same
    except DBAPIError as exc:
        if gave.is_set():  # the statement the watcher cancelled
            raise GaveWay from exc
        raise
    finally:
        done.set()
        watcher.join()
        event.remove(connection, "before_cursor_execute", check)
        if gave.is_set() and not connection.invalidated:
            connection.invalidate()


def _cancel_statement(raw: Any) -> None:
    """Cancel what a DBAPI connection is running, from another thread (psycopg: a cancel
    request to the server; sqlite3: interrupt)."""
    try:
        if hasattr(raw, "cancel_safe"):
            raw.cancel_safe(timeout=2.0)
        elif hasattr(raw, "interrupt"):
            raw.interrupt()
    except Exception:  # noqa: BLE001 - the statement runs to its end; the next one checks
        log.warning("could not cancel a background refresh's statement", exc_info=True)


class SavedQueryRefresher:
    """Brings stale views up to date in one background thread, each key queued at most once.

    The /saved page refreshes what fits its time budget itself and hands the rest here; the
    next view of the page shows them current. With `activity`, each view waits for a quiet
    moment in this process's requests (at most REFRESH_MAX_DEFER_S) before it is refreshed.
    """

    def __init__(
        self, session_factory: sessionmaker[Session], activity: RequestActivity | None = None
    ) -> None:
        self._sessions = session_factory
        self._activity = activity
        self._queue: queue.Queue[str] = queue.Queue()
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.gave_way = 0  # refreshes rolled back for a request (tests, the bench)

    def submit(self, keys: Iterable[str]) -> None:
        """Queue these views (those already queued are not queued twice)."""
        with self._lock:
            fresh = [k for k in keys if k not in self._pending]
            if not fresh or self._stop.is_set():
                return
            self._pending.update(fresh)
            for key in fresh:
                self._queue.put(key)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="saved-query-refresher", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                key = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                self._refresh(key)
            except Exception:  # noqa: BLE001 - logged; the next view queues it again
                log.exception("saved-query refresh failed", extra={"key": key})
            finally:
                with self._lock:
                    self._pending.discard(key)
                    if not self._pending:
                        self._idle.notify_all()
            # A breath between views: requests share this process's interpreter lock.
            self._stop.wait(REFRESH_PAUSE_S)

    def _refresh(self, key: str) -> None:
        """Refresh one view in a quiet moment; while it may still wait (REFRESH_MAX_DEFER_S
        from its first try), a request arriving mid-refresh rolls it back to try again later."""
        activity = self._activity
        if activity is None:
            with self._sessions.begin() as session:
                refresh_saved_query(session, key=key)
            return
        deadline = time.monotonic() + REFRESH_MAX_DEFER_S
        while not self._stop.is_set():
            left = max(0.0, deadline - time.monotonic())
            activity.wait_quiet(REFRESH_QUIET_S, left, self._stop)
            may_yield = time.monotonic() < deadline
            try:
                with self._sessions.begin() as session:
                    with _giving_way(session, activity if may_yield else None):
                        refresh_saved_query(session, key=key)
                return
            except GaveWay:
                self.gave_way += 1  # rolled back; what it cached for the data version stays

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until nothing is queued (tests, shutdown); False on timeout."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._pending, timeout=timeout)

    def stop(self) -> None:
        """Take no more views; the thread ends after the one it is refreshing (see join)."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end after stop(); False if it is still running."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout=timeout)
            if thread.is_alive():
                log.warning("saved-query refresher still running at shutdown")
                return False
        return True


__all__ = [
    "OWNER_COOKIE",
    "BestMatch",
    "FeedItem",
    "Position",
    "SavedQueryRefresher",
    "SavedSearchError",
    "SavedSearchLimitReached",
    "create_saved_search",
    "csrf_ok",
    "csrf_token",
    "current_match",
    "delete_saved_search",
    "feed_entries",
    "is_current",
    "new_token",
    "owned_search",
    "owned_searches",
    "position",
    "query_key",
    "refresh_saved_query",
    "rename_saved_search",
    "saved_states",
]
