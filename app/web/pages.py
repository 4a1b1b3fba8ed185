"""HTML pages and their JSON/CSV twins: thin routes over app.queries, app.saved, app.web.views."""

from __future__ import annotations

import csv
import io
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from app.core.deps import SessionDep, SettingsDep
from app.fit.serialize import fit_dict
from app.pipeline.freshness import provider_statuses
from app.queries import (
    OfferFilters,
    OfferRow,
    RankedOffer,
    assess_row,
    get_offer,
    get_offers,
    job_terms,
    link_args,
    offer_dict,
    price_history,
    to_csv,
)
from app.saved import (
    OWNER_COOKIE,
    SavedQueryRefresher,
    SavedSearchError,
    SavedSearchLimitReached,
    create_saved_search,
    csrf_ok,
    csrf_token,
    delete_saved_search,
    feed_entries,
    is_current,
    new_token,
    owned_search,
    owned_searches,
    position,
    refresh_saved_query,
    rename_saved_search,
    saved_states,
)
from app.saved import (
    by_share_token as saved_by_share_token,
)
from app.store.models import SavedQuery, SavedSearch, utcnow
from app.web import urls, warm
from app.web.charts import Series, availability_bands, availability_chart, time_chart
from app.web.page_cache import TOKEN_PLACEHOLDER, Page, PageCache
from app.web.row_cache import offer_row_renderer
from app.web.templating import templates
from app.web.views import GpuPageData, gpu_page_data, gpu_spec, index_context
from app.web.workload import WorkloadDep

router = APIRouter(include_in_schema=False)

FiltersDep = Annotated[OfferFilters, Query()]
COOKIE_MAX_AGE = 400 * 24 * 3600  # browsers cap cookie lifetimes at 400 days


# ---------------------------------------------------------------------------------------------
# Browser identity and CSRF


_TOKEN = re.compile(r"[A-Za-z0-9_-]{20,64}")
MAX_ID = 2**31 - 1  # ids are 32-bit integers in the database


def _owner(request: Request) -> str | None:
    token = request.cookies.get(OWNER_COOKIE)
    # Tokens we issue are 43 URL-safe characters; anything else is not one of ours.
    return token if token and _TOKEN.fullmatch(token) else None


