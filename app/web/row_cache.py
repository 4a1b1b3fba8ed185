"""Rendered offer rows, reused while everything they show stays the same.

A ranked page of 1,000 rows spent ~70 ms of Jinja on its rows alone (some forty escaped values
a row). The row is a macro in its own template (templates/_offer_row.html), imported without the
page's context, so its HTML is a function of its arguments: a row whose arguments equal an
earlier row's reuses that row's HTML, across requests and data versions. An ingest re-renders
only the rows it changed (a re-seen offer's last-seen time is one of the arguments), and a row's
"5 min ago" text is an argument too, computed per request.

The fit is compared by identity (OfferFit holds dicts, so it has no hash): the fit cache hands
out one object per job and facts (app.queries.assess), and each entry keeps its fit alive, so an
id can never be reused by another fit while the entry stands.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from markupsafe import Markup

from app.fit import OfferFit
from app.queries import RankedOffer
from app.queries.listings import Listing
from app.store.models import utcnow
from app.web.templating import ago, templates

ROW_TEMPLATE = "_offer_row.html"


class RowKey:
    """A row's arguments, hashed once (an offer has some forty fields)."""

    __slots__ = ("_hash", "parts")

    def __init__(self, parts: tuple[Hashable, ...]) -> None:
        self.parts = parts
        self._hash = hash(parts)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RowKey) and self._hash == other._hash and self.parts == other.parts


class RowCache:
    """Row HTML by the row macro's arguments, the `max_rows` most recently rendered (0: none).

    Oldest rendered goes first, not least recently used: a hit is then one lookup, where moving
    the row to the end compared its forty fields again (a fifth of a 1,000-row page's time)."""

    def __init__(self, max_rows: int) -> None:
        self._max = max_rows
        self._rows: dict[RowKey, tuple[OfferFit | None, Markup]] = {}
        self._lock = threading.Lock()

    def html(self, key: RowKey, fit: OfferFit | None, render: Callable[[], Markup]) -> Markup:
        """The HTML kept for `key` and this very `fit`, else `render()` (then kept)."""
        if self._max <= 0:
            return render()
        kept = self._rows.get(key)  # one lookup: atomic under the interpreter lock
        if kept is not None and kept[0] is fit:
            return kept[1]
        html = render()  # two threads may render one row, equally
        with self._lock:
            self._rows.pop(key, None)
            self._rows[key] = (fit, html)
            while len(self._rows) > self._max:
                del self._rows[next(iter(self._rows))]
        return html

    def __len__(self) -> int:
        return len(self._rows)


def offer_row_renderer(
    cache: RowCache,
    *,
    ranked: bool,
    headroom_pct: float | None,
    link_query: str,
    listings: Mapping[int, Listing],
) -> Callable[[RankedOffer], Markup]:
    """What the table calls for each row: the row macro's HTML, through `cache`."""
    macro: Any = templates.env.get_template(ROW_TEMPLATE).module.offer_row  # type: ignore[attr-defined]
    now = utcnow()

    def row(item: RankedOffer) -> Markup:
        offer, fit = item.row, item.fit
        listing = listings.get(offer.id)
        # A listing sold in one region shows as an ungrouped row (the macro lists regions only
        # past one), so it is keyed as one: the offer is not hashed twice.
        regions = listing.offers if listing is not None and len(listing.offers) > 1 else ()
        seen = ago(offer.last_seen, now)
        args = (offer, regions, fit, ranked, headroom_pct, link_query, seen)
        key = RowKey((offer, regions, id(fit), ranked, headroom_pct, link_query, seen))
        return cache.html(key, fit, lambda: Markup(macro(*args)))

    return row
