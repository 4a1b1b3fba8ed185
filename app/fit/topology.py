"""Card sizes and the smallest GPU layout that holds a job.

Usable GiB per nominal card size is what `nvidia-smi`/`rocm-smi` report as total memory for the
common cards of that size (e.g. H100 80 GB: 81559 MiB = 79.6 GiB; A10/L4 24 GB: ~22.5 GiB; RTX
4090: 24.0 GiB, we take the smaller), rounded down. The CUDA context is counted in the estimate,
so it is not subtracted here.

The layout search uses an 80 GB card as the reference (the most common training card: A100/H100
80 GB). It tries 1 GPU with the workload's sharding, then 2, 4 and 8 GPUs in one node and then
whole nodes of 8; when the workload says `sharding=none` it uses ZeRO-3 beyond one GPU, because
plain data parallelism never lowers per-GPU memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.fit.memory import MemoryBreakdown, per_gpu_breakdown
from app.fit.presets import ModelArch
from app.fit.workload import Workload

# nominal GB -> usable GiB
CARD_USABLE_GIB: dict[int, float] = {
    16: 15.0,
    24: 22.5,
    32: 31.5,
    40: 39.4,
    48: 44.9,
    80: 79.6,
    94: 93.0,
    96: 94.5,
    141: 139.8,
    180: 178.0,
    192: 188.0,
}
REFERENCE_CARD_GB = 80
GPUS_PER_NODE = 8
MAX_NODES = 1024

SINGLE = "single-gpu"
NODE = "multi-gpu-node"
MULTI_NODE = "multi-node"


def smallest_card_gb(per_gpu_gib: float) -> int | None:
    """Smallest common card size (nominal GB) whose usable memory holds `per_gpu_gib`."""
    for size, usable in CARD_USABLE_GIB.items():
        if per_gpu_gib <= usable:
            return size
    return None


def topology_for(gpus: int) -> str:
    """single-gpu, multi-gpu-node (<= 8 GPUs) or multi-node."""
    if gpus <= 1:
        return SINGLE
    return NODE if gpus <= GPUS_PER_NODE else MULTI_NODE


def _candidate_counts() -> list[int]:
    counts = [1, 2, 4, GPUS_PER_NODE]
    counts += [GPUS_PER_NODE * n for n in range(2, MAX_NODES + 1)]
    return counts


@dataclass(frozen=True)
class Layout:
    """A GPU count and ZeRO stage with the per-GPU memory it needs."""

    gpus: int
    sharding: str
    breakdown: MemoryBreakdown

    @property
    def topology(self) -> str:
        """Where the GPUs must live."""
        return topology_for(self.gpus)


def sharding_at(workload: Workload, gpus: int) -> str:
    """The ZeRO stage used at `gpus`: the workload's own, or ZeRO-3 when it asked for none."""
    if gpus > 1 and workload.sharding == "none":
        return "zero3"
    return workload.sharding


def smallest_layout(
    workload: Workload, arch: ModelArch, usable_gib: float | None = None
) -> Layout | None:
    """Fewest GPUs (1, 2, 4, 8, then whole nodes) whose per-GPU need fits `usable_gib`."""
    limit = usable_gib if usable_gib is not None else CARD_USABLE_GIB[REFERENCE_CARD_GB]
    for count in _candidate_counts():
        sharding = sharding_at(workload, count)
        bd = per_gpu_breakdown(workload, arch, count, sharding)
        if bd.total_gib <= limit:
            return Layout(count, sharding, bd)
        if sharding != "zero3" and count > 1:
            # Only ZeRO-3 keeps shrinking per-GPU memory with more GPUs; try it as the fallback.
            bd = per_gpu_breakdown(workload, arch, count, "zero3")
            if bd.total_gib <= limit:
                return Layout(count, "zero3", bd)
    return None
