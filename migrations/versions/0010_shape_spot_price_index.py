"""Index for the plan ranking: each machine shape's listings with both prices, by spot price.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03

With market=any a listing that has an on-demand and a spot price is ranked at the lower
expected total of the two (app.queries.shapes). The ranking reads each candidate shape's offers
under a price ceiling: by the listing's own price through ix_offers_active_shape_job_price,
and by the spot price of listings that have both through this partial index. Without it every
such shape is read whole (8B QLoRA at 100k offers on Postgres: ~5,200 -> ~400 buffers).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Must stay the expressions and predicate of app.store.models (the NULL stand-ins, the paired
# spot price).
PAIRED_SPOT = sa.text("spot IS false AND spot_price_per_hour IS NOT NULL")


def upgrade() -> None:
    op.create_index(
        "ix_offers_active_shape_spot_price",
        "offers",
        [
            sa.column("active"),
            sa.text("coalesce(gpu_model_slug, '')"),
            sa.column("gpu_count"),
            sa.column("vram_gib_per_gpu"),
            sa.column("interconnect"),
            sa.column("network"),
            sa.text("coalesce(network_gbps, -1.0)"),
            sa.column("billing"),
            sa.column("availability"),
            sa.column("spot_price_per_hour"),
        ],
        postgresql_where=PAIRED_SPOT,
        sqlite_where=PAIRED_SPOT,
    )


def downgrade() -> None:
    op.drop_index("ix_offers_active_shape_spot_price", table_name="offers")
