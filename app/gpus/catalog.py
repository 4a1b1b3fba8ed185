"""GPU spec catalog, loaded from the packaged ``app/data/gpus.yaml``."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

UNKNOWN = "unknown"

MemoryType = Literal["HBM2", "HBM2e", "HBM3", "HBM3e", "GDDR5", "GDDR6", "GDDR6X", "GDDR7"]
FormFactor = Literal["SXM", "PCIe", "NVL", "OAM", "unknown"]
Vendor = Literal["nvidia", "amd", "intel"]

# Above any shipping part's dense BF16 rate; a bigger number is almost certainly a sparse figure.
MAX_DENSE_TFLOPS = 2500.0


@dataclass(frozen=True)
class GpuSpec:
    """Specs of one canonical GPU model; throughput figures are dense (no sparsity)."""

    slug: str
    vendor: str
    name: str
    vram_gb: float
    vram_gib: float
    memory_type: str
    memory_bandwidth_gbps: float
    bf16_tflops: float | None
    fp16_tflops: float
    fp8: bool
    form_factor: str
    nvlink_gbps: float | None
    architecture: str
    source: str


@dataclass(frozen=True)
class GpuPerformance:
    """What training kernels reach on one GPU (the catalog's `performance` section + overrides)."""

    matmul_efficiency: float
    attention_efficiency: float
    pcie_gen: int
    p2p: bool
    source: str


class _Performance(BaseModel):
    """One architecture's row of the `performance` section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    matmul_efficiency: float = Field(gt=0, le=1)
    attention_efficiency: float = Field(gt=0, le=1)
    pcie_gen: int = Field(ge=1, le=7)
    source: str = Field(min_length=10)


_PERF_FIELDS = frozenset({"matmul_efficiency", "p2p", "perf_source"})


class _Entry(BaseModel):
    """Validation schema for one YAML entry; strict so typos in the file fail the load."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slug: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    vendor: Vendor
    name: str = Field(min_length=1)
    vram_gb: float = Field(gt=0)
    vram_gib: float = Field(gt=0)
    memory_type: MemoryType
    memory_bandwidth_gbps: float = Field(gt=0)
    bf16_tflops: float | None = Field(default=None, gt=0, le=MAX_DENSE_TFLOPS)
    fp16_tflops: float = Field(gt=0, le=MAX_DENSE_TFLOPS)
    fp8: bool
    form_factor: FormFactor
    nvlink_gbps: float | None = Field(default=None, gt=0)
    architecture: str = Field(pattern=r"^[a-z0-9]+$")
    source: str = Field(min_length=10)
    # Performance overrides of the architecture's row (kept out of GpuSpec and the database).
    matmul_efficiency: float | None = Field(default=None, gt=0, le=1)
    p2p: bool = True
    perf_source: str | None = None

    @model_validator(mode="after")
    def _usable_not_above_marketed(self) -> _Entry:
        # vram_gib feeds fit math; a value above the marketed size means a unit mix-up.
        if self.vram_gib > self.vram_gb * 1.08:
            raise ValueError(f"vram_gib {self.vram_gib} exceeds marketed {self.vram_gb} GB")
        if (self.matmul_efficiency is None) != (self.perf_source is None):
            raise ValueError("matmul_efficiency and perf_source go together")
        return self


class CatalogError(ValueError):
    """The packaged GPU catalog file is malformed."""


def _entries(raw: Any) -> list[_Entry]:
    if not isinstance(raw, dict) or not isinstance(raw.get("gpus"), list):
        raise CatalogError("gpus.yaml must be a mapping with a 'gpus' list")
    entries: list[_Entry] = []
    seen: set[str] = set()
    for i, item in enumerate(raw["gpus"]):
        try:
            entry = _Entry.model_validate(item)
        except ValidationError as exc:
            label = item.get("slug", f"#{i}") if isinstance(item, dict) else f"#{i}"
            raise CatalogError(f"gpus.yaml entry {label}: {exc}") from exc
        if entry.slug in seen:
            raise CatalogError(f"gpus.yaml: duplicate slug {entry.slug!r}")
        if entry.slug == UNKNOWN:
            raise CatalogError(f"gpus.yaml: {UNKNOWN!r} is reserved")
        seen.add(entry.slug)
        entries.append(entry)
    return entries


def _parse(raw: Any) -> dict[str, GpuSpec]:
    return {e.slug: GpuSpec(**e.model_dump(exclude=set(_PERF_FIELDS))) for e in _entries(raw)}


def _parse_performance(raw: Any) -> dict[str, GpuPerformance]:
    rows = raw.get("performance") if isinstance(raw, dict) else None
    if not isinstance(rows, dict):
        raise CatalogError("gpus.yaml must have a 'performance' mapping by architecture")
    try:
        families = {arch: _Performance.model_validate(row) for arch, row in rows.items()}
    except ValidationError as exc:
        raise CatalogError(f"gpus.yaml performance: {exc}") from exc
    out: dict[str, GpuPerformance] = {}
    for e in _entries(raw):
        family = families.get(e.architecture)
        if family is None:
            raise CatalogError(f"gpus.yaml: no performance row for architecture {e.architecture}")
        own = e.matmul_efficiency
        out[e.slug] = GpuPerformance(
            matmul_efficiency=own if own is not None else family.matmul_efficiency,
            attention_efficiency=family.attention_efficiency,
            pcie_gen=family.pcie_gen,
            p2p=e.p2p,
            source=(f"{e.perf_source}; " if own is not None else "") + family.source,
        )
    return out


@functools.cache
def _raw_catalog() -> Any:
    text = resources.files("app").joinpath("data/gpus.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


@functools.cache
def load_catalog() -> dict[str, GpuSpec]:
    """Load and validate the packaged catalog; raises CatalogError on a bad file."""
    return _parse(_raw_catalog())


@functools.cache
def load_performance() -> dict[str, GpuPerformance]:
    """Training-kernel efficiencies, PCIe generation and peer-to-peer support by slug."""
    return _parse_performance(_raw_catalog())


def get_performance(slug: str) -> GpuPerformance | None:
    """The GPU's training performance facts, or None for a slug not in the catalog."""
    return load_performance().get(slug)


def get_gpu(slug: str) -> GpuSpec | None:
    """Return the spec for a canonical slug, or None if the slug is not in the catalog."""
    return load_catalog().get(slug)
