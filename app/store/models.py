"""SQLAlchemy 2 typed ORM models: the database schema of gpufit."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    and_,
    case,
    func,
    literal,
    literal_column,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite drops the offset on its own)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime; use timezone-aware UTC")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Provider(Base):
    __tablename__ = "providers"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    display_name: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class GpuModel(Base):
    __tablename__ = "gpu_models"

    slug: Mapped[str] = mapped_column(String(64), primary_key=True)
    vendor: Mapped[str] = mapped_column(String(32))
    name: Mapped[str] = mapped_column(String(128))
    vram_gb: Mapped[float] = mapped_column(Float)
    vram_gib: Mapped[float] = mapped_column(Float)
    memory_type: Mapped[str] = mapped_column(String(16))
    memory_bandwidth_gbps: Mapped[float] = mapped_column(Float)
    bf16_tflops: Mapped[float | None] = mapped_column(Float)
    fp16_tflops: Mapped[float] = mapped_column(Float)
    fp8: Mapped[bool] = mapped_column(Boolean)
    form_factor: Mapped[str] = mapped_column(String(16))
    nvlink_gbps: Mapped[float | None] = mapped_column(Float)
    architecture: Mapped[str] = mapped_column(String(32))
    source: Mapped[str] = mapped_column(Text)


class Offer(Base):
    __tablename__ = "offers"
    __table_args__ = (
        UniqueConstraint("provider_id", "instance_type", "region", "spot", name="uq_offers_key"),
        Index("ix_offers_active_price", "active", "price_per_hour"),
        Index("ix_offers_active_gpu_price", "active", "gpu_model_slug", "price_per_gpu_hour"),
        Index("ix_offers_active_vram", "active", "vram_gib_per_gpu"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    provider_id: Mapped[str] = mapped_column(ForeignKey("providers.id"), index=True)
    source: Mapped[str] = mapped_column(String(64))  # scraper that last wrote it, or "sample"
    instance_type: Mapped[str] = mapped_column(String(200))
    region: Mapped[str] = mapped_column(String(200))
    continent: Mapped[str | None] = mapped_column(String(32))
    spot: Mapped[bool] = mapped_column(Boolean, default=False)
    gpu_model_slug: Mapped[str | None] = mapped_column(ForeignKey("gpu_models.slug"))
    gpu_raw_name: Mapped[str] = mapped_column(String(200))
    gpu_count: Mapped[float] = mapped_column(Float)
    vram_gib_per_gpu: Mapped[float | None] = mapped_column(Float)
    vram_gib_total: Mapped[float | None] = mapped_column(Float)
    vcpus: Mapped[float | None] = mapped_column(Float)
    ram_gib: Mapped[float | None] = mapped_column(Float)
    disk_gib: Mapped[float | None] = mapped_column(Float)
    interconnect: Mapped[str] = mapped_column(String(16), default="unknown")
    network: Mapped[str] = mapped_column(String(16), default="unknown")
    network_gbps: Mapped[float | None] = mapped_column(Float)
    price_per_hour: Mapped[float | None] = mapped_column(Float)
    spot_price_per_hour: Mapped[float | None] = mapped_column(Float)
    price_per_gpu_hour: Mapped[float | None] = mapped_column(Float)
    currency: Mapped[str] = mapped_column(String(3), default="USD")
    billing: Mapped[str] = mapped_column(String(16), default="unknown")
    availability: Mapped[str] = mapped_column(String(16), default="unknown")
    availability_count: Mapped[int | None] = mapped_column(Integer)
    provider_url: Mapped[str | None] = mapped_column(String(500))  # where to rent it
    first_seen: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    active: Mapped[bool] = mapped_column(Boolean, default=True)

    provider: Mapped[Provider] = relationship(lazy="joined")
    gpu: Mapped[GpuModel | None] = relationship(lazy="joined")


def per_gpu_sql(price: ColumnElement[Any]) -> ColumnElement[float]:
    """`price / gpu_count` as a plain `/` on every backend.

    SQLAlchemy renders true division on SQLite as `a / (b + 0.0)`, which no index expression
    matches; gpu_count is a REAL column, so the plain operator divides as floats already.
    """
    divided: ColumnElement[float] = price.op("/", return_type=Float)(Offer.gpu_count)
    return divided


# The table's default order: hourly price per GPU, spot price where there is no on-demand one.
# app.queries sorts by exactly this expression, so these indexes serve its first page.
_EFFECTIVE_PRICE_PER_GPU = per_gpu_sql(
    func.coalesce(Offer.price_per_hour, Offer.spot_price_per_hour)
)
# On Postgres it also carries the columns of its expression, so a deep offset of the default
# order (offset=90000) is an index-only scan instead of 90,000 heap visits.
Index(
    "ix_offers_active_effective_price",
    Offer.active,
    _EFFECTIVE_PRICE_PER_GPU,
    Offer.id,
    postgresql_include=["price_per_hour", "spot_price_per_hour", "gpu_count"],
)
Index(
    "ix_offers_active_gpu_effective_price",
    Offer.active,
    Offer.gpu_model_slug,
    _EFFECTIVE_PRICE_PER_GPU,
    Offer.id,
)


# The other sorts the table offers (app.queries.filters.order_by renders the same expressions),
# so each first page and each keyset page (`after=`) is a short index range scan, not a sort.
# Unknown VRAM sorts last under "most VRAM first": -1 is below every real total.
NO_VRAM = -1.0
VRAM_SORT_SQL = func.coalesce(Offer.vram_gib_total, literal(NO_VRAM, Float, literal_execute=True))
Index(
    "ix_offers_active_price_order",
    Offer.active,
    func.coalesce(Offer.price_per_hour, Offer.spot_price_per_hour),
    Offer.id,
)
Index(
    "ix_offers_active_vram_order",
    Offer.active,
    func.coalesce(Offer.vram_gib_total, literal_column("-1.0")).desc(),
    _EFFECTIVE_PRICE_PER_GPU,
    Offer.id,
)
Index("ix_offers_active_newest", Offer.active, Offer.first_seen.desc(), Offer.id)
# The spot market's default order (spot price per GPU-hour).
Index(
    "ix_offers_active_spot_price_per_gpu",
    Offer.active,
    per_gpu_sql(Offer.spot_price_per_hour.expression),
    Offer.id,
)


def job_price_sql(*, use_spot: bool) -> ColumnElement[Any]:
    """The hourly price a job on the offer is billed at (app.queries.job_price, in SQL)."""
    spot_listing = func.coalesce(Offer.spot_price_per_hour, Offer.price_per_hour)
    other = Offer.spot_price_per_hour if use_spot else Offer.price_per_hour
    return case((Offer.spot.is_(True), spot_listing), else_=other)


# Stand-ins for NULL in machine-shape joins (equality must hold, and NULL = NULL does not):
# rendered inline (not bound) so the expressions match the index below on every plan,
# prepared generic ones included. Slugs are never empty and link speeds never negative.
NO_SLUG = ""
NO_GBPS = -1.0
SHAPE_SLUG_SQL = func.coalesce(Offer.gpu_model_slug, literal(NO_SLUG, String, literal_execute=True))
SHAPE_GBPS_SQL = func.coalesce(Offer.network_gbps, literal(NO_GBPS, Float, literal_execute=True))


def _machine_columns() -> tuple[Any, ...]:
    """The machine-shape columns the shape indexes lead with (after `active`), NULLs replaced
    by the stand-ins as the ranking's joins render them."""
    return (
        func.coalesce(Offer.gpu_model_slug, literal_column("''")),
        Offer.gpu_count,
        Offer.vram_gib_per_gpu,
        Offer.interconnect,
        Offer.network,
        func.coalesce(Offer.network_gbps, literal_column("-1.0")),
        Offer.billing,
    )


