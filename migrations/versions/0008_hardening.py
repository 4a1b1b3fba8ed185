"""scrape_runs.heartbeat_at: a running scrape's last sign of life, so runs left "running" by a
process that died are closed within one interval instead of an hour.

Revision ID: 0008
Revises: 0005
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.store.models

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("scrape_runs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("heartbeat_at", app.store.models.UTCDateTime(timezone=True), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("scrape_runs", schema=None) as batch_op:
        batch_op.drop_column("heartbeat_at")
