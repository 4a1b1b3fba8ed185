"""Offers of one view among a stretch of the change log (app.store.models.OfferChange).

Saved-search feeds read the change log a scrape wrote once, instead of re-running every search
after every scrape: only the offers that changed are filtered, per distinct saved view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.orm import Session

from app.fit import Workload, rank_key
from app.queries.assess import (
    Assessor,
    candidate_clause,
    listing_bands,
    offer_facts,
    vram_bounds,
)
from app.queries.filters import order_by, where_clauses
from app.queries.params import OfferFilters, job_terms
from app.queries.rows import RankedOffer, fetch_rows, row_select
from app.store.models import Offer, OfferChange

# What "new" and "available again" mean in the change log.
NEW_KINDS = ("new",)
IN_STOCK = ("in_stock", "limited")


def last_change_id(session: Session) -> int:
    """The newest change-log id (0 when the log is empty)."""
    return int(session.scalar(select(func.max(OfferChange.id))) or 0)


def _new_clause() -> ColumnElement[bool]:
    return OfferChange.kind.in_(NEW_KINDS)


def _available_clause() -> ColumnElement[bool]:
    """Listed again, or back in stock after being out of it."""
    return or_(
        OfferChange.kind == "back",
        and_(
            OfferChange.availability_before == "out",
            OfferChange.availability_after.in_(IN_STOCK),
        ),
    )


@dataclass(frozen=True)
class ChangedMatches:
    """How many offers of a view changed that way, and the best few of them."""

    count: int
    best: list[RankedOffer]


def changed_matches(
    session: Session,
    *,
    filters: OfferFilters,
    workload: Workload | None,
    after: int,
    upto: int,
    kind: str,
    top: int = 10,
) -> ChangedMatches:
    """Offers matching the view (fitting ones, with a workload) whose change-log entries in
    (after, upto] are of `kind`: "new" (first listed) or "available" (listed or stocked again).

    Without a workload the count and the best `top` come from SQL; with one, the changed
    candidates (enough VRAM by the fit prefilter) are assessed and the fitting ones kept.
    """
    if upto <= after:
        return ChangedMatches(0, [])
    which = _new_clause() if kind == "new" else _available_clause()
    changed = select(OfferChange.offer_id).where(
        OfferChange.id > after, OfferChange.id <= upto, which
    )
    clauses: Sequence[ColumnElement[bool]] = [*where_clauses(filters), Offer.id.in_(changed)]
    if workload is None:
        count = int(session.scalar(select(func.count()).select_from(Offer).where(*clauses)) or 0)
        if not count:
            return ChangedMatches(0, [])
        stmt = row_select().where(*clauses).order_by(*order_by("price_per_gpu", filters))
        return ChangedMatches(count, [RankedOffer(r) for r in fetch_rows(session, stmt.limit(top))])
    assess = Assessor(workload, job_terms(filters))
    bounds = vram_bounds(workload, assess.estimate)
    bands = listing_bands(session)
    rows = fetch_rows(session, row_select().where(*clauses, candidate_clause(bounds)))
    fitting = [RankedOffer(r, fit) for r in rows if (fit := assess(offer_facts(r, bands))).fits]
    # The ranked table's order (margin before tight, then expected cost).
    fitting.sort(key=lambda item: (rank_key(item.fit) if item.fit else (), item.row.id))
    return ChangedMatches(len(fitting), fitting[:top])
