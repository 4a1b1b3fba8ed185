"""spot_advisor: interruption-frequency bands per provider, region, instance type and OS.

Revision ID: 0009
Revises: 0005
Create Date: 2026-12-03

Filled by the AWS Spot Instance Advisor side feed (scrapers/spot_advisor.py); read by the spot
risk functions in app/fit/market.py.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.store.models

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "spot_advisor",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("provider_id", sa.String(length=64), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("instance_type", sa.String(length=64), nullable=False),
        sa.Column("os", sa.String(length=16), nullable=False),
        sa.Column("band_index", sa.Integer(), nullable=False),
        sa.Column("band_label", sa.String(length=16), nullable=False),
        sa.Column("band_max_pct", sa.Float(), nullable=False),
        sa.Column("savings_pct", sa.Float(), nullable=True),
        sa.Column("fetched_at", app.store.models.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_spot_advisor")),
        sa.UniqueConstraint(
            "provider_id", "region", "instance_type", "os", name="uq_spot_advisor_key"
        ),
    )


def downgrade() -> None:
    op.drop_table("spot_advisor")
