"""Compare the memory model with published peak-memory measurements (data/measurements.yaml)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from app.fit.memory import GIB, per_gpu_breakdown
from app.fit.topology import CARD_USABLE_GIB
from app.fit.workload import Workload, resolve_model

TOLERANCE = 0.25


@dataclass(frozen=True)
class ValidationRow:
    """One measurement next to the estimate of the same quantity."""

    id: str
    metric: str
    measured_gib: float
    estimated_gib: float
    source: str
    excluded: str | None = None

    @property
    def error(self) -> float:
        """Relative error of the estimate (positive = over-estimate)."""
        return (self.estimated_gib - self.measured_gib) / self.measured_gib


@lru_cache(maxsize=1)
def load_measurements() -> list[dict[str, Any]]:
    """The raw measurement entries."""
    text = resources.files("app.fit").joinpath("data/measurements.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, list):
        raise RuntimeError("measurements.yaml must be a list")
    return data


def _measured_gib(entry: dict[str, Any]) -> float:
    value = float(entry["measured"])
    unit = entry["unit"]
    if unit == "GB":
        return value * 1e9 / GIB
    if unit == "GiB":
        return value
    if unit == "MiB":
        return value / 1024
    if unit == "card_GB":
        return CARD_USABLE_GIB[int(value)]
    raise ValueError(f"unknown unit {unit!r} in {entry['id']}")


def validate_entry(entry: dict[str, Any]) -> ValidationRow:
    """Estimate one measurement's setting and pick the matching quantity."""
    workload = Workload(**entry["workload"])
    arch = resolve_model(workload)
    bd = per_gpu_breakdown(workload, arch, workload.gpus, workload.sharding)
    metric = entry["metric"]
    estimated = {
        "allocated": bd.allocated_gib,
        "reserved": bd.reserved_gib,
        "card": bd.total_gib,
    }[metric]
    return ValidationRow(
        entry["id"],
        metric,
        _measured_gib(entry),
        estimated,
        entry["source"],
        entry.get("exclude"),
    )


def validation_rows() -> list[ValidationRow]:
    """All measurements with their estimates."""
    return [validate_entry(e) for e in load_measurements()]


def format_table(rows: list[ValidationRow]) -> str:
    """A plain-text measured-vs-estimated table."""
    lines = [f"{'measurement':40} {'metric':9} {'measured':>9} {'estimate':>9} {'error':>7}"]
    for r in rows:
        lines.append(
            f"{r.id:40} {r.metric:9} {r.measured_gib:8.2f}G {r.estimated_gib:8.2f}G "
            f"{r.error * 100:+6.1f}%" + ("  (excluded, see yaml)" if r.excluded else "")
        )
    return "\n".join(lines)


if __name__ == "__main__":  # python -m app.fit.validation
    import sys

    sys.stdout.write(format_table(validation_rows()) + "\n")