# Fit ranking looks up each candidate machine shape's offers under a price ceiling: every
# shape column is matched by equality, so the price range is one short scan per shape.
Index(
    "ix_offers_active_shape_job_price",
    Offer.active,
    *_machine_columns(),
    Offer.spot,
    Offer.availability,
    job_price_sql(use_spot=False),
)
# With market=any a listing with both prices may rank on its spot price: the same shape lookup
# by that price, over just those listings (migration 0010).
PAIRED_SPOT_SQL = and_(Offer.spot.is_(False), Offer.spot_price_per_hour.is_not(None))
Index(
    "ix_offers_active_shape_spot_price",
    Offer.active,
    *_machine_columns(),
    Offer.availability,
    Offer.spot_price_per_hour,
    postgresql_where=PAIRED_SPOT_SQL,
    sqlite_where=PAIRED_SPOT_SQL,
)


class PricePoint(Base):
    __tablename__ = "price_history"
    __table_args__ = (Index("ix_price_history_offer_time", "offer_id", "observed_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    offer_id: Mapped[int] = mapped_column(ForeignKey("offers.id", ondelete="CASCADE"))
    observed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    price_per_hour: Mapped[float | None] = mapped_column(Float)
    spot_price_per_hour: Mapped[float | None] = mapped_column(Float)
    availability: Mapped[str] = mapped_column(String(16), default="unknown")
    availability_count: Mapped[int | None] = mapped_column(Integer)


class ScrapeRun(Base):
    __tablename__ = "scrape_runs"
    __table_args__ = (Index("ix_scrape_runs_source_started", "source", "started_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    source: Mapped[str] = mapped_column(String(64))  # scraper id, or "sample"
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Refreshed while the run is in progress; a "running" run whose heartbeat stopped is dead.
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    status: Mapped[str] = mapped_column(String(16))  # ok | partial | failed | skipped | running
    offers_seen: Mapped[int] = mapped_column(Integer, default=0)
    offers_added: Mapped[int] = mapped_column(Integer, default=0)
    offers_updated: Mapped[int] = mapped_column(Integer, default=0)
    offers_removed: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text)
    warnings: Mapped[str | None] = mapped_column(Text)


class SavedSearch(Base):
    __tablename__ = "saved_searches"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # share_token names the search in public links; owner_token is the browser's cookie.
    share_token: Mapped[str] = mapped_column(String(64), unique=True)
    owner_token: Mapped[str] = mapped_column(String(64), index=True)
    name: Mapped[str] = mapped_column(String(200))
    query: Mapped[str] = mapped_column(Text)
    # The canonical query's key (app.saved.query_key): searches with the same view share one
    # SavedQuery, whose counts and feed entries are computed once for all of them.
    query_key: Mapped[str] = mapped_column(String(64), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class SavedSearchEntry(Base):
    """A feed entry of one saved search alone (its "created" entry); the entries a scrape
    causes belong to its canonical query (SavedQueryEntry), shared by every search of it."""

    __tablename__ = "saved_search_entries"
    __table_args__ = (
        Index("ix_saved_search_entries_search_time", "saved_search_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    saved_search_id: Mapped[int] = mapped_column(
        ForeignKey("saved_searches.id", ondelete="CASCADE")
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    kind: Mapped[str] = mapped_column(String(16))  # created | new_offers | price_drop
    title: Mapped[str] = mapped_column(String(300))
    summary: Mapped[str] = mapped_column(Text)
    offer_id: Mapped[int | None] = mapped_column(Integer)


class DataVersion(Base):
    """One row whose token changes on every ingest, so derived data (facet counts) can be cached."""

    __tablename__ = "data_version"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token: Mapped[str] = mapped_column(String(32))
    changed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class SpotAdvisorRow(Base):
    """One interruption-frequency band of a spot feed (AWS Spot Instance Advisor) for an
    instance type, region and OS; the whole provider's set is replaced on each fetch."""

    __tablename__ = "spot_advisor"
    __table_args__ = (
        UniqueConstraint(
            "provider_id", "region", "instance_type", "os", name="uq_spot_advisor_key"
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    provider_id: Mapped[str] = mapped_column(String(64))  # offers' provider id, e.g. "aws"
    region: Mapped[str] = mapped_column(String(64))
    instance_type: Mapped[str] = mapped_column(String(64))
    os: Mapped[str] = mapped_column(String(16))  # Linux | Windows
    band_index: Mapped[int] = mapped_column(Integer)
    band_label: Mapped[str] = mapped_column(String(16))  # e.g. "<5%", ">20%"
    band_max_pct: Mapped[float] = mapped_column(Float)  # the feed's `max` for the band
    savings_pct: Mapped[float | None] = mapped_column(Float)  # vs on-demand, trailing 30 days
    fetched_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class OfferChange(Base):
    """The change log: what each ingest did to each offer, written set-based in its transaction.

    Saved-search feeds read it (new offers, offers back in stock) instead of re-running every
    search after every scrape. Ids grow in commit order: ingests serialize on the data-version row
    and write their changes after taking it.
    """

    __tablename__ = "offer_changes"
    __table_args__ = (Index("ix_offer_changes_changed_at", "changed_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    offer_id: Mapped[int] = mapped_column(ForeignKey("offers.id", ondelete="CASCADE"))
    changed_at: Mapped[datetime] = mapped_column(UTCDateTime)
    kind: Mapped[str] = mapped_column(String(16))  # new | back | gone | price | availability
    price_before: Mapped[float | None] = mapped_column(Float)
    price_after: Mapped[float | None] = mapped_column(Float)
    spot_before: Mapped[float | None] = mapped_column(Float)
    spot_after: Mapped[float | None] = mapped_column(Float)
    availability_before: Mapped[str | None] = mapped_column(String(16))
    availability_after: Mapped[str | None] = mapped_column(String(16))


class SavedQuery(Base):
    """One distinct saved view (many searches may share it): its counts as of a data version and
    how far its feed has read the change log."""

    __tablename__ = "saved_queries"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    query: Mapped[str] = mapped_column(Text)
    version: Mapped[str | None] = mapped_column(String(32))  # data version of the counts
    computed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    match_count: Mapped[int] = mapped_column(Integer, default=0)
    best_price: Mapped[float | None] = mapped_column(Float)
    best_offer_id: Mapped[int | None] = mapped_column(Integer)
    checked_change_id: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class SavedQueryEntry(Base):
    """A feed entry of a canonical query (new matching offers, a lower best price, offers back
    in stock); every saved search of the query shows those made after it was saved."""

    __tablename__ = "saved_query_entries"
    __table_args__ = (Index("ix_saved_query_entries_key_time", "query_key", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    query_key: Mapped[str] = mapped_column(ForeignKey("saved_queries.key", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    kind: Mapped[str] = mapped_column(String(16))  # new_offers | price_drop | available
    title: Mapped[str] = mapped_column(String(300))
    summary: Mapped[str] = mapped_column(Text)
    offer_id: Mapped[int | None] = mapped_column(Integer)


class AggregateCache(Base):
    """Aggregates (counts, facets, machine shapes) computed for one data version, shared by every
    process: the ingesting worker writes them before its commit, so no replica's first request
    after a scrape computes them (app.store.data_cache)."""

    __tablename__ = "aggregate_cache"

    version: Mapped[str] = mapped_column(String(32), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(32), primary_key=True)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WarmView(Base):
    """A view people open (`/?<query>` or `/gpus/<slug>`, in `query`): warmed after each
    ingest (app.web.warm)."""

    __tablename__ = "warm_views"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    query: Mapped[str] = mapped_column(Text)
    last_used_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class GpuPricePoint(Base):
    """Each provider's cheapest and dearest listed on-demand price per GPU-hour of one GPU model
    at one ingest: the GPU page's price history, a few rows per scrape whatever the offer count
    (written set-based by app.pipeline.ingest)."""

    __tablename__ = "gpu_price_points"
    __table_args__ = (Index("ix_gpu_price_points_gpu_time", "gpu_model_slug", "observed_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    gpu_model_slug: Mapped[str] = mapped_column(String(64))
    provider_id: Mapped[str] = mapped_column(String(64))
    observed_at: Mapped[datetime] = mapped_column(UTCDateTime)
    min_price_per_gpu: Mapped[float] = mapped_column(Float)
    max_price_per_gpu: Mapped[float] = mapped_column(Float)
    offers: Mapped[int] = mapped_column(Integer)
