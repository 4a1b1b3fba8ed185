"""The fit engine against published runs: peak memory and throughput, per case and in the median.

Tolerances are the issue's acceptance: memory every case within 20% and the median within 10%;
throughput every case within 25% and the median within 12%. Cases left out carry their reason in
the YAML and are shown (not asserted) by `python -m app.fit.validation`.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.fit.stacks import STACK_IDS
from app.fit.validation import (
    MEMORY_MEDIAN_TOLERANCE,
    MEMORY_TOLERANCE,
    THROUGHPUT_MEDIAN_TOLERANCE,
    THROUGHPUT_TOLERANCE,
    format_table,
    load_measurements,
    load_throughput,
    measured_gib,
    measured_tokens_per_s_per_gpu,
    report,
    summarize,
    throughput_rows,
    validate_entry,
    validate_throughput,
    validation_rows,
)

MEMORY = load_measurements()
THROUGHPUT = load_throughput()


def _asserted(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if not e.get("exclude")]


def _ids(entries: list[dict[str, Any]]) -> list[str]:
    return [e["id"] for e in entries]


def test_enough_published_memory_cases_over_five_stacks() -> None:
    used = _asserted(MEMORY)
    assert len(used) >= 40
    assert len({e["workload"].get("stack", "hf") for e in used}) >= 5


def test_enough_published_throughput_cases() -> None:
    assert len(_asserted(THROUGHPUT)) >= 20


@pytest.mark.parametrize("entry", MEMORY + THROUGHPUT, ids=_ids(MEMORY + THROUGHPUT))
def test_every_case_names_its_source_and_settings(entry: dict[str, Any]) -> None:
    assert entry["source"].startswith("https://")
    assert entry["quote"] and entry["note"]
    assert entry["unit"] in {
        "GB",
        "GiB",
        "MiB",
        "card_GB",
        "tokens_per_s_per_gpu",
        "seconds",
        "seconds_per_step",
    }
    assert entry["workload"].get("stack", "hf") in STACK_IDS
    if entry.get("exclude"):
        assert len(entry["exclude"]) > 40  # a reason, not a flag


def test_ids_are_unique() -> None:
    ids = _ids(MEMORY + THROUGHPUT)
    assert len(ids) == len(set(ids))


def test_units_are_converted_explicitly() -> None:
    assert measured_gib({"id": "x", "measured": 1.0, "unit": "GB"}) == pytest.approx(0.931, 1e-3)
    assert measured_gib({"id": "x", "measured": 2048, "unit": "MiB"}) == 2.0
    run = {"id": "x", "measured": 100.0, "unit": "seconds", "tokens": 1000, "workload": {"gpus": 2}}
    assert measured_tokens_per_s_per_gpu(run) == 5.0
    with pytest.raises(ValueError, match="unknown unit"):
        measured_gib({"id": "x", "measured": 1.0, "unit": "TB"})


@pytest.mark.parametrize("entry", _asserted(MEMORY), ids=_ids(_asserted(MEMORY)))
def test_memory_case_within_tolerance(entry: dict[str, Any]) -> None:
    row = validate_entry(entry)
    assert abs(row.error) <= MEMORY_TOLERANCE, format_table([row])


@pytest.mark.parametrize("entry", _asserted(THROUGHPUT), ids=_ids(_asserted(THROUGHPUT)))
def test_throughput_case_within_tolerance(entry: dict[str, Any]) -> None:
    row = validate_throughput(entry)
    assert abs(row.error) <= THROUGHPUT_TOLERANCE, format_table([row])


def test_medians_within_tolerance() -> None:
    memory = summarize("memory", validation_rows())
    speed = summarize("throughput", throughput_rows())
    assert memory.median_abs_error <= MEMORY_MEDIAN_TOLERANCE, memory.line()
    assert speed.median_abs_error <= THROUGHPUT_MEDIAN_TOLERANCE, speed.line()


def test_report_ends_with_the_summary_line() -> None:
    text = report()
    last = text.splitlines()[-1]
    assert last.startswith("summary: memory: ") and "throughput: " in last
    print("\n" + text)  # shown with pytest -s
