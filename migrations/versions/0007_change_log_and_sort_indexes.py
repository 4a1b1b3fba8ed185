"""Offer change log, shared saved-query state, shared aggregate cache, sort indexes.

Revision ID: 0007
Revises: 0005
Create Date: 2026-12-03

- offer_changes: what each ingest did to each offer (new, back, gone, price, availability),
  written set-based in the ingest's transaction; saved-search feeds read it instead of re-running
  every search after every scrape.
- saved_queries / saved_query_entries: one row per distinct saved view (canonical query key) with
  its counts as of a data version and its feed entries; saved_searches.query_key points at it.
  saved_search_state (per search) is folded into saved_queries.
- aggregate_cache: counts, facets and machine shapes per data version, written by the ingesting
  worker before its commit so every process's first request after a scrape reads them.
- warm_views: the table views people open, warmed after each ingest.
- gpu_price_points: per ingest, each provider's cheapest and dearest listed price per GPU-hour
  of each GPU model (the GPU page's chart), seeded from the recorded price history.
- Indexes for the sorts the table offers besides the default one (price, most VRAM, newest, the
  spot market's price per GPU-hour); on Postgres the default order's index also covers its
  expression's columns, so a deep offset of it is an index-only scan.
"""

import hashlib
from collections.abc import Sequence
from urllib.parse import parse_qsl, urlencode

import sqlalchemy as sa
from alembic import op

import app.store.models

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A frozen copy of app.saved.query_key as it was when this migration was written.
_LIST_KEYS = frozenset(
    {"gpu", "vendor", "provider", "continent", "region", "gpu_count", "interconnect", "network",
     "billing", "availability"}
)  # fmt: skip
_IGNORED = frozenset({"offset", "limit", "after", "sort"})


def _query_key(query: str) -> str:
    seen: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    for key, value in parse_qsl(query.lstrip("?"), keep_blank_values=False):
        value = value.strip()
        if key in _IGNORED or not value:
            continue
        if key in _LIST_KEYS:
            pairs.add((key, value))
        elif key not in seen:
            seen.add(key)
            pairs.add((key, value))
    return hashlib.sha256(urlencode(sorted(pairs)).encode()).hexdigest()


PRICE = sa.text("coalesce(price_per_hour, spot_price_per_hour)")
PRICE_PER_GPU = sa.text("(coalesce(price_per_hour, spot_price_per_hour) / gpu_count)")
VRAM_DESC = sa.text("coalesce(vram_gib_total, -1.0) DESC")
SPOT_PER_GPU = sa.text("(spot_price_per_hour / gpu_count)")
COVERED = ["price_per_hour", "spot_price_per_hour", "gpu_count"]


