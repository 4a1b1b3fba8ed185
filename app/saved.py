"""Saved searches: owned by a browser's unguessable cookie token, shared by their own token.

A saved search is a name plus the canonical query string of `/`. Its Atom feed gains an entry
when offers matching it appear (first seen after the last check) or its best price drops;
`refresh_saved_searches(session)` records those entries and is meant to run after each ingest
(the pages call it for the searches they show, too).

CSRF: the form token is an HMAC-free derivation of the owner token (SHA-256 of a label and the
token). The owner token lives only in an HttpOnly cookie, so another site can neither read it nor
compute the form token; with SameSite=Lax the cookie is not even sent on cross-site POSTs.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import parse_qsl, urlencode

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from sqlalchemy import delete, func, select, text
from sqlalchemy.orm import Session

from app.fit import Workload
from app.queries import (
    OfferFilters,
    OfferPage,
    RankedOffer,
    filters_from_args,
    search_offers,
    workload_from_args,
)
from app.store.models import Offer, SavedSearch, SavedSearchEntry, SavedSearchState, utcnow

OWNER_COOKIE = "gpufit_owner"
MAX_NAME = 200
MAX_QUERY = 4000
# Keys that only change which page is shown; a saved search is the view, not the page.
_PAGE_KEYS = frozenset({"offset", "limit"})
_PRICE_EPSILON = 1e-9
_NEW_OFFERS_LISTED = 10


def new_token() -> str:
    """An unguessable token (256 bits of randomness)."""
    return secrets.token_urlsafe(32)


def csrf_token(owner_token: str) -> str:
    """The form token for a browser; see the module docs for why this is sound."""
    return hashlib.sha256(b"gpufit-csrf:" + owner_token.encode()).hexdigest()


def csrf_ok(owner_token: str | None, submitted: str | None) -> bool:
    """Whether a submitted form token belongs to this browser (constant-time compare)."""
    if not owner_token or not submitted:
        return False
    return hmac.compare_digest(csrf_token(owner_token), submitted)


class SavedSearchError(ValueError):
    """A save/rename request that cannot be honoured; `field` names the bad form field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def canonical_query(query: str) -> str:
    """The query string without blanks and page keys, with a leading '?' removed."""
    pairs = parse_qsl(query.lstrip("?"), keep_blank_values=False)
    return urlencode([(k, v) for k, v in pairs if k not in _PAGE_KEYS and v.strip()])


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
    search = SavedSearch(
        share_token=new_token(),
        owner_token=owner_token,
        name=_clean_name(name),
        query=canonical,
        created_at=now,
        updated_at=now,
    )
    session.add(search)
    session.flush()
    refresh_saved_search(session, search=search, now=now)
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
    """Delete an (owned) search with its feed; caller commits."""
    # Explicit deletes: SQLite honours ON DELETE CASCADE only with foreign keys enabled.
    session.execute(delete(SavedSearchEntry).where(SavedSearchEntry.saved_search_id == search.id))
    session.execute(delete(SavedSearchState).where(SavedSearchState.saved_search_id == search.id))
    session.delete(search)


# ---------------------------------------------------------------------------------------------
# Current best match and the feed


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


def _describe(item: RankedOffer) -> str:
    row = item.row
    where = f"{row.provider_name} {row.instance_type} ({row.region})"
    return f"{where}: {row.gpu_count:g}× {row.gpu_name}"


def _new_matches(session: Session, parsed: ParsedQuery, since: datetime) -> list[RankedOffer]:
    """Matching offers first seen after `since` (fitting ones, with a workload)."""
    filters = parsed.filters.model_copy(
        update={
            "limit": 1000,
            "offset": 0,
            "sort": "cost" if parsed.workload is not None else "price_per_gpu",
            "fits_only": parsed.workload is not None or parsed.filters.fits_only,
        }
    )
    page = search_offers(session, filters=filters, workload=parsed.workload)
    return [item for item in page.offers if item.row.first_seen > since]


def refresh_saved_search(
    session: Session, *, search: SavedSearch, now: datetime | None = None
) -> int:
    """Record feed entries for one search since its last check; returns how many were added."""
    now = now or utcnow()
    try:
        parsed = parse_query(search.query)
    except SavedSearchError:
        return 0  # a query made invalid by a later schema change: nothing to report
    state = session.get(SavedSearchState, search.id)
    match = current_match(session, query=search.query)
    entries: list[SavedSearchEntry] = []
    if state is None:
        best = match.best
        summary = f"{match.count} offers match."
        if best is not None and match.price is not None:
            summary += f" Best: {_describe(best)} at ${match.price:,.2f} {match.price_label}."
        entries.append(
            SavedSearchEntry(
                saved_search_id=search.id,
                created_at=now,
                kind="created",
                title=f"Saved search “{search.name}”",
                summary=summary,
                offer_id=best.row.id if best else None,
            )
        )
        state = SavedSearchState(saved_search_id=search.id)
        session.add(state)
    else:
        fresh = _new_matches(session, parsed, state.checked_at)
        if fresh:
            lines = [_describe(item) for item in fresh[:_NEW_OFFERS_LISTED]]
            more = len(fresh) - len(lines)
            entries.append(
                SavedSearchEntry(
                    saved_search_id=search.id,
                    created_at=now,
                    kind="new_offers",
                    title=f"{len(fresh)} new offer(s) match “{search.name}”",
                    summary="\n".join(lines) + (f"\n… and {more} more" if more > 0 else ""),
                    offer_id=fresh[0].row.id,
                )
            )
        old = state.best_price
        if (
            match.price is not None
            and old is not None
            and match.price < old - _PRICE_EPSILON
            and match.best is not None
        ):
            entries.append(
                SavedSearchEntry(
                    saved_search_id=search.id,
                    created_at=now,
                    kind="price_drop",
                    title=f"Best price for “{search.name}” dropped to ${match.price:,.2f}",
                    summary=(
                        f"{_describe(match.best)}: ${match.price:,.2f} {match.price_label}, "
                        f"was ${old:,.2f}."
                    ),
                    offer_id=match.best.row.id,
                )
            )
    state.checked_at = now
    state.best_price = match.price
    state.best_offer_id = match.best.row.id if match.best else None
    state.match_count = match.count
    session.add_all(entries)
    session.flush()
    return len(entries)


def refresh_saved_searches(session: Session, *, now: datetime | None = None) -> int:
    """Record feed entries for every saved search (call after each ingest); caller commits."""
    if session.scalar(select(Offer.id).limit(1)) is None:
        return 0
    added = 0
    for search in session.scalars(select(SavedSearch).order_by(SavedSearch.id)).all():
        added += refresh_saved_search(session, search=search, now=now)
    return added


def feed_entries(
    session: Session, *, search: SavedSearch, limit: int = 50
) -> list[SavedSearchEntry]:
    """The newest entries of a search's feed."""
    stmt = (
        select(SavedSearchEntry)
        .where(SavedSearchEntry.saved_search_id == search.id)
        .order_by(SavedSearchEntry.created_at.desc(), SavedSearchEntry.id.desc())
        .limit(limit)
    )
    return list(session.scalars(stmt))


__all__ = [
    "OWNER_COOKIE",
    "BestMatch",
    "SavedSearchError",
    "SavedSearchLimitReached",
    "create_saved_search",
    "csrf_ok",
    "csrf_token",
    "current_match",
    "delete_saved_search",
    "feed_entries",
    "new_token",
    "owned_search",
    "owned_searches",
    "refresh_saved_search",
    "refresh_saved_searches",
    "rename_saved_search",
]