def _render(
    request: Request,
    template: str,
    context: dict[str, Any],
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    """Render a page; give the browser an owner token first if it has none (forms need it)."""
    return _html(request, _render_body(request, template, context), status=status, headers=headers)


def _render_body(request: Request, template: str, context: dict[str, Any]) -> bytes:
    """A page's HTML with the form token left as a placeholder (the same for every visitor)."""
    context = {"request": request, "csrf": TOKEN_PLACEHOLDER, "path": request.url.path, **context}
    return templates.get_template(template).render(context).encode()


_PLACEHOLDER = TOKEN_PLACEHOLDER.encode()


def _html(
    request: Request, body: bytes, *, status: int = 200, headers: dict[str, str] | None = None
) -> HTMLResponse:
    """The response for a rendered body: this browser's form token in place of the
    placeholder, and an owner cookie first if it has none."""
    owner = _owner(request)
    fresh = owner is None
    if owner is None:
        owner = new_token()
    body = body.replace(_PLACEHOLDER, csrf_token(owner).encode())
    response = HTMLResponse(body, status_code=status, headers=headers)
    if fresh:
        _set_owner_cookie(request, response, owner)
    return response


def _set_owner_cookie(request: Request, response: Response, owner: str) -> None:
    response.set_cookie(
        OWNER_COOKIE,
        owner,
        max_age=COOKIE_MAX_AGE,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https" or request.app.state.settings.https,
        path="/",
    )


def _check_post(request: Request, submitted: str | None) -> str:
    """The owner token of a POST that passes the CSRF checks; 403 otherwise."""
    origin = request.headers.get("origin")
    if origin and origin != "null":
        if urlsplit(origin).netloc != request.headers.get("host", request.url.netloc):
            raise HTTPException(403, "cross-site form submission refused")
    owner = _owner(request)
    if owner is None or not csrf_ok(owner, submitted):
        raise HTTPException(403, "form token missing or invalid; reload the page and retry")
    return owner


def _form_error(error: SavedSearchError) -> RequestValidationError:
    return RequestValidationError(
        [{"type": "value_error", "loc": ("body", error.field), "msg": str(error), "input": None}]
    )


def _see_other(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303)


# ---------------------------------------------------------------------------------------------
# The comparison table


@router.get("/", response_class=HTMLResponse)
def index(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    filters: FiltersDep,
    workload: WorkloadDep,
) -> Response:
    """The comparison table; the GET form keeps the whole view in the URL."""
    raw = request.query_params.multi_items()
    args = urls.clean(raw)
    if len(args) != len(raw):
        # Blank form fields mean "no filter": redirect to the canonical, bookmarkable URL.
        return RedirectResponse(urls.url("/", args), status_code=302)

    def build() -> Page:
        context = index_context(session, settings, args=args, filters=filters, workload=workload)
        terms = context["terms"]
        context["offer_row"] = offer_row_renderer(
            request.app.state.row_cache,
            ranked=workload is not None,
            headroom_pct=terms.min_headroom_pct if workload is not None and terms else None,
            link_query=context["link_query"],
            listings=context["listings"],
        )
        body = _render_body(request, "index.html", context)
        return Page(body, "text/html; charset=utf-8", tuple(urls.alternate_links(request).items()))

    cache: PageCache = request.app.state.page_cache
    page = cache.fetch(request, session, settings, build)
    warm.note_request(request)
    return _html(request, page.body, headers=dict(page.headers))


# ---------------------------------------------------------------------------------------------
# Offer detail


def _offer_or_404(session: SessionDep, offer_id: int) -> Any:
    # An id the database cannot even hold (>= 2^31) is simply not there.
    row = get_offer(session, offer_id=offer_id) if 1 <= offer_id <= MAX_ID else None
    if row is None:
        raise HTTPException(404, f"No offer with id {offer_id}")
    return row


@router.get("/offers/{offer_id}", response_class=HTMLResponse)
def offer_page(
    request: Request,
    session: SessionDep,
    offer_id: int,
    workload: WorkloadDep,
    filters: FiltersDep,
) -> Response:
    """Every field of one offer, its provider facts with sources and its price history."""
    from scrapers.facts import load_facts

    row = _offer_or_404(session, offer_id)
    history = price_history(session, offer_id=offer_id)
    end = utcnow() if row.active else row.last_seen
    series = [
        Series(
            "on-demand",
            "s-ondemand",
            [(p.observed_at, p.price_per_hour) for p in history if p.price_per_hour is not None],
        ),
        Series(
            "spot",
            "s-spot",
            [
                (p.observed_at, p.spot_price_per_hour)
                for p in history
                if p.spot_price_per_hour is not None
            ],
        ),
    ]
    bands = availability_bands([(p.observed_at, p.availability) for p in history], end)
    chart = time_chart(
        series, bands=bands, end=end, title=f"Price history of {row.instance_type} in {row.region}"
    )
    availability = availability_chart(
        [(p.observed_at, p.availability, p.availability_count) for p in history],
        end=end,
        title=f"Availability of {row.instance_type} in {row.region}",
    )
    facts = load_facts(row.provider).describe(row.instance_type, row.gpu_model, row.gpu_count)
    terms = job_terms(filters)
    fit = assess_row(session, row, workload, terms) if workload is not None else None
    return _render(
        request,
        "offer.html",
        {
            "row": row,
            "history": history,
            "chart": chart,
            "availability_chart": availability,
            "sample_source": _sample_source(row),
            "facts": facts,
            "fit": fit,
            "workload": workload,
            "link_query": urls.qs(link_args(urls.args_of(request))) if workload else "",
            "json_url": f"/api/offers/{offer_id}",
        },
        headers=urls.alternate_links(request, [(f"/api/offers/{offer_id}", "application/json")]),
    )


def _sample_source(row: Any) -> Any:
    """The recorded sample source an offer was loaded from (None for live data)."""
    from app.pipeline.sample_loader import SAMPLE_SOURCE, sample_files

    if row.source != SAMPLE_SOURCE:
        return None
    return next((item for item in sample_files() if item.provider == row.provider), None)


@router.get("/api/offers/{offer_id}", tags=["offers"], include_in_schema=True)
def offer_json(
    session: SessionDep, offer_id: int, workload: WorkloadDep, filters: FiltersDep
) -> dict[str, Any]:
    """One offer with its price history."""
    row = _offer_or_404(session, offer_id)
    out = offer_dict(RankedOffer(row))
    if workload is not None:
        fit = assess_row(session, row, workload, job_terms(filters))
        out.update(fit_dict(fit))
        out["setup"] = list(fit.setup_notes)  # each step with its source or assumption
    out["history"] = [
        {
            "observed_at": p.observed_at.isoformat(),
            "price_per_hour": p.price_per_hour,
            "spot_price_per_hour": p.spot_price_per_hour,
            "availability": p.availability,
            "availability_count": p.availability_count,
        }
        for p in price_history(session, offer_id=offer_id)
    ]
    return out


# ---------------------------------------------------------------------------------------------
# GPU model page


def _gpu_data(session: SessionDep, slug: str) -> tuple[Any, GpuPageData]:
    spec = gpu_spec(session, slug)
    if spec is None:
        raise HTTPException(404, f"No GPU model {slug!r} in the catalog")
    return spec, gpu_page_data(session, slug)


def _gpu_rows(session: SessionDep, slug: str) -> tuple[Any, list[RankedOffer]]:
    spec, data = _gpu_data(session, slug)
    return spec, [RankedOffer(r) for r in data.rows]


def _gpu_twins(slug: str) -> list[tuple[str, str]]:
    return [
        (f"/gpus/{slug}", "text/html"),
        (f"/api/gpus/{slug}", "application/json"),
        (f"/gpus/{slug}.csv", "text/csv"),
    ]


@router.get("/gpus/{slug}.csv")
def gpu_csv(request: Request, session: SessionDep, slug: str) -> Response:
    """The GPU page's cheapest-offer-per-provider table as CSV."""
    _spec, rows = _gpu_rows(session, slug)
    return Response(
        to_csv(rows, with_fit=False),
        media_type="text/csv; charset=utf-8",
        headers=urls.alternate_links(request, _gpu_twins(slug)),
    )


@router.get("/api/gpus/{slug}", include_in_schema=True, tags=["gpus"])
def gpu_json(session: SessionDep, slug: str) -> dict[str, Any]:
    """A GPU model's specs and each provider's cheapest current offer."""
    from dataclasses import asdict

    spec, rows = _gpu_rows(session, slug)
    return {"gpu": asdict(spec), "offers": [offer_dict(r) for r in rows]}


@router.get("/gpus/{slug}", response_class=HTMLResponse)
def gpu_page(request: Request, session: SessionDep, slug: str) -> Response:
    """Specs with their source, cheapest offers per provider, price history across providers."""
    spec, data = _gpu_data(session, slug)
    warm.note_request(request)
    # One colour per line: the providers cheapest now, the rest left out and said so.
    series = [
        Series(h.provider, f"s{i}", h.points, h.ranges)
        for i, h in enumerate(sorted(data.history, key=lambda h: h.provider))
    ]
    chart = time_chart(
        series, title=f"{spec.name}: cheapest on-demand price per GPU-hour", unit="per GPU-hour"
    )
    return _render(
        request,
        "gpu.html",
        {
            "spec": spec,
            "rows": [RankedOffer(r) for r in data.rows],
            "chart": chart,
            "providers_drawn": len(series),
            "providers_total": len(data.providers),
        },
        headers=urls.alternate_links(request, _gpu_twins(slug)),
    )


# ---------------------------------------------------------------------------------------------
# Providers


_PROVIDER_COLUMNS = (
    "provider",
    "source",
    "display_name",
    "state",
    "interval_minutes",
    "last_success",
    "last_run_at",
    "last_status",
    "last_error",
    "failing_since",
    "offer_count",
    "sample_offers",
    "stale",
    "feed_rows",
)
_PROVIDER_TWINS = [
    ("/providers", "text/html"),
    ("/api/providers", "application/json"),
    ("/providers.csv", "text/csv"),
]


@router.get("/providers", response_class=HTMLResponse)
def providers_page(request: Request, session: SessionDep, settings: SettingsDep) -> Response:
    """Each feed's last success, last error and offer count."""
    return _render(
        request,
        "providers.html",
        {"statuses": provider_statuses(session, settings)},
        headers=urls.alternate_links(request, _PROVIDER_TWINS),
    )


@router.get("/providers.csv")
def providers_csv(request: Request, session: SessionDep, settings: SettingsDep) -> Response:
    """/api/providers as CSV."""
    rows = [
        [getattr(s, name) for name in _PROVIDER_COLUMNS]
        for s in provider_statuses(session, settings)
    ]
    return _csv_response(_PROVIDER_COLUMNS, rows, request, _PROVIDER_TWINS)


def _csv_response(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    request: Request,
    twins: Sequence[tuple[str, str]],
) -> Response:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(
            ["" if v is None else v.isoformat() if hasattr(v, "isoformat") else v for v in row]
        )
    return Response(
        buffer.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers=urls.alternate_links(request, twins),
    )


# ---------------------------------------------------------------------------------------------
# Saved searches

_SAVED_TWINS = [
    ("/saved", "text/html"),
    ("/api/saved", "application/json"),
    ("/saved.csv", "text/csv"),
]


@dataclass(frozen=True)
class SavedItem:
    """One row of /saved: the search, its view's stored state and that state's best offer."""

    search: SavedSearch
    state: SavedQuery
    best: OfferRow | None
    current: bool  # the counts are those of the current data version


def _saved_items(request: Request, session: Session, owner: str | None) -> list[SavedItem]:
    """This browser's searches with their views' counts, never re-running every search.

    Views left stale by a scrape are brought up to date here while the settings' time budget
    lasts (each is one search, shared by everyone who saved the same view); the rest go to the
    background refresher and show their counts as of the data version they were computed for.
    """
    searches = owned_searches(session, owner_token=owner)
    if not searches:
        return []
    keys = list(dict.fromkeys(s.query_key for s in searches))
    states = saved_states(session, keys)
    for search in searches:
        if search.query_key not in states:  # a search stored before its view had a state
            states[search.query_key] = SavedQuery(
                key=search.query_key, query=search.query, match_count=0, checked_change_id=0
            )
            session.add(states[search.query_key])
    session.commit()
    at = position(session)
    stale = [key for key in keys if not is_current(states[key], at)]
    settings = request.app.state.settings
    deadline = time.monotonic() + settings.saved_refresh_budget_ms / 1000
    left = []
    for key in stale:
        if time.monotonic() >= deadline:
            left.append(key)
            continue
        refresh_saved_query(session, key=key)
        session.commit()
    refresher: SavedQueryRefresher | None = getattr(request.app.state, "saved_refresher", None)
    if left and refresher is not None:
        refresher.submit(left)
    best = get_offers(
        session, ids=[s.best_offer_id for s in states.values() if s.best_offer_id is not None]
    )
    return [
        SavedItem(
            search,
            states[search.query_key],
            best.get(states[search.query_key].best_offer_id or -1),
            is_current(states[search.query_key], at),
        )
        for search in searches
    ]


def _saved_public(item: SavedItem) -> dict[str, Any]:
    search = item.search
    computed = item.state.computed_at
    return {
        "name": search.name,
        "query": search.query,
        "share_url": f"/s/{search.share_token}",
        "feed_url": f"/saved/{search.share_token}.atom",
        "created_at": search.created_at.isoformat(),
        "match_count": item.state.match_count,
        "best_price": item.state.best_price,
        "best_offer": None if item.best is None else offer_dict(RankedOffer(item.best)),
        "as_of": None if computed is None else computed.isoformat(),
        "current": item.current,
    }


@router.get("/saved", response_class=HTMLResponse)
def saved_page(request: Request, session: SessionDep) -> Response:
    """This browser's saved searches with their current best match and match count."""
    items = _saved_items(request, session, _owner(request))
    return _render(
        request,
        "saved.html",
        {"items": items, "stale": any(not item.current for item in items)},
        headers=urls.alternate_links(request, _SAVED_TWINS),
    )


@router.get("/api/saved")
def saved_json(request: Request, session: SessionDep) -> dict[str, Any]:
    """This browser's saved searches (by its cookie) as JSON."""
    return {"saved": [_saved_public(i) for i in _saved_items(request, session, _owner(request))]}


@router.get("/saved.csv")
def saved_csv(request: Request, session: SessionDep) -> Response:
    """This browser's saved searches as CSV."""
    data = [_saved_public(i) for i in _saved_items(request, session, _owner(request))]
    columns = (
        "name", "query", "share_url", "feed_url", "created_at", "match_count", "best_price",
        "as_of", "current",
    )  # fmt: skip
    return _csv_response(columns, [[d[c] for c in columns] for d in data], request, _SAVED_TWINS)


async def _form(request: Request) -> dict[str, str]:
    """The posted form's text fields.

    Parsed here rather than with Form() parameters: FastAPI turns any error while it parses a
    body into a 400, which would hide the size limit's 413 (app.core.security).
    """
    form = await request.form()
    return {key: value for key, value in form.items() if isinstance(value, str)}


FormDep = Annotated[dict[str, str], Depends(_form)]


def _field(form: dict[str, str], name: str, *, required: bool = True, max_length: int) -> str:
    value = form.get(name, "")
    if required and not value.strip():
        raise _form_error(SavedSearchError(name, f"{name} is required"))
    if len(value) > max_length:
        raise _form_error(SavedSearchError(name, f"{name} longer than {max_length} characters"))
    return value


@router.post("/saved")
def save_search(
    request: Request, session: SessionDep, settings: SettingsDep, form: FormDep
) -> Response:
    """Store the current view under a name for this browser (up to the per-browser cap)."""
    owner = _check_post(request, form.get("csrf"))
    name = _field(form, "name", max_length=400)
    query = _field(form, "query", required=False, max_length=8000)
    try:
        create_saved_search(
            session,
            owner_token=owner,
            name=name,
            query=query,
            max_per_owner=settings.max_saved_searches_per_owner,
        )
    except SavedSearchLimitReached as exc:
        raise HTTPException(429, str(exc)) from exc
    except SavedSearchError as exc:
        raise _form_error(exc) from exc
    session.commit()
    return _see_other("/saved")


def _posted_own_search(
    request: Request, session: Session, share_token: str, form: dict[str, str]
) -> SavedSearch:
    """The saved search a checked (CSRF) POST names, if this browser owns it; else 404."""
    owner = _check_post(request, form.get("csrf"))
    search = owned_search(session, owner_token=owner, share_token=share_token)
    if search is None:
        raise HTTPException(404, "No such saved search in this browser")
    return search


@router.post("/saved/{share_token}/rename")
def rename_search(
    request: Request, session: SessionDep, share_token: str, form: FormDep
) -> Response:
    """Rename one of this browser's saved searches."""
    search = _posted_own_search(request, session, share_token, form)
    try:
        rename_saved_search(session, search=search, name=_field(form, "name", max_length=400))
    except SavedSearchError as exc:
        raise _form_error(exc) from exc
    session.commit()
    return _see_other("/saved")


@router.post("/saved/{share_token}/delete")
def delete_search(
    request: Request, session: SessionDep, share_token: str, form: FormDep
) -> Response:
    """Delete one of this browser's saved searches."""
    search = _posted_own_search(request, session, share_token, form)
    delete_saved_search(session, search=search)
    session.commit()
    return _see_other("/saved")


@router.get("/s/{share_token}")
def shared_search(session: SessionDep, share_token: str) -> Response:
    """A share link: open the saved view."""
    search = saved_by_share_token(session, share_token=share_token)
    if search is None:
        raise HTTPException(404, "No such saved search")
    return RedirectResponse(f"/?{search.query}" if search.query else "/", status_code=302)


@router.get("/saved/{share_token}.atom")
def saved_feed(request: Request, session: SessionDep, share_token: str) -> Response:
    """Atom feed of a saved search: new matching offers and best-price drops."""
    search = saved_by_share_token(session, share_token=share_token)
    if search is None:
        raise HTTPException(404, "No such saved search")
    # One view, brought up to date for its readers (shared by everyone who saved it).
    refresh_saved_query(session, key=search.query_key)
    session.commit()
    entries = feed_entries(session, search=search)
    base = str(request.base_url).rstrip("/")
    body = templates.get_template("feed.atom.xml").render(
        search=search,
        entries=entries,
        base=base,
        updated=entries[0].created_at if entries else search.created_at,
    )
    return Response(body, media_type="application/atom+xml; charset=utf-8")