def upgrade() -> None:
    utc = app.store.models.UTCDateTime(timezone=True)
    op.create_table(
        "offer_changes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("offer_id", sa.Integer(), nullable=False),
        sa.Column("changed_at", utc, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("price_before", sa.Float(), nullable=True),
        sa.Column("price_after", sa.Float(), nullable=True),
        sa.Column("spot_before", sa.Float(), nullable=True),
        sa.Column("spot_after", sa.Float(), nullable=True),
        sa.Column("availability_before", sa.String(length=16), nullable=True),
        sa.Column("availability_after", sa.String(length=16), nullable=True),
        sa.ForeignKeyConstraint(
            ["offer_id"],
            ["offers.id"],
            name=op.f("fk_offer_changes_offer_id_offers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_offer_changes")),
    )
    op.create_index("ix_offer_changes_changed_at", "offer_changes", ["changed_at"])

    saved_queries = op.create_table(
        "saved_queries",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("version", sa.String(length=32), nullable=True),
        sa.Column("computed_at", utc, nullable=True),
        sa.Column("match_count", sa.Integer(), nullable=False),
        sa.Column("best_price", sa.Float(), nullable=True),
        sa.Column("best_offer_id", sa.Integer(), nullable=True),
        sa.Column("checked_change_id", sa.Integer(), nullable=False),
        sa.Column("created_at", utc, nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_saved_queries")),
    )
    op.create_table(
        "saved_query_entries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("query_key", sa.String(length=64), nullable=False),
        sa.Column("created_at", utc, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("title", sa.String(length=300), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("offer_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["query_key"],
            ["saved_queries.key"],
            name=op.f("fk_saved_query_entries_query_key_saved_queries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_saved_query_entries")),
    )
    op.create_index(
        "ix_saved_query_entries_key_time", "saved_query_entries", ["query_key", "created_at"]
    )

    # Every existing search gets its canonical key; each distinct key one saved_queries row,
    # seeded with a state of one of its searches so price-drop entries continue from it.
    # Added NOT NULL with a default, then filled: a batch (copy-and-rename) rebuild of
    # saved_searches on SQLite would cascade-delete its feed entries when the old table drops.
    op.add_column(
        "saved_searches",
        sa.Column("query_key", sa.String(length=64), nullable=False, server_default=""),
    )
    conn = op.get_bind()
    searches = conn.execute(
        sa.text(
            "SELECT s.id, s.query, s.created_at, st.best_price, st.best_offer_id, "
            "st.match_count FROM saved_searches s "
            "LEFT JOIN saved_search_state st ON st.saved_search_id = s.id ORDER BY s.id"
        )
    ).all()
    seeded: dict[str, dict[str, object]] = {}
    now = app.store.models.utcnow()
    for search_id, query, _created, best_price, best_offer_id, match_count in searches:
        key = _query_key(query)
        conn.execute(
            sa.text("UPDATE saved_searches SET query_key = :k WHERE id = :i"),
            {"k": key, "i": search_id},
        )
        if key not in seeded:
            seeded[key] = {
                "key": key,
                "query": query,
                "version": None,
                "computed_at": None,
                "match_count": match_count or 0,
                "best_price": best_price,
                "best_offer_id": best_offer_id,
                "checked_change_id": 0,
                "created_at": now,
            }
    if seeded:
        op.bulk_insert(saved_queries, list(seeded.values()))
    if conn.dialect.name == "postgresql":  # SQLite cannot drop a default without a rebuild
        op.alter_column("saved_searches", "query_key", server_default=None)
    op.create_index("ix_saved_searches_query_key", "saved_searches", ["query_key"])
    op.drop_table("saved_search_state")

    op.create_table(
        "aggregate_cache",
        sa.Column("version", sa.String(length=32), nullable=False),
        sa.Column("namespace", sa.String(length=32), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("created_at", utc, nullable=False),
        sa.PrimaryKeyConstraint("version", "namespace", "key", name=op.f("pk_aggregate_cache")),
    )
    op.create_table(
        "warm_views",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("last_used_at", utc, nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_warm_views")),
    )

    op.create_table(
        "gpu_price_points",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("gpu_model_slug", sa.String(length=64), nullable=False),
        sa.Column("provider_id", sa.String(length=64), nullable=False),
        sa.Column("observed_at", utc, nullable=False),
        sa.Column("min_price_per_gpu", sa.Float(), nullable=False),
        sa.Column("max_price_per_gpu", sa.Float(), nullable=False),
        sa.Column("offers", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpu_price_points")),
    )
    op.create_index(
        "ix_gpu_price_points_gpu_time", "gpu_price_points", ["gpu_model_slug", "observed_at"]
    )
    # Seeded from the recorded history: per provider and observation, the range of the prices
    # recorded then (what the GPU page drew before this table existed).
    op.execute(
        "INSERT INTO gpu_price_points (gpu_model_slug, provider_id, observed_at, "
        "min_price_per_gpu, max_price_per_gpu, offers) "
        "SELECT o.gpu_model_slug, o.provider_id, h.observed_at, "
        "min(h.price_per_hour / o.gpu_count), max(h.price_per_hour / o.gpu_count), count(*) "
        "FROM price_history h JOIN offers o ON o.id = h.offer_id "
        "WHERE o.gpu_model_slug IS NOT NULL AND h.price_per_hour IS NOT NULL "
        "GROUP BY o.gpu_model_slug, o.provider_id, h.observed_at"
    )
    if conn.dialect.name == "postgresql":
        # The default order's index covers its expression's columns (index-only deep offsets).
        op.drop_index("ix_offers_active_effective_price", table_name="offers")
        op.create_index(
            "ix_offers_active_effective_price",
            "offers",
            [sa.column("active"), PRICE_PER_GPU, sa.column("id")],
            postgresql_include=COVERED,
        )
    op.create_index(
        "ix_offers_active_price_order", "offers", [sa.column("active"), PRICE, sa.column("id")]
    )
    op.create_index(
        "ix_offers_active_vram_order",
        "offers",
        [sa.column("active"), VRAM_DESC, PRICE_PER_GPU, sa.column("id")],
    )
    op.create_index(
        "ix_offers_active_newest",
        "offers",
        [sa.column("active"), sa.text("first_seen DESC"), sa.column("id")],
    )
    op.create_index(
        "ix_offers_active_spot_price_per_gpu",
        "offers",
        [sa.column("active"), SPOT_PER_GPU, sa.column("id")],
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_offers_active_effective_price", table_name="offers")
        op.create_index(
            "ix_offers_active_effective_price",
            "offers",
            [sa.column("active"), PRICE_PER_GPU, sa.column("id")],
        )
    op.drop_index("ix_gpu_price_points_gpu_time", table_name="gpu_price_points")
    op.drop_table("gpu_price_points")
    op.drop_index("ix_offers_active_spot_price_per_gpu", table_name="offers")
    op.drop_index("ix_offers_active_newest", table_name="offers")
    op.drop_index("ix_offers_active_vram_order", table_name="offers")
    op.drop_index("ix_offers_active_price_order", table_name="offers")
    op.drop_table("warm_views")
    op.drop_table("aggregate_cache")
    utc = app.store.models.UTCDateTime(timezone=True)
    state = op.create_table(
        "saved_search_state",
        sa.Column("saved_search_id", sa.Integer(), nullable=False),
        sa.Column("checked_at", utc, nullable=False),
        sa.Column("best_price", sa.Float(), nullable=True),
        sa.Column("best_offer_id", sa.Integer(), nullable=True),
        sa.Column("match_count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["saved_search_id"],
            ["saved_searches.id"],
            name=op.f("fk_saved_search_state_saved_search_id_saved_searches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("saved_search_id", name=op.f("pk_saved_search_state")),
    )
    conn = op.get_bind()
    rows = conn.execute(
        sa.text(
            "SELECT s.id, q.best_price, q.best_offer_id, q.match_count, q.computed_at "
            "FROM saved_searches s JOIN saved_queries q ON q.key = s.query_key"
        ).columns(computed_at=utc)
    ).all()
    now = app.store.models.utcnow()
    if rows:
        op.bulk_insert(
            state,
            [
                {
                    "saved_search_id": search_id,
                    "checked_at": computed_at or now,
                    "best_price": best_price,
                    "best_offer_id": best_offer_id,
                    "match_count": match_count,
                }
                for search_id, best_price, best_offer_id, match_count, computed_at in rows
            ],
        )
    op.drop_index("ix_saved_searches_query_key", table_name="saved_searches")
    # Native DROP COLUMN (SQLite 3.35+), no table rebuild (see upgrade).
    op.execute("ALTER TABLE saved_searches DROP COLUMN query_key")
    op.drop_index("ix_saved_query_entries_key_time", table_name="saved_query_entries")
    op.drop_table("saved_query_entries")
    op.drop_table("saved_queries")
    op.drop_index("ix_offer_changes_changed_at", table_name="offer_changes")
    op.drop_table("offer_changes")
