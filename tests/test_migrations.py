"""Migrations build the same schema on SQLite and Postgres, matching the ORM models."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, inspect, text
from sqlalchemy.types import TypeEngine

from app.store.db import make_engine
from app.store.migrate import downgrade, upgrade
from app.store.models import Base
from tests.conftest import PG_URL, scratch_postgres_url


def _generic_type(column_type: TypeEngine[Any]) -> str:
    """The generic SQL type (Float, String, ...) behind a dialect-specific reflected type."""
    affinity = column_type._type_affinity
    return (affinity or type(column_type)).__name__


def _index_names(engine: Engine, table: str) -> list[str]:
    """Every index's name from the catalog, expression indexes included.

    SQLAlchemy cannot reflect SQLite's expression indexes, so the names come from the catalog;
    unique-constraint indexes are left out (compared as uniques).
    """
    if engine.dialect.name == "sqlite":
        sql = (
            "SELECT name FROM sqlite_master "
            "WHERE type = 'index' AND tbl_name = :t AND sql IS NOT NULL"
        )
    else:
        sql = (
            "SELECT i.indexname FROM pg_indexes i WHERE i.tablename = :t AND NOT EXISTS "
            "(SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)"
        )
    with engine.connect() as conn:
        return sorted(conn.execute(text(sql), {"t": table}).scalars())


def schema_of(engine: Engine) -> dict[str, Any]:
    """A backend-neutral description: columns (name, generic type, nullable), indexes, uniques."""
    insp = inspect(engine)
    schema: dict[str, Any] = {}
    for table in sorted(insp.get_table_names()):
        columns = {
            c["name"]: (_generic_type(c["type"]), c["nullable"]) for c in insp.get_columns(table)
        }
        # Postgres also reports the index behind each unique constraint; those are compared
        # as uniques below.
        indexes = sorted(
            (i["name"], tuple(i["column_names"]))
            for i in insp.get_indexes(table)
            if not i.get("duplicates_constraint") and None not in i["column_names"]
        )
        uniques = sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(table))
        fks = sorted(
            (tuple(f["constrained_columns"]), f["referred_table"])
            for f in insp.get_foreign_keys(table)
        )
        schema[table] = {
            "columns": columns,
            "indexes": indexes,
            "all_index_names": _index_names(engine, table),
            "uniques": uniques,
            "fks": fks,
        }
    return schema


def _expression_text(index: Any) -> str:
    """An index's expressions, lower-cased without spaces, parentheses, casts or table prefix
    (Postgres prints a number it casts as a quoted string: '-1.0'::numeric::double precision)."""
    text_ = " ".join(str(e) for e in index.expressions).lower().replace("offers.", "")
    text_ = re.sub(r"::[a-z ]+", "", text_)
    text_ = re.sub(r"'(-?[0-9.]+)'", r"\1", text_)
    return re.sub(r"[\s()]", "", text_)


def _real_differences(diff: list[Any]) -> list[Any]:
    """The diff minus index pairs (dropped and re-added under one name) with equal expressions.

    Alembic compares Postgres' pretty-printed CASE expressions (with newlines) as text, so an
    index on a CASE expression always looks changed; this compares them with spaces removed.
    """
    removed = {d[1].name: d[1] for d in diff if d[0] == "remove_index"}
    added = {d[1].name: d[1] for d in diff if d[0] == "add_index"}
    same = {
        name
        for name in removed.keys() & added.keys()
        if _expression_text(removed[name]) == _expression_text(added[name])
    }
    return [d for d in diff if not (d[0] in ("remove_index", "add_index") and d[1].name in same)]


def _fresh_sqlite(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgrade(url)
    return url


def test_migrated_schema_matches_models(tmp_path: Path) -> None:
    engine = make_engine(_fresh_sqlite(tmp_path))
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert diff == [], f"models and migrations disagree: {diff}"


def test_downgrade_to_base_removes_everything(tmp_path: Path) -> None:
    url = _fresh_sqlite(tmp_path)
    downgrade(url, "base")
    engine = make_engine(url)
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    engine.dispose()
    upgrade(url)  # and back up again


@pytest.mark.skipif(not PG_URL, reason="set GPUFIT_TEST_DATABASE_URL to compare with Postgres")
def test_sqlite_and_postgres_schemas_are_the_same(tmp_path: Path) -> None:
    sqlite_engine = make_engine(_fresh_sqlite(tmp_path))
    pg_url = scratch_postgres_url("migrations")
    upgrade(pg_url)
    pg_engine = make_engine(pg_url)
    try:
        assert schema_of(sqlite_engine) == schema_of(pg_engine)
        with pg_engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
            assert _real_differences(diff) == []
    finally:
        sqlite_engine.dispose()
        pg_engine.dispose()
