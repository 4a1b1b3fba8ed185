"""saved search feed: per-search state (best price, last check) and Atom entries

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 15:40:56.543651
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.store.models

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "saved_search_entries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("saved_search_id", sa.Integer(), nullable=False),
        sa.Column("created_at", app.store.models.UTCDateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("title", sa.String(length=300), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("offer_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["saved_search_id"],
            ["saved_searches.id"],
            name=op.f("fk_saved_search_entries_saved_search_id_saved_searches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_saved_search_entries")),
    )
    with op.batch_alter_table("saved_search_entries", schema=None) as batch_op:
        batch_op.create_index(
            "ix_saved_search_entries_search_time", ["saved_search_id", "created_at"], unique=False
        )

    op.create_table(
        "saved_search_state",
        sa.Column("saved_search_id", sa.Integer(), nullable=False),
        sa.Column("checked_at", app.store.models.UTCDateTime(timezone=True), nullable=False),
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


def downgrade() -> None:
    op.drop_table("saved_search_state")
    with op.batch_alter_table("saved_search_entries", schema=None) as batch_op:
        batch_op.drop_index("ix_saved_search_entries_search_time")

    op.drop_table("saved_search_entries")
