"""Template contexts for the pages: what each page shows, assembled from the query functions."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.settings import Settings
from app.fit import MemoryEstimate, Workload
from app.fit.serialize import presets_list, stacks_list
from app.fit.topology import CARD_USABLE_GIB
from app.gpus.catalog import GpuSpec, load_catalog
from app.pipeline.freshness import ProviderStatus, SampleNotice, provider_statuses, sample_notice
from app.queries import (
    SORT_LABELS,
    WORKLOAD_SORTS,
    Facet,
    OfferFilters,
    OfferPage,
    OfferRow,
    ProviderHistory,
    RegionGroup,
    active_filters,
    cheapest_per_provider,
    facets,
    gpu_price_history,
    link_args,
    page_assumptions,
    regions_by_continent,
    search_offers,
)
from app.queries.listings import group_offers, grouping_applies
from app.store.models import GpuModel
from app.web import urls
from app.web.charts import memory_bar, memory_parts
from app.web.urls import Args

MAX_STALE_LISTED = 6
METHOD_LABELS = {
    "pretrain": "pretraining",
    "full": "full fine-tune",
    "lora": "LoRA",
    "qlora": "QLoRA",
}


@dataclass(frozen=True)
class Chip:
    """An active filter shown above the table with a link that removes it."""

    text: str
    remove_url: str


@dataclass(frozen=True)
class PageLink:
    label: str
    url: str | None  # None: the current page or out of range


@dataclass(frozen=True)
class Banners:
    stale: list[ProviderStatus]
    stale_more: int
    sample: SampleNotice | None


def banners(session: Session, settings: Settings) -> Banners:
    """The sample notice, or the stale feeds among those that have offers or errors."""
    notice = sample_notice(session)
    stale: list[ProviderStatus] = []
    if notice is None:
        stale = [
            s
            for s in provider_statuses(session, settings)
            if s.stale and (s.offer_count or s.last_error)
        ]
    return Banners(stale[:MAX_STALE_LISTED], max(0, len(stale) - MAX_STALE_LISTED), notice)


def _chips(args: Args, filters: OfferFilters) -> list[Chip]:
    chips = []
    for spec, value in active_filters(filters):
        if isinstance(value, list):
            for item in value:
                raw = f"{item:g}" if isinstance(item, float) else str(item)
                chips.append(
                    Chip(spec.caption([item]), urls.url("/", urls.toggle(args, spec.key, raw)))
                )
        else:
            remove = urls.url("/", urls.replace(args, spec.key, None))
            chips.append(Chip(spec.caption(value), remove))
    return chips


def _job_chips(args: Args, filters: OfferFilters) -> list[Chip]:
    """Chips for the deadline and budget (they shape the ranking, not the SQL filters)."""
    chips = []
    if filters.max_hours is not None:
        chips.append(
            Chip(
                f"finishes within {filters.max_hours:g} h",
                urls.url("/", urls.replace(args, "max_hours", None)),
            )
        )
    if filters.max_cost is not None:
        chips.append(
            Chip(
                f"job costs at most ${filters.max_cost:,.2f}",
                urls.url("/", urls.replace(args, "max_cost", None)),
            )
        )
    return chips


def _pagination(args: Args, page: OfferPage) -> list[PageLink]:
    if page.total <= page.limit and page.offset == 0:
        return []
    pages = max(1, math.ceil(page.total / page.limit))
    current = page.offset // page.limit

    def link(index: int) -> str:
        offset = str(index * page.limit) if index else None
        return urls.url("/", urls.replace(args, "offset", offset))

    # Next follows the keyset cursor where the sort has one: one index range scan however deep.
    following = (
        urls.url("/", urls.replace(args, "after", page.next_after))
        if page.next_after
        else (link(current + 1) if current + 1 < pages else None)
    )
    out = [PageLink("← Previous", link(current - 1) if current > 0 else None)]
    shown = sorted({0, pages - 1, *range(max(0, current - 2), min(pages, current + 3))})
    last = -1
    for index in shown:
        if index - last > 1:
            out.append(PageLink("…", None))
        out.append(PageLink(str(index + 1), None if index == current else link(index)))
        last = index
    out.append(PageLink("Next →", following))
    return out


def _gpu_choices(session: Session, facet: Facet | None) -> list[tuple[str, str, str]]:
    """(slug, vendor, name) of every catalog GPU, those with offers first (facet order)."""
    catalog = load_catalog()
    ordered = [v.value for v in facet.values] if facet else []
    rest = sorted((s for s in catalog if s not in ordered), key=lambda s: catalog[s].name)
    out = []
    for slug in [*ordered, *rest]:
        spec = catalog.get(slug)
        out.append((slug, spec.vendor if spec else "", spec.name if spec else slug))
    return out


def chosen_card(
    estimate: MemoryEstimate, filters: OfferFilters, page: OfferPage
) -> tuple[float | None, str]:
    """The card the memory bar is drawn against: the one GPU filtered on, else the top-ranked
    fitting offer's, else the smallest common card size that holds the job."""
    catalog = load_catalog()
    if len(filters.gpu) == 1 and filters.gpu[0] in catalog:
        spec = catalog[filters.gpu[0]]
        return spec.vram_gib, spec.name
    top = page.offers[0] if page.offers else None
    if top is not None and top.fit is not None and top.fit.fits and top.row.vram_gib_per_gpu:
        return top.row.vram_gib_per_gpu, f"{top.row.gpu_name} (top row)"
    if estimate.fits_gpu_gib is not None:
        size = estimate.fits_gpu_gib
        return CARD_USABLE_GIB[size], f"a {size} GB card"
    return None, "no single card"


