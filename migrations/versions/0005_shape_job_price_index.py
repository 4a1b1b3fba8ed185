"""Index for the fit ranking: each machine shape's offers in job-price order.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

The ranking joins the candidate machine shapes to offers and keeps those under a per-shape
price ceiling (app.queries ranking). Every shape column is matched by equality, so with all of
them in the index each shape is one range scan over exactly its own offers; with only the
first four, shapes that share a GPU, count and VRAM each rescan all of their offers (70B full
fine-tuning at 100k offers on Postgres: 18 shapes x 2,195 rows, 21.6 -> 5.1 ms).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Must stay the expressions of app.store.models (job_price_sql(use_spot=False), the NULL stand-ins).
JOB_PRICE = sa.text(
    "(CASE WHEN (spot IS true) THEN coalesce(spot_price_per_hour, price_per_hour) "
    "ELSE price_per_hour END)"
)


def upgrade() -> None:
    op.create_index(
        "ix_offers_active_shape_job_price",
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
            sa.column("spot"),
            sa.column("availability"),
            JOB_PRICE,
        ],
    )


def downgrade() -> None:
    op.drop_index("ix_offers_active_shape_job_price", table_name="offers")
