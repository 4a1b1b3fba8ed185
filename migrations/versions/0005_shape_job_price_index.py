"""Index for the fit ranking: each machine shape's offers in job-price order.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

The ranking joins a few dozen candidate shapes to offers and keeps those under a per-shape
price ceiling (app.queries._ranked_ids). With this index that is one short range scan per
shape instead of a scan of every offer: 8B QLoRA at 100k offers on Postgres, 45 -> 1.6 ms.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Must stay the expression app.models.job_price_sql(use_spot=False) renders.
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
            JOB_PRICE,
        ],
    )


def downgrade() -> None:
    op.drop_index("ix_offers_active_shape_job_price", table_name="offers")
