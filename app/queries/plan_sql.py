"""The plan-ranking facts of an offer in SQL, each the twin of a Python function in app.fit.

Constants are rendered inline (not bound): the same expression then appears identically in a
SELECT and its GROUP BY, which Postgres requires, and statements cache as one. The expressions
are immutable, so each is built once per process.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, case, func, literal_column, null

from app.fit.market import known_profiles
from app.fit.plans import LISTING_STEPS
from app.store.models import Offer, SpotAdvisorRow

NO_BAND = ""
NO_LISTINGS = -1
_SAFE_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


def _text(value: str) -> Any:
    if not _SAFE_ID.match(value):  # provider ids come from our data file; refuse anything odd
        raise ValueError(f"not a provider id: {value!r}")
    return literal_column(f"'{value}'")


@cache
def profile_sql() -> ColumnElement[str]:
    """app.fit.market.market_profile: the provider id if the market data knows it, else ''."""
    known = known_profiles()
    expr: ColumnElement[str] = case(
        (Offer.provider_id.in_([_text(p) for p in known]), Offer.provider_id),
        else_=literal_column("''"),
    )
    return expr


@cache
def listing_step_sql() -> ColumnElement[int]:
    """app.fit.plans.listing_step: available listings rounded down to a plan size, -1 unknown."""
    whens: list[tuple[Any, Any]] = [
        (Offer.availability_count.is_(None), literal_column(str(NO_LISTINGS)))
    ]
    for step in LISTING_STEPS[:-1]:
        whens.append(
            (
                Offer.availability_count >= literal_column(str(step)) * Offer.gpu_count,
                literal_column(str(step)),
            )
        )
    expr: ColumnElement[int] = case(*whens, else_=literal_column("1"))
    return expr


@cache
def on_demand_price_sql() -> ColumnElement[float]:
    """app.fit.plans.listing_prices' on-demand price: none for a spot-only listing."""
    expr: ColumnElement[float] = case((Offer.spot.is_(True), null()), else_=Offer.price_per_hour)
    return expr


@cache
def spot_price_sql() -> ColumnElement[float]:
    """app.fit.plans.listing_prices' spot price: a spot-only listing's price is its spot price."""
    expr: ColumnElement[float] = case(
        (Offer.spot.is_(True), func.coalesce(Offer.spot_price_per_hour, Offer.price_per_hour)),
        else_=Offer.spot_price_per_hour,
    )
    return expr


@cache
def band_sql(with_advisor: bool) -> ColumnElement[str]:
    """The listing's advisor band ('' without one); needs `join_advisor` when `with_advisor`."""
    if not with_advisor:
        return literal_column(f"'{NO_BAND}'")
    return func.coalesce(SpotAdvisorRow.band_label, literal_column(f"'{NO_BAND}'"))


def join_advisor(stmt: Select[Any], with_advisor: bool) -> Select[Any]:
    """`stmt` left-joined to the listing's Linux spot advisor row (assess.listing_bands)."""
    if not with_advisor:
        return stmt
    return stmt.outerjoin(
        SpotAdvisorRow,
        and_(
            SpotAdvisorRow.provider_id == Offer.provider_id,
            SpotAdvisorRow.region == Offer.region,
            SpotAdvisorRow.instance_type == Offer.instance_type,
            SpotAdvisorRow.os == literal_column("'Linux'"),
        ),
    )
