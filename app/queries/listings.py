"""Group repeats: one listing sold in many regions becomes one row with its regions.

A listing is what a user would rent: the same provider, instance type, market (spot or not),
GPU model and count. Grouping is a step over a page of offers (the page, its order, total and
pagination are unchanged): the rows of one listing on the page collapse into its first row,
which carries every region where the listing matches the filters, cheapest first. A listing
whose offers fall on two pages shows on both, each time with all its regions.

Not applied when the user filters by region or continent: then the region is the point.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select, true, tuple_
from sqlalchemy.orm import Session

from app.queries.filters import where_clauses
from app.queries.params import OfferFilters
from app.queries.rows import OfferRow, RankedOffer, fetch_rows, id_in, row_select
from app.queries.sql_types import STRING, unnest_rows
from app.store.models import Offer

GROUP_LISTING = "listing"
MAX_REGIONS = 200  # per listing; no provider sells one instance type in more

ListingKey = tuple[str, str, bool, str, float]


def listing_key(row: OfferRow) -> ListingKey:
    return (row.provider, row.instance_type, row.spot, row.gpu_model, row.gpu_count)


def grouping_applies(filters: OfferFilters) -> bool:
    """Group unless the user picked regions or continents (then every region is its own row)."""
    return not filters.region and not filters.continent


def _price(row: OfferRow) -> float:
    price = row.price_per_hour if row.price_per_hour is not None else row.spot_price_per_hour
    return float("inf") if price is None else price


@dataclass(frozen=True)
class Listing:
    """One row of a grouped page: its first offer on the page and all its matching offers."""

    item: RankedOffer  # the page's first offer of this listing: its position and its fit
    offers: tuple[OfferRow, ...]  # every offer of the listing matching the filters, cheapest first

    @property
    def regions(self) -> list[str]:
        return [row.region for row in self.offers]


def group_offers(
    session: Session, items: Sequence[RankedOffer], filters: OfferFilters
) -> list[Listing]:
    """The page's offers grouped by listing, in page order (one extra indexed query)."""
    order: list[ListingKey] = []
    first: dict[ListingKey, RankedOffer] = {}
    for item in items:
        key = listing_key(item.row)
        if key not in first:
            first[key] = item
            order.append(key)
    if not order:
        return []
    pairs = sorted({(key[0], key[1]) for key in order})
    if session.get_bind().dialect.name == "postgresql":
        # The page's (provider, instance type) pairs as two zipped arrays, each probing the
        # offers' key index through a lateral subquery. A plain join of the arrays was planned
        # as a hash join over a scan of every active offer whenever the planner misjudged the
        # pairs (85 ms of a 1,000-row ranked page at 100k offers); two IN lists matched their
        # cross product. Ids first, rows after: joined to providers too, the planner looped.
        keys = unnest_rows(
            "listing",
            [
                ("provider_id", STRING, [p for p, _ in pairs]),
                ("instance_type", STRING, [t for _, t in pairs]),
            ],
        ).subquery("listing_keys")
        matching = (
            select(Offer.id)
            .where(
                *where_clauses(filters),
                Offer.provider_id == keys.c.provider_id,
                Offer.instance_type == keys.c.instance_type,
            )
            .offset(0)  # a fence: flattened, the subquery would be planned as that hash join
            .lateral("siblings")
        )
        ids = select(matching.c.id).select_from(keys).join(matching, true())
    else:
        ids = select(Offer.id).where(
            *where_clauses(filters), tuple_(Offer.provider_id, Offer.instance_type).in_(pairs)
        )
    # The page's own rows are among the matches: only the other regions' rows are fetched.
    known = {item.row.id: item.row for item in items}
    matched = list(session.scalars(ids))
    missing = [i for i in matched if i not in known]
    fetched = fetch_rows(session, row_select().where(id_in(session, missing))) if missing else []
    siblings: dict[ListingKey, list[OfferRow]] = {key: [] for key in order}
    for row in itertools.chain((known[i] for i in matched if i in known), fetched):
        group = siblings.get(listing_key(row))
        if group is not None:
            group.append(row)
    out = []
    for key in order:
        item = first[key]
        rows = siblings[key] or [item.row]  # the row itself always matches its own filters
        rows.sort(key=lambda r: (_price(r), r.region, r.id))
        out.append(Listing(item=item, offers=tuple(rows[:MAX_REGIONS])))
    return out


def region_dict(row: OfferRow) -> dict[str, object]:
    """One region of a listing in JSON: where, how much, whether it can be had, its page."""
    return {
        "id": row.id,
        "region": row.region,
        "continent": row.continent,
        "price_per_hour": row.price_per_hour,
        "spot_price_per_hour": row.spot_price_per_hour,
        "availability": row.availability,
        "availability_count": row.availability_count,
        "last_seen": row.last_seen.isoformat(),
        "url": f"/offers/{row.id}",
    }
