"""estimate_memory: the per-GPU need of a workload as stated, plus the smallest layout that fits."""

from __future__ import annotations

from dataclasses import dataclass

from app.fit.memory import MemoryBreakdown, per_gpu_breakdown
from app.fit.presets import ModelArch
from app.fit.topology import (
    CARD_USABLE_GIB,
    MULTI_NODE,
    NODE,
    REFERENCE_CARD_GB,
    smallest_card_gb,
    smallest_layout,
)
from app.fit.workload import Workload, resolve_model


@dataclass(frozen=True)
class MemoryEstimate:
    """Per-GPU memory at the workload's own GPU count and sharding, and what it would take.

    `per_gpu_gib`/`breakdown`/`fits_gpu_gib` describe the job exactly as given (`gpus`,
    `sharding`). `gpus_needed`, `topology` and `layout_sharding` are the smallest layout on
    80 GB-class cards (see app.fit.topology); `gpus_needed` is None if even 1024 nodes fall short.
    """

    per_gpu_gib: float
    breakdown: MemoryBreakdown
    fits_gpu_gib: int | None
    topology: str
    gpus_needed: int | None
    layout_sharding: str | None
    layout_per_gpu_gib: float | None
    model_id: str
    model_name: str
    params_b: float
    train_tokens: float
    notes: tuple[str, ...]
    arch: ModelArch


def estimate_memory(workload: Workload) -> MemoryEstimate:
    """Estimate per-GPU training memory with breakdown, card size and minimal topology."""
    arch = resolve_model(workload)
    bd = per_gpu_breakdown(workload, arch, workload.gpus, workload.sharding)
    layout = smallest_layout(workload, arch)
    notes: list[str] = []
    if workload.model is None:
        notes.append(
            f"custom {workload.params_b:g}B model: assumed {arch.layers} layers, hidden "
            f"{arch.hidden}, {arch.heads} heads ({arch.kv_heads} KV), MLP {arch.intermediate}, "
            f"vocab {arch.vocab}"
        )
    if workload.gpus > 1 and workload.sharding == "none":
        notes.append("sharding=none with several GPUs is plain data parallel: no memory saving")
    if bd.logits_gib > 0.25 * bd.total_gib:
        notes.append(
            f"logits take {bd.logits_gib:.1f} GiB (vocab {arch.vocab}); a chunked or fused "
            "cross-entropy (Liger, Cut Cross Entropy) removes most of it"
        )
    ref = f"{REFERENCE_CARD_GB} GB"
    if layout is None:
        topology = MULTI_NODE
        notes.append(f"does not fit even 1024 nodes of 8x{ref} GPUs")
    else:
        topology = layout.topology
        if layout.topology == NODE:
            notes.append(
                f"needs {layout.gpus}x{ref} GPUs in one node with {layout.sharding}; "
                "NVLink/NVSwitch recommended (PCIe is a bottleneck for sharded training)"
            )
        elif layout.topology == MULTI_NODE:
            notes.append(
                f"needs {layout.gpus}x{ref} GPUs ({layout.gpus // 8} nodes) with "
                f"{layout.sharding}; needs InfiniBand/RoCE/EFA-class networking between nodes"
            )
    fits = smallest_card_gb(bd.total_gib)
    if fits is None:
        biggest = max(CARD_USABLE_GIB)
        notes.append(f"{bd.total_gib:.0f} GiB per GPU exceeds the largest card ({biggest} GB)")
    return MemoryEstimate(
        per_gpu_gib=bd.total_gib,
        breakdown=bd,
        fits_gpu_gib=fits,
        topology=topology,
        gpus_needed=layout.gpus if layout else None,
        layout_sharding=layout.sharding if layout else None,
        layout_per_gpu_gib=layout.breakdown.total_gib if layout else None,
        model_id=workload.model or "custom",
        model_name=arch.name,
        params_b=arch.params_b,
        train_tokens=workload.train_tokens(arch),
        notes=tuple(notes),
        arch=arch,
    )
