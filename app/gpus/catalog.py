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

    @model_validator(mode="after")
    def _usable_not_above_marketed(self) -> _Entry:
        # vram_gib feeds fit math; a value above the marketed size means a unit mix-up.
        if self.vram_gib > self.vram_gb * 1.08:
            raise ValueError(f"vram_gib {self.vram_gib} exceeds marketed {self.vram_gb} GB")
        return self


class CatalogError(ValueError):
    """The packaged GPU catalog file is malformed."""


def _parse(raw: Any) -> dict[str, GpuSpec]:
    if not isinstance(raw, dict) or not isinstance(raw.get("gpus"), list):
        raise CatalogError("gpus.yaml must be a mapping with a 'gpus' list")
    out: dict[str, GpuSpec] = {}
    for i, item in enumerate(raw["gpus"]):
        try:
            entry = _Entry.model_validate(item)
        except ValidationError as exc:
            label = item.get("slug", f"#{i}") if isinstance(item, dict) else f"#{i}"
            raise CatalogError(f"gpus.yaml entry {label}: {exc}") from exc
        if entry.slug in out:
            raise CatalogError(f"gpus.yaml: duplicate slug {entry.slug!r}")
        if entry.slug == UNKNOWN:
            raise CatalogError(f"gpus.yaml: {UNKNOWN!r} is reserved")
        out[entry.slug] = GpuSpec(**entry.model_dump())
    return out


@functools.cache
def load_catalog() -> dict[str, GpuSpec]:
    """Load and validate the packaged catalog; raises CatalogError on a bad file."""
    text = resources.files("app").joinpath("data/gpus.yaml").read_text(encoding="utf-8")
    return _parse(yaml.safe_load(text))


def get_gpu(slug: str) -> GpuSpec | None:
    """Return the spec for a canonical slug, or None if the slug is not in the catalog."""
    return load_catalog().get(slug)
