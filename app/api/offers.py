"""GET /api/offers (JSON) and GET /offers.csv: the table of `/` in other formats, same query;
GET /export/offers.csv and .jsonl: every row of the view, streamed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from sqlalchemy.orm import Session

from app.core.deps import SessionDep, SettingsDep
from app.core.settings import Settings
from app.fit import Workload
from app.fit.query import WorkloadQuery
from app.fit.serialize import estimate_dict
from app.queries import (
    OfferFilters,
    export_lines,
    link_args,
    offer_dict,
    page_assumptions,
    search_offers,
    to_csv,
)
from app.queries.listings import GROUP_LISTING, group_offers, grouping_applies, region_dict
from app.store.models import utcnow
from app.web.page_cache import Page, PageCache
from app.web.urls import alternate_links
from app.web.warm import note_request

router = APIRouter()

FiltersDep = Annotated[OfferFilters, Query()]
GroupParam = Annotated[
    Literal["listing", "offer"] | None,
    Query(
        description="listing: one entry per listing with its regions (not with a region "
        "filter); offer (the default): one row per offer"
    ),
]


def _link_query(request: Request) -> str:
    return urlencode(link_args(request.query_params.multi_items()))


@router.get("/api/offers", tags=["offers"])
def list_offers(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    filters: FiltersDep,
    workload: WorkloadQuery,
    group: GroupParam = None,
) -> Response:
    """Offers matching the filters; with workload params, ranked as plans (fitting ones first).

    With group=listing, the page's offers of one listing (provider, instance type, market, GPU
    and count) become one entry with `regions`, cheapest first; total and paging stay per offer.
    """

    def build() -> Page:
        body = _offers_json(request, session, filters, workload, group)
        return Page(body, "application/json", tuple(alternate_links(request).items()))

    cache: PageCache = request.app.state.page_cache
    stored = cache.fetch(request, session, settings, build)
    note_request(request)
    return Response(stored.body, media_type=stored.media_type, headers=dict(stored.headers))


def _offers_json(
    request: Request,
    session: Session,
    filters: OfferFilters,
    workload: Workload | None,
    group: str | None,
) -> bytes:
    """The body of /api/offers."""
    page = search_offers(session, filters=filters, workload=workload)
    link = _link_query(request) if workload is not None else ""
    grouped = group == GROUP_LISTING and grouping_applies(filters)
    if grouped:
        offers = [
            {
                **offer_dict(listing.item, link),
                "region_count": len(listing.offers),
                "regions": [region_dict(row) for row in listing.offers],
            }
            for listing in group_offers(session, page.offers, filters)
        ]
    else:
        offers = [offer_dict(item, link) for item in page.offers]
    body: dict[str, Any] = {
        "total": page.total,
        "limit": page.limit,
        "offset": page.offset,
        "sort": page.sort,
        "caption": page.caption,
        "offers": offers,
        # The next page by keyset (`after=`), when the sort has one and more rows follow.
        "next_after": page.next_after,
    }
    if group == GROUP_LISTING:
        body["group"] = GROUP_LISTING if grouped else None  # None: a region filter is set
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
    return bytes(JSONResponse(body).body)


@router.get("/export/offers.csv", tags=["offers"])
def export_csv(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    filters: FiltersDep,
    workload: WorkloadQuery,
) -> Response:
    """Every row of the view (no page) as CSV, streamed; columns as /offers.csv."""
    return _export(request, session, settings, filters, workload, fmt="csv")


@router.get("/export/offers.jsonl", tags=["offers"])
def export_jsonl(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    filters: FiltersDep,
    workload: WorkloadQuery,
) -> Response:
    """Every row of the view (no page) as JSON Lines, streamed; objects as /api/offers'."""
    return _export(request, session, settings, filters, workload, fmt="jsonl")


EXPORT_CHUNK_BYTES = 1 << 20
_MEDIA = {"csv": "text/csv; charset=utf-8", "jsonl": "application/jsonl; charset=utf-8"}


def _export(
    request: Request,
    session: Session,
    settings: Settings,
    filters: OfferFilters,
    workload: Workload | None,
    *,
    fmt: str,
) -> Response:
    """Stream the whole view; a view longer than the export row limit is refused up front."""
    whole = filters.model_copy(update={"limit": 1, "offset": 0, "after": None})
    total = search_offers(session, filters=whole, workload=workload).total
    if total > settings.export_max_rows:
        raise HTTPException(
            422,
            f"this view has {total:,} offers, more than the {settings.export_max_rows:,} an "
            "export may hold (GPUFIT_EXPORT_MAX_ROWS); narrow the filters",
        )
    factory = request.app.state.session_factory
    link = _link_query(request) if workload is not None else ""

    def body() -> Iterator[bytes]:
        # Its own session: the request's closes before a streamed body is sent. Batches are
        # joined into ~1 MB chunks: each chunk costs a thread hop, which 100 small ones make
        # a third of a 90k-row export.
        with factory() as own:
            chunk: list[bytes] = []
            size = 0
            for text in export_lines(
                own,
                filters=whole,
                workload=workload,
                max_rows=settings.export_max_rows,
                fmt=fmt,
                link_query=link,
            ):
                chunk.append(text.encode())
                size += len(chunk[-1])
                if size >= EXPORT_CHUNK_BYTES:
                    yield b"".join(chunk)
                    chunk, size = [], 0
            if chunk:
                yield b"".join(chunk)

    stamp = utcnow().strftime("%Y%m%d-%H%M")
    return StreamingResponse(
        body(),
        media_type=_MEDIA[fmt],
        headers={
            "content-disposition": f'attachment; filename="gpufit-offers-{stamp}.{fmt}"',
            "x-total-count": str(total),
        },
    )


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
