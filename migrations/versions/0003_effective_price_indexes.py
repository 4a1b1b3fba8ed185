"""Expression indexes for the default sort (hourly price per GPU, spot where no on-demand).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02

bench/results.md measured the default first page at 100k offers: 68 -> 6 ms on Postgres.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PRICE = sa.text("(coalesce(price_per_hour, spot_price_per_hour) / gpu_count)")


def upgrade() -> None:
    op.create_index(
        "ix_offers_active_effective_price", "offers", [sa.column("active"), PRICE, sa.column("id")]
    )
    op.create_index(
        "ix_offers_active_gpu_effective_price",
        "offers",
        [sa.column("active"), sa.column("gpu_model_slug"), PRICE, sa.column("id")],
    )


def downgrade() -> None:
    op.drop_index("ix_offers_active_gpu_effective_price", table_name="offers")
    op.drop_index("ix_offers_active_effective_price", table_name="offers")
