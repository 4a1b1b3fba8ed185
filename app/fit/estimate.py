"""estimate_memory: the per-GPU need of a workload as stated, plus the smallest layout that fits."""

from __future__ import annotations

from dataclasses import dataclass

from app.fit.hardware import GpuFacts, Links, gpu_facts
from app.fit.memory import FRAG_PACKED, FRAG_VARIABLE, MemoryBreakdown, per_gpu_breakdown
from app.fit.presets import ModelArch
from app.fit.stacks import Stack
from app.fit.throughput import TimeEstimate, time_refusal, training_time
from app.fit.topology import (
    CARD_USABLE_GIB,
    MULTI_NODE,
    NODE,
    REFERENCE_CARD_GB,
    smallest_card_gb,
    smallest_layout,
)
from app.fit.workload import Workload, resolve_model
from app.gpus.catalog import get_gpu


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
    stack: Stack
    assumptions: tuple[str, ...] = ()


def stack_assumptions(workload: Workload, arch: ModelArch) -> list[str]:
    """What the estimate assumed about the stack and the data, in words."""
    stack = workload.stack_entry
    loss = {
        "upcast": f"the loss upcasts the logits to fp32 ({stack.logits_bytes:g} bytes per logit)",
        "chunked": f"a chunked loss ({stack.logits_bytes:g} bytes per logit)",
        "fused": "a fused linear cross-entropy (logits never materialised)",
    }[stack.loss]
    dtype = (
        "bf16 weights, gradients and optimizer states"
        if workload.uses_pure_16bit
        else "mixed precision with fp32 master weights and optimizer states"
    )
    if workload.pure_16bit is None and workload.precision != "fp32":
        dtype += " (the stack's default)"
    checkpointing = {
        "full": "per-layer activation checkpointing",
        "selective": "per-op selective activation checkpointing",
        "offloaded": "activation checkpointing with layer inputs offloaded to CPU memory",
    }[stack.checkpointing]
    out = [f"stack {stack.id} ({stack.name}): {loss}; {dtype}"]
    if workload.grad_checkpointing:
        out.append(f"grad_checkpointing means {checkpointing}")
    if workload.method == "qlora":
        out.append(f"QLoRA: {stack.qlora.implementation}")
    frag = FRAG_PACKED if workload.is_packed else FRAG_VARIABLE
    kind = "packed or fixed-length" if workload.is_packed else "variable-length (padded)"
    default = " (default for this method; set packed=)" if workload.packed is None else ""
    out.append(
        f"{kind} batches{default}: allocator fragmentation {frag:.0%} of activations and logits"
    )
    if workload.grad_accum == 1 and not workload.is_peft:
        out.append(
            "no gradient accumulation: gradients appear as activations are freed "
            "(set grad_accum= if you accumulate)"
        )
    if workload.model is None and workload.vocab is None:
        out.append(
            f"vocabulary {arch.vocab:,} assumed for a {workload.params_b:g}B model "
            "(pass vocab= for your tokenizer)"
        )
    return out


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
        stack=workload.stack_entry,
        assumptions=tuple(stack_assumptions(workload, arch)),
    )


@dataclass(frozen=True)
class TimeAnswer:
    """The job's speed on `gpus` of one catalog GPU joined by `links` (or why there is none)."""

    gpu_slug: str
    gpu: GpuFacts
    links: Links
    sharding: str
    time: TimeEstimate | None
    refusal: str | None


DEFAULT_INTERCONNECT = {"SXM": "nvswitch", "NVL": "nvlink", "PCIe": "pcie"}


def estimate_time(
    workload: Workload,
    estimate: MemoryEstimate,
    gpu_slug: str,
    *,
    interconnect: str | None = None,
    network: str = "unknown",
    network_gbps: float | None = None,
    nodes: int | None = None,
) -> TimeAnswer | None:
    """Speed and hours of the job as stated (its `gpus` and `sharding`) on a catalog GPU.

    The interconnect defaults to the form factor's (SXM: NVSwitch, NVL: NVLink bridges, PCIe
    cards: PCIe); None for a slug not in the catalog. `nodes` splits the GPUs into that many
    identical machines (a ranked plan's listings; default: nodes of 8 GPUs).
    """
    gpu = gpu_facts(gpu_slug)
    if gpu is None:
        return None
    spec = get_gpu(gpu_slug)
    kind = interconnect or DEFAULT_INTERCONNECT.get(spec.form_factor if spec else "", "unknown")
    links = Links.for_plan(
        nodes or 1,
        max(1, workload.gpus // (nodes or 1)),
        interconnect=kind,
        nvlink_gbps=gpu.nvlink_gbps,
        network=network,
        network_gbps=network_gbps,
    )
    refusal = time_refusal(workload, gpu)
    time = None
    if refusal is None:
        time = training_time(workload, estimate.arch, gpu, links, sharding=workload.sharding)
    return TimeAnswer(gpu_slug, gpu, links, workload.sharding, time, refusal)
