"""Offer queries: what the tables, facets, detail pages and feeds read from the database.

One declarative filter table (`filters`) drives the SQL, the form, the facets and the caption.
`search_offers` filters, sorts and paginates in SQL; with a workload it prefilters in SQL to
offers whose VRAM could hold the job, assesses one price-free fit per machine shape, ranks them
in SQL (`shapes`, or `in_memory` when shapes are very many) and appends the non-fitting rest.
"""

from app.queries.assess import (
    VramBounds,
    assess_row,
    forget_fit_assessments,
    listing_bands,
    offer_facts,
    vram_bounds,
)
from app.queries.changes import ChangedMatches, changed_matches, last_change_id
from app.queries.export import export_batches, export_lines
from app.queries.facets import Facet, FacetValue, RegionGroup, facets, regions_by_continent
from app.queries.filters import (
    FILTERS,
    FILTERS_BY_KEY,
    FilterSpec,
    active_filters,
    caption,
    effective_sort,
    where_clauses,
)
from app.queries.history import (
    HistoryPoint,
    ProviderHistory,
    cheapest_per_provider,
    gpu_price_history,
    price_history,
)
from app.queries.output import FIT_FIELDS, OFFER_FIELDS, csv_rows, json_lines, offer_dict, to_csv
from app.queries.params import (
    DEFAULT_LIMIT,
    DEFAULT_SORT,
    LABELS,
    MAX_LIMIT,
    SORT_LABELS,
    WORKLOAD_KEYS,
    WORKLOAD_SORTS,
    OfferFilters,
    Sort,
    filters_from_args,
    job_terms,
    link_args,
    workload_from_args,
)
from app.queries.ranking import page_assumptions
from app.queries.rows import (
    OfferPage,
    OfferRow,
    RankedOffer,
    all_rows,
    count_offers,
    count_where,
    get_offer,
    get_offers,
    page_rows,
)
from app.queries.search import search_offers
from app.queries.suggestions import Suggestion

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_SORT",
    "FILTERS",
    "FILTERS_BY_KEY",
    "FIT_FIELDS",
    "LABELS",
    "MAX_LIMIT",
    "OFFER_FIELDS",
    "SORT_LABELS",
    "WORKLOAD_KEYS",
    "WORKLOAD_SORTS",
    "ChangedMatches",
    "Facet",
    "FacetValue",
    "FilterSpec",
    "HistoryPoint",
    "OfferFilters",
    "OfferPage",
    "OfferRow",
    "ProviderHistory",
    "RankedOffer",
    "RegionGroup",
    "Sort",
    "Suggestion",
    "VramBounds",
    "active_filters",
    "all_rows",
    "assess_row",
    "caption",
    "changed_matches",
    "cheapest_per_provider",
    "count_offers",
    "count_where",
    "csv_rows",
    "effective_sort",
    "export_batches",
    "export_lines",
    "facets",
    "filters_from_args",
    "forget_fit_assessments",
    "get_offer",
    "get_offers",
    "gpu_price_history",
    "job_price",
    "json_lines",
    "last_change_id",
    "job_terms",
    "link_args",
    "page_assumptions",
    "listing_bands",
    "offer_dict",
    "offer_facts",
    "page_rows",
    "price_history",
    "regions_by_continent",
    "search_offers",
    "to_csv",
    "vram_bounds",
    "where_clauses",
    "workload_from_args",
]