def memory_chart(estimate: MemoryEstimate, filters: OfferFilters, page: OfferPage) -> Any:
    """The estimate panel's stacked memory bar against the chosen card."""
    capacity, label = chosen_card(estimate, filters, page)
    return memory_bar(
        memory_parts(estimate.breakdown.as_dict()),
        capacity_gib=capacity,
        capacity_label=label,
        title=f"Memory per GPU for {estimate.model_name} ({estimate.stack.id} stack)",
    )


def index_context(
    session: Session,
    settings: Settings,
    *,
    args: Args,
    filters: OfferFilters,
    workload: Workload | None,
) -> dict[str, Any]:
    """Everything `/` renders: the page of offers, facets, regions, form values and links."""
    # Facets first: their scan leaves the filtered count cached for the page.
    facet_list = facets(session, filters=filters)
    page = search_offers(session, filters=filters, workload=workload)
    by_key = {f.key: f for f in facet_list}
    regions: list[RegionGroup] = regions_by_continent(session, filters=filters)
    sorts = {
        k: v for k, v in SORT_LABELS.items() if workload is not None or k not in WORKLOAD_SORTS
    }
    first, last = page.offset + 1, min(page.total, page.offset + len(page.offers))

    def toggle_url(key: str, value: str) -> str:
        return urls.url("/", urls.toggle(args, key, value))

    def replace_url(key: str, value: str | None) -> str:
        return urls.url("/", urls.replace(args, key, value))

    query = urls.qs(urls.without(args, *urls.PAGE_START))
    whole_view = urls.without(args, *urls.PAGE_START, "limit")
    link_query = urls.qs(link_args(args)) if workload is not None else ""
    assumptions = page_assumptions(page, workload) if workload is not None else []
    suggestions = [
        (s, urls.url("/", [*urls.without(args, *urls.PAGE_START, *s.params), *s.params.items()]))
        for s in page.suggestions
    ]
    return {
        "args": args,
        "arg": lambda key, default="": urls.first(args, key, default),
        "has": lambda key, value: urls.is_set(args, key, value),
        "filters": filters,
        "workload": workload,
        "method_label": METHOD_LABELS.get(workload.method, "") if workload else "",
        "page": page,
        "estimate": page.estimate,
        "memory_chart": (
            memory_chart(page.estimate, filters, page) if page.estimate is not None else None
        ),
        "memory_parts": (
            memory_parts(page.estimate.breakdown.as_dict()) if page.estimate is not None else []
        ),
        "stack_options": [(s["id"], s["name"]) for s in stacks_list()],
        "facets": by_key,
        "regions": regions,
        "presets": presets_list(),
        "sorts": sorts,
        "chips": [*_chips(args, filters), *_job_chips(args, filters)],
        "link_query": link_query,
        "assumptions": assumptions,
        "suggestions": suggestions,
        "terms": page.terms,
        "pagination": _pagination(args, page),
        "first": first,
        "last": last,
        "toggle_url": toggle_url,
        "replace_url": replace_url,
        "query": query,
        "json_url": urls.url("/api/offers", args),
        "csv_url": urls.url("/offers.csv", args),
        "export_csv_url": urls.url("/export/offers.csv", whole_view),
        "export_jsonl_url": urls.url("/export/offers.jsonl", whole_view),
        "gpu_choices": _gpu_choices(session, by_key.get("gpu")),
        "banners": banners(session, settings),
        **_grouping(session, args, filters, page),
    }


def _grouping(
    session: Session, args: Args, filters: OfferFilters, page: OfferPage
) -> dict[str, Any]:
    """Group repeats (one row per listing, its regions listed) unless regions are filtered or
    the user asked for one row per offer (group=offer)."""
    allowed = grouping_applies(filters)
    grouped = allowed and urls.first(args, "group") != "offer"
    listings = group_offers(session, page.offers, filters) if grouped else []
    shown = {listing.item.row.id for listing in listings}
    merged = ({item.row.id for item in page.offers} - shown) if grouped else set()
    toggle = urls.replace(args, "group", "offer" if grouped else None)
    # The JSON twin shows the same rows: grouped with regions when the page is.
    api_args = [*urls.without(args, "group"), *([("group", "listing")] if grouped else [])]
    return {
        "grouped": grouped,
        "group_toggle": urls.url("/", toggle) if allowed else None,
        "listings": {listing.item.row.id: listing for listing in listings},
        "merged": merged,
        "json_url": urls.url("/api/offers", api_args),
    }


def gpu_spec(session: Session, slug: str) -> GpuSpec | None:
    """A catalog GPU by slug; also accepts a model stored in the DB but since removed."""
    spec = load_catalog().get(slug)
    if spec is not None:
        return spec
    row = session.scalar(select(GpuModel).where(GpuModel.slug == slug))
    if row is None:
        return None
    return GpuSpec(**{f: getattr(row, f) for f in GpuSpec.__dataclass_fields__})


MAX_CHART_SERIES = 8  # the chart palette's colours (static/app.css .s0-.s7)


@dataclass(frozen=True)
class GpuPageData:
    """What a GPU page shows besides specs: cheapest offer per provider, price history."""

    rows: list[OfferRow]  # each provider's cheapest current offer, cheapest first
    history: list[ProviderHistory]  # of the MAX_CHART_SERIES providers cheapest now
    providers: list[str]  # every provider listing the GPU now, cheapest first


def gpu_page_data(session: Session, slug: str) -> GpuPageData:
    """The GPU page's offers and chart data (both cached until the next ingest)."""
    rows = cheapest_per_provider(session, slug=slug)
    providers = list(dict.fromkeys(row.provider for row in rows))
    history = gpu_price_history(session, slug=slug, providers=providers[:MAX_CHART_SERIES])
    return GpuPageData(rows, history, providers)
