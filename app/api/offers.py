"""GET /api/offers (JSON) and GET /offers.csv: the table of `/` in other formats, same query."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from app.core.deps import SessionDep
from app.fit.query import WorkloadQuery
from app.fit.serialize import estimate_dict
from app.queries import OfferFilters, offer_dict, search_offers, to_csv
from app.web.urls import alternate_links
from app.web.warm import note_request

router = APIRouter()

FiltersDep = Annotated[OfferFilters, Query()]


@router.get("/api/offers", tags=["offers"])
def list_offers(
    request: Request, session: SessionDep, filters: FiltersDep, workload: WorkloadQuery
) -> Response:
    """Offers matching the filters; with workload params, ranked by fit (fitting ones first)."""
    page = search_offers(session, filters=filters, workload=workload)
    note_request(request)
    body: dict[str, Any] = {
        "total": page.total,
        "limit": page.limit,
        "offset": page.offset,
        "sort": page.sort,
        "caption": page.caption,
        "offers": [offer_dict(item) for item in page.offers],
        # The next page by keyset (`after=`), when the sort has one and more rows follow.
        "next_after": page.next_after,
    }
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
