"""GET /api/offers (JSON) and GET /offers.csv: the table of `/` in other formats, same query."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from app.core.deps import SessionDep
from app.fit.query import WorkloadQuery
from app.fit.serialize import estimate_dict
from app.queries import (
    OfferFilters,
    link_args,
    offer_dict,
    page_assumptions,
    search_offers,
    to_csv,
)
from app.web.urls import alternate_links

router = APIRouter()

FiltersDep = Annotated[OfferFilters, Query()]


def _link_query(request: Request) -> str:
    return urlencode(link_args(request.query_params.multi_items()))


@router.get("/api/offers", tags=["offers"])
def list_offers(
    request: Request, session: SessionDep, filters: FiltersDep, workload: WorkloadQuery
) -> Response:
    """Offers matching the filters; with workload params, ranked as plans (fitting ones first)."""
    page = search_offers(session, filters=filters, workload=workload)
    link = _link_query(request) if workload is not None else ""
    body: dict[str, Any] = {
        "total": page.total,
        "limit": page.limit,
        "offset": page.offset,
        "sort": page.sort,
        "caption": page.caption,
        "offers": [offer_dict(item, link) for item in page.offers],
    }
    if page.estimate is not None and workload is not None and page.terms is not None:
        body["workload"] = estimate_dict(page.estimate)
        body["fitting"] = page.fitting
        body["tight"] = page.tight
        body["terms"] = {
            "market": page.terms.market,
            "min_headroom_pct": page.terms.min_headroom_pct,
            "setup_minutes": page.terms.setup_minutes,
            "checkpoint_minutes": page.terms.checkpoint_interval,
            "max_hours": filters.max_hours,
            "max_cost": filters.max_cost,
        }
        body["assumptions"] = [
            {"topic": topic, "text": text} for topic, text in page_assumptions(page, workload)
        ]
        body["suggestions"] = [s.as_dict() for s in page.suggestions]
    return JSONResponse(body, headers=alternate_links(request))


@router.get("/offers.csv", tags=["offers"])
def offers_csv(
    request: Request, session: SessionDep, filters: FiltersDep, workload: WorkloadQuery
) -> Response:
    """The same rows as /api/offers as CSV (one page: use limit/offset, up to 1000 rows)."""
    page = search_offers(session, filters=filters, workload=workload)
    link = _link_query(request) if workload is not None else ""
    return Response(
        to_csv(page.offers, with_fit=workload is not None, link_query=link),
        media_type="text/csv; charset=utf-8",
        headers={
            "content-disposition": 'inline; filename="offers.csv"',
            **alternate_links(request),
        },
    )
