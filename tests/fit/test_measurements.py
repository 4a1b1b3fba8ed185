"""The estimator against published peak-memory measurements (app/fit/data/measurements.yaml)."""

from __future__ import annotations

import pytest

from app.fit.validation import (
    TOLERANCE,
    format_table,
    load_measurements,
    validate_entry,
    validation_rows,
)

ENTRIES = load_measurements()


def test_enough_measurements() -> None:
    assert sum(1 for e in ENTRIES if not e.get("exclude")) >= 15
    for e in ENTRIES:
        assert e["source"].startswith("https://") and e["quote"] and e["note"]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_within_tolerance(entry: dict[str, object]) -> None:
    if entry.get("exclude"):
        pytest.skip(str(entry["exclude"]))
    row = validate_entry(entry)  # type: ignore[arg-type]
    assert abs(row.error) <= TOLERANCE, format_table([row])


def test_print_table() -> None:
    print("\n" + format_table(validation_rows()))  # shown with pytest -s
