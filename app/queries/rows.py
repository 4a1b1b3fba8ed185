"""Offer rows as tables show them, pages of them, and counts (cached until the next ingest)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    FunctionElement,
    Select,
    String,
    any_,
    bindparam,
    func,
    select,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session

from app.fit import JobTerms, MemoryEstimate, OfferFit
from app.gpus.catalog import UNKNOWN
from app.queries.filters import order_by, where_clauses
from app.queries.params import OfferFilters, Sort
from app.queries.sql_types import ARRAYS, INTEGER
from app.store import data_cache
from app.store.models import GpuModel, Offer, Provider


# Not frozen, though nothing assigns to a row: a frozen dataclass sets each of its 36 fields
# through object.__setattr__, 5.8 ms per 1,000 rows against 0.5 ms, and a ranked page of 1,000
# rows builds them twice (its rows and their listings' other regions).
@dataclass(slots=True, unsafe_hash=True)
class OfferRow:
    """One offer with its provider and GPU details: what tables and the fit engine need."""

    id: int
    provider: str
    provider_name: str
    source: str
    instance_type: str
    region: str
    continent: str | None
    spot: bool
    gpu_model: str
    gpu_name: str
    gpu_vendor: str | None
    gpu_raw_name: str
    gpu_count: float
    vram_gib_per_gpu: float | None
    vram_gib_total: float | None
    vcpus: float | None
    ram_gib: float | None
    disk_gib: float | None
    interconnect: str
    network: str
    network_gbps: float | None
    price_per_hour: float | None
    spot_price_per_hour: float | None
    price_per_gpu_hour: float | None
    currency: str
    billing: str
    availability: str
    availability_count: int | None
    first_seen: datetime
    last_seen: datetime
    active: bool
    bf16_tflops: float | None
    fp16_tflops: float | None
    memory_type: str | None
    nvlink_gbps: float | None
    provider_url: str | None = None  # where to rent it (provider facts); None before migration 0006

    @property
    def spot_price_per_gpu_hour(self) -> float | None:
        spot = self.spot_price_per_hour
        return None if spot is None else spot / self.gpu_count


_ROW_COLUMNS: tuple[Any, ...] = (
    Offer.id,
    Offer.provider_id,
    Provider.display_name,
    Offer.source,
    Offer.instance_type,
    Offer.region,
    Offer.continent,
    Offer.spot,
    Offer.gpu_model_slug,
    GpuModel.name,
    GpuModel.vendor,
    Offer.gpu_raw_name,
    Offer.gpu_count,
    Offer.vram_gib_per_gpu,
    Offer.vram_gib_total,
    Offer.vcpus,
    Offer.ram_gib,
    Offer.disk_gib,
    Offer.interconnect,
    Offer.network,
    Offer.network_gbps,
    Offer.price_per_hour,
    Offer.spot_price_per_hour,
    Offer.price_per_gpu_hour,
    Offer.currency,
    Offer.billing,
    Offer.availability,
    Offer.availability_count,
    Offer.first_seen,
    Offer.last_seen,
    Offer.active,
    GpuModel.bf16_tflops,
    GpuModel.fp16_tflops,
    GpuModel.memory_type,
    GpuModel.nvlink_gbps,
    Offer.provider_url,
)


def row_select(columns: Sequence[Any] = _ROW_COLUMNS) -> Select[Any]:
    return (
        select(*columns)
        .join(Provider, Provider.id == Offer.provider_id)
        .outerjoin(GpuModel, GpuModel.slug == Offer.gpu_model_slug)
    )


class _UtcText(FunctionElement[str]):
    """A UTC timestamp column as text, `YYYY-MM-DDTHH:MM:SS.ffffff` on both backends."""

    type = String()
    name = "utc_text"
    inherit_cache = True


@compiles(_UtcText, "postgresql")
def _utc_text_pg(element: _UtcText, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.clauses, **kw)
    return f"to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US')"


@compiles(_UtcText, "sqlite")
def _utc_text_sqlite(element: _UtcText, compiler: Any, **kw: Any) -> str:
    # Stored as 'YYYY-MM-DD HH:MM:SS.ffffff' (UTC) by SQLAlchemy.
    return f"replace({compiler.process(element.clauses, **kw)}, ' ', 'T')"


# row_select's columns with the two timestamps as text: a streamed export of 100,000 rows
# spends a second building and formatting datetimes otherwise (app.queries.output.iso_utc).
TEXT_TIME_COLUMNS: tuple[Any, ...] = tuple(
    _UtcText(c).label(c.key) if c in (Offer.first_seen, Offer.last_seen) else c
    for c in _ROW_COLUMNS
)


def _to_row(raw: Sequence[Any]) -> OfferRow:
    values = list(raw)
    slug = values[8]
    values[8] = slug or UNKNOWN
    # An offer whose GPU is not in the catalog shows the provider's own spelling.
    values[9] = values[9] or values[11]
    return OfferRow(*values)


def fetch_rows(session: Session, stmt: Select[Any]) -> list[OfferRow]:
    return [_to_row(r) for r in session.execute(stmt)]


def rows_of(raw: Sequence[Sequence[Any]]) -> list[OfferRow]:
    """OfferRows of rows of `row_select()` already fetched (e.g. a streamed batch)."""
    return [_to_row(r) for r in raw]


def get_offer(session: Session, *, offer_id: int) -> OfferRow | None:
    """One offer by id (active or not), or None."""
    rows = fetch_rows(session, row_select().where(Offer.id == offer_id))
    return rows[0] if rows else None


def id_in(session: Session, ids: Sequence[int]) -> ColumnElement[bool]:
    """`Offer.id` among `ids`: one array parameter on Postgres (an IN list of 1,000 ids is a
    1,000-placeholder statement the driver parses anew each time), an IN list elsewhere."""
    if session.get_bind().dialect.name == "postgresql":
        return Offer.id == any_(bindparam(None, list(ids), type_=ARRAYS[INTEGER]))
    return Offer.id.in_(ids)


def get_offers(session: Session, *, ids: Sequence[int]) -> dict[int, OfferRow]:
    """Offers by id (active or not), in one query; missing ids are left out."""
    if not ids:
        return {}
    rows = fetch_rows(session, row_select().where(id_in(session, sorted(set(ids)))))
    return {row.id: row for row in rows}


@dataclass(frozen=True)
class RankedOffer:
    """A table row: the offer, and its fit when a workload is set."""

    row: OfferRow
    fit: OfferFit | None = None


@dataclass(frozen=True)
class OfferPage:
    """A page of offers and what produced it."""

    total: int
    offers: list[RankedOffer]
    limit: int
    offset: int
    sort: Sort
    caption: str
    estimate: MemoryEstimate | None = None
    fitting: int | None = None  # how many offers fit, when a workload is set
    next_after: str | None = None  # the `after=` cursor of the next page (keyset sorts)
    tight: int | None = None  # of those, how many fit under the headroom margin
    terms: JobTerms | None = None  # the job's terms, when a workload is set
    suggestions: Sequence[Any] = ()  # app.queries.suggestions.Suggestion, when few fit


data_cache.share("count")


def count_offers(
    session: Session, *, filters: OfferFilters, derived: Callable[[], int] | None = None
) -> int:
    """How many offers the filters select (cached until the next ingest); see count_where."""
    return count_where(session, filters=filters, extra=[], derived=derived)


def all_rows(
    session: Session, *, filters: OfferFilters, extra: Sequence[ColumnElement[bool]] = ()
) -> list[OfferRow]:
    """Every filtered offer (no pagination), e.g. the fit candidates; `extra` narrows further."""
    stmt = row_select().where(*where_clauses(filters), *extra)
    return fetch_rows(session, stmt)


def page_rows(
    session: Session,
    *,
    filters: OfferFilters,
    sort: Sort,
    extra: Sequence[ColumnElement[bool]] = (),
    limit: int,
    offset: int,
) -> list[OfferRow]:
    """One SQL-sorted page of filtered offers narrowed by `extra`."""
    if limit <= 0:
        return []
    stmt = (
        row_select()
        .where(*where_clauses(filters), *extra)
        .order_by(*order_by(sort, filters))
        .limit(limit)
        .offset(offset)
    )
    return fetch_rows(session, stmt)


def count_where(
    session: Session,
    *,
    filters: OfferFilters,
    extra: Sequence[ColumnElement[bool]],
    derived: Callable[[], int] | None = None,
) -> int:
    """How many filtered offers also satisfy `extra` (cached until the next ingest). `derived`
    gets the same number from aggregates already at hand instead of a scan of its own."""
    stmt = select(func.count()).select_from(Offer).where(*where_clauses(filters), *extra)
    # The compiled SQL with its literal parameters names exactly what is counted.
    key = str(stmt.compile(compile_kwargs={"literal_binds": True}))
    return data_cache.cached(
        session, "count", key, derived or (lambda: int(session.scalar(stmt) or 0))
    )
