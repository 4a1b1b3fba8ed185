"""What would make a job fit more listings: each change to the workload re-run through the fit
engine over the same machine shapes, with the memory it saves and the listings it opens."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.fit import JobTerms, Workload, estimate_memory
from app.queries.assess import Assessor, vram_bounds
from app.queries.params import OfferFilters, filters_key
from app.queries.shapes import shape_groups
from app.store import data_cache

# Below this many fitting offers (a page's worth) the page suggests changes.
FEW_FITTING = 50


@dataclass(frozen=True)
class Suggestion:
    """One change to the workload, what it saves per GPU and how many more listings fit."""

    change: str  # in words
    params: dict[str, str]  # the query parameters that make it
    saves_gib: float  # per GPU, at the job's own GPU count and sharding
    fitting: int  # offers that fit with the change
    opens: int  # more than without it

    def as_dict(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "params": self.params,
            "saves_gib": round(self.saves_gib, 2),
            "fitting": self.fitting,
            "opens": self.opens,
        }


def _changes(workload: Workload) -> Iterator[tuple[str, dict[str, Any]]]:
    """Candidate changes: (words, Workload fields to update)."""
    if workload.method == "full":
        yield "LoRA instead of a full fine-tune", {"method": "lora"}
    if workload.method in ("full", "lora"):
        yield (
            "QLoRA (4-bit base) instead of "
            + ("a full fine-tune" if workload.method == "full" else "LoRA"),
            {"method": "qlora"},
        )
    if workload.sharding != "zero3":
        yield "ZeRO-3 (FSDP full shard) over the listing's GPUs", {"sharding": "zero3"}
    if not workload.grad_checkpointing:
        yield "gradient checkpointing on", {"grad_checkpointing": True}
    if workload.optimizer == "adamw":
        yield "8-bit AdamW (bitsandbytes)", {"optimizer": "adamw8bit"}
    if workload.batch_size > 1:
        yield (
            (
                f"micro-batch 1 with grad_accum {workload.grad_accum * workload.batch_size} "
                "(same batch per step)"
            ),
            {"batch_size": 1, "grad_accum": workload.grad_accum * workload.batch_size},
        )
    if workload.seq_len > 512:
        yield f"sequence length {workload.seq_len // 2}", {"seq_len": workload.seq_len // 2}
    if not workload.is_packed:
        yield "packed (fixed-length) batches: less allocator fragmentation", {"packed": True}
    if workload.stack == "hf":
        yield "Liger's fused cross-entropy (stack hf-liger)", {"stack": "hf-liger"}
    if workload.precision == "bf16":
        yield "fp16 instead of bf16 (opens V100 and T4)", {"precision": "fp16"}


def _query_value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def fitting_count(
    session: Session, filters: OfferFilters, workload: Workload, terms: JobTerms
) -> int:
    """Offers the job fits (margin or tight) among the filtered ones, deadline and budget aside."""
    assess = Assessor(workload, terms)
    bounds = vram_bounds(workload, assess.estimate)
    shapes = shape_groups(session, filters, bounds)
    return sum(shape.count for shape in shapes if assess(shape.facts).fits)


def suggestions(
    session: Session, filters: OfferFilters, workload: Workload, terms: JobTerms
) -> list[Suggestion]:
    """Changes that open listings, most opened first (cached until the data changes)."""

    def compute() -> list[Suggestion]:
        base_need = estimate_memory(workload).per_gpu_gib
        base = fitting_count(session, filters, workload, terms)
        out = []
        for words, update in _changes(workload):
            try:
                changed = Workload(**{**workload.model_dump(), **update})
            except ValidationError:
                continue
            count = fitting_count(session, filters, changed, terms)
            if count <= base:
                continue
            saves = base_need - estimate_memory(changed).per_gpu_gib
            params = {k: _query_value(v) for k, v in update.items()}
            out.append(Suggestion(words, params, saves, count, count - base))
        return sorted(out, key=lambda s: (-s.opens, -s.saves_gib, s.change))

    key = (filters_key(filters), workload.model_dump_json(), terms)
    return data_cache.cached(session, "suggestions", key, compute)
