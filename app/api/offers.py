"""GET /api/offers (JSON) and GET /offers.csv: the table of `/` in other formats, same query."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from app.core.deps import SessionDep
from app.fit.query import WorkloadQuery
from app.fit.serialize import estimate_dict
from app.queries import OfferFilters, offer_dict, search_offers, to_csv
from app.queries.listings import GROUP_LISTING, group_offers, grouping_applies, region_dict
from app.web.urls import alternate_links

router = APIRouter()

FiltersDep = Annotated[OfferFilters, Query()]
GroupParam = Annotated[
    Literal["listing", "offer"] | None,
    Query(
        description="listing: one entry per listing with its regions (not with a region "
        "filter); offer (the default): one row per offer"
    ),
]


@router.get("/api/offers", tags=["offers"])
def list_offers(
    request: Request,
    session: SessionDep,
    filters: FiltersDep,
    workload: WorkloadQuery,
    group: GroupParam = None,
) -> Response:
    """Offers matching the filters; with workload params, ranked by fit (fitting ones first).

    With group=listing, the page's offers of one listing (provider, instance type, market, GPU
    and count) become one entry with `regions`, cheapest first; total and paging stay per offer.
    """
    page = search_offers(session, filters=filters, workload=workload)
    grouped = group == GROUP_LISTING and grouping_applies(filters)
    if grouped:
        offers = [
            {
                **offer_dict(listing.item),
                "region_count": len(listing.offers),
                "regions": [region_dict(row) for row in listing.offers],
            }
            for listing in group_offers(session, page.offers, filters)
        ]
    else:
        offers = [offer_dict(item) for item in page.offers]
    body: dict[str, Any] = {
        "total": page.total,
        "limit": page.limit,
        "offset": page.offset,
        "sort": page.sort,
        "caption": page.caption,
        "offers": offers,
    }
    if group == GROUP_LISTING:
        body["group"] = GROUP_LISTING if grouped else None  # None: a region filter is set
    if page.estimate is not None:
        body["workload"] = estimate_dict(page.estimate)
        body["fitting"] = page.fitting
    return JSONResponse(body, headers=alternate_links(request))


@router.get("/offers.csv", tags=["offers"])
def offers_csv(
    request: Request, session: SessionDep, filters: FiltersDep, workload: WorkloadQuery
) -> Response:
    """The same rows as /api/offers as CSV (one page: use limit/offset, up to 1000 rows)."""
    page = search_offers(session, filters=filters, workload=workload)
    return Response(
        to_csv(page.offers, with_fit=workload is not None),
        media_type="text/csv; charset=utf-8",
        headers={
            "content-disposition": 'inline; filename="offers.csv"',
            **alternate_links(request),
        },
    )
