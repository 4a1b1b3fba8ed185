"""The fit engine against published runs: peak memory (data/measurements.yaml) and training
throughput (data/throughput.yaml). `python -m app.fit.validation` prints every case and a summary.

Units are converted here, explicitly: memory to GiB (GB = 1e9 bytes, MiB = 2^20), throughput to
tokens per second per GPU (a run's wall time over its tokens and GPUs).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from app.fit.hardware import Links, gpu_facts
from app.fit.memory import GIB, per_gpu_breakdown
from app.fit.throughput import training_time
from app.fit.topology import CARD_USABLE_GIB
from app.fit.workload import Workload, resolve_model

MEMORY_TOLERANCE = 0.20
MEMORY_MEDIAN_TOLERANCE = 0.10
THROUGHPUT_TOLERANCE = 0.25
THROUGHPUT_MEDIAN_TOLERANCE = 0.12


@dataclass(frozen=True)
class ValidationRow:
    """One published measurement next to the estimate of the same quantity."""

    id: str
    kind: str  # memory | throughput
    metric: str
    measured: float
    estimated: float
    unit: str
    stack: str
    source: str
    excluded: str | None = None

    @property
    def error(self) -> float:
        """Relative error of the estimate (positive = over-estimate)."""
        return (self.estimated - self.measured) / self.measured


def _load(name: str) -> list[dict[str, Any]]:
    text = resources.files("app.fit").joinpath(f"data/{name}").read_text("utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, list):
        raise RuntimeError(f"{name} must be a list")
    return data


@lru_cache(maxsize=1)
def load_measurements() -> list[dict[str, Any]]:
    """The raw peak-memory entries."""
    return _load("measurements.yaml")


@lru_cache(maxsize=1)
def load_throughput() -> list[dict[str, Any]]:
    """The raw throughput entries."""
    return _load("throughput.yaml")


def measured_gib(entry: dict[str, Any]) -> float:
    """A memory measurement in GiB."""
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


def measured_tokens_per_s_per_gpu(entry: dict[str, Any]) -> float:
    """A throughput measurement in tokens per second per GPU."""
    value = float(entry["measured"])
    unit = entry["unit"]
    gpus = int(entry["workload"].get("gpus", 1))
    if unit == "tokens_per_s_per_gpu":
        return value
    if unit in ("seconds", "seconds_per_step"):
        return float(entry["tokens"]) / value / gpus
    raise ValueError(f"unknown unit {unit!r} in {entry['id']}")


def validate_entry(entry: dict[str, Any]) -> ValidationRow:
    """Estimate one memory measurement's setting and pick the matching quantity."""
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
        "memory",
        metric,
        measured_gib(entry),
        estimated,
        "GiB",
        workload.stack,
        entry["source"],
        entry.get("exclude"),
    )


def validate_throughput(entry: dict[str, Any]) -> ValidationRow:
    """Estimate one throughput measurement's run on its GPU and links."""
    workload = Workload(**entry["workload"])
    arch = resolve_model(workload)
    gpu = gpu_facts(entry["gpu"])
    if gpu is None:
        raise ValueError(f"{entry['id']}: GPU {entry['gpu']!r} is not in the catalog")
    links = Links(**entry["links"])
    if links.gpus != workload.gpus:
        raise ValueError(f"{entry['id']}: links give {links.gpus} GPUs, workload {workload.gpus}")
    time = training_time(workload, arch, gpu, links)
    if time is None:
        raise ValueError(f"{entry['id']}: no time for {workload.precision} on {entry['gpu']}")
    return ValidationRow(
        entry["id"],
        "throughput",
        "tokens/s/GPU",
        measured_tokens_per_s_per_gpu(entry),
        time.tokens_per_s_per_gpu,
        "tok/s",
        workload.stack,
        entry["source"],
        entry.get("exclude"),
    )


def validation_rows() -> list[ValidationRow]:
    """All memory measurements with their estimates."""
    return [validate_entry(e) for e in load_measurements()]


def throughput_rows() -> list[ValidationRow]:
    """All throughput measurements with their estimates."""
    return [validate_throughput(e) for e in load_throughput()]


def format_table(rows: list[ValidationRow]) -> str:
    """A plain-text measured-vs-estimated table."""
    head = f"{'case':44} {'stack':10} {'metric':12} {'measured':>10} {'estimate':>10}"
    lines = [f"{head} {'error':>7}"]
    for r in rows:
        lines.append(
            f"{r.id:44} {r.stack:10} {r.metric:12} {r.measured:10.2f} {r.estimated:10.2f} "
            f"{r.error * 100:+6.1f}%" + ("  (left out, see yaml)" if r.excluded else "")
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class Summary:
    """Error statistics over the asserted (not left out) cases of one kind."""

    kind: str
    cases: int
    stacks: int
    median_abs_error: float
    max_abs_error: float
    left_out: int

    def line(self) -> str:
        """e.g. 'memory: 52 cases over 6 stacks, median |error| 7.2%, max 18.7% (13 left out)'."""
        return (
            f"{self.kind}: {self.cases} cases over {self.stacks} stacks, median |error| "
            f"{self.median_abs_error * 100:.1f}%, max {self.max_abs_error * 100:.1f}% "
            f"({self.left_out} left out)"
        )


def summarize(kind: str, rows: list[ValidationRow]) -> Summary:
    """Statistics over the rows that are asserted."""
    used = [r for r in rows if not r.excluded]
    errors = [abs(r.error) for r in used] or [0.0]
    return Summary(
        kind=kind,
        cases=len(used),
        stacks=len({r.stack for r in used}),
        median_abs_error=statistics.median(errors),
        max_abs_error=max(errors),
        left_out=len(rows) - len(used),
    )


def report() -> str:
    """Both tables and the summary line."""
    memory, speed = validation_rows(), throughput_rows()
    return "\n".join(
        [
            "Peak memory (GiB)",
            format_table(memory),
            "",
            "Throughput (tokens/s per GPU)",
            format_table(speed),
            "",
            "summary: "
            + summarize("memory", memory).line()
            + "; "
            + summarize("throughput", speed).line(),
        ]
    )


if __name__ == "__main__":  # python -m app.fit.validation
    import sys

    sys.stdout.write(report() + "\n")
