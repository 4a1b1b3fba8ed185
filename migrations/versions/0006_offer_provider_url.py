"""Offers link to the provider's page for the instance type (or its pricing page).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03

Filled at ingest from the record (a feed's own link) or the provider's facts (an instance-type
URL template, else the pricing page), so every offer has a way to rent it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("offers", sa.Column("provider_url", sa.String(length=500), nullable=True))


def downgrade() -> None:
    # Plain DROP COLUMN (SQLite >= 3.35, Postgres): a batch table rebuild would lose the
    # expression indexes of 0003/0005, which SQLAlchemy cannot reflect on SQLite.
    op.execute("ALTER TABLE offers DROP COLUMN provider_url")
