"""Training time and cost on an offer: FLOPs, assumed MFU, billing rounding and spot overhead.

FLOPs (Kaplan et al. 2020; EleutherAI "Transformer Math 101"): full/pretrain training costs
6·N FLOPs per token (2·N forward, 4·N backward); full activation checkpointing re-runs the forward
pass, so 8·N. LoRA/QLoRA: the frozen base still runs forward (2·N) and the input-gradient half of
the backward (2·N) but skips weight gradients: 4·N, plus 6·N_adapter, plus 2·N recompute with
checkpointing. N is the parameters touched per token (active parameters for MoE). Attention's
s²-term is ignored (small below ~8k tokens for these widths).

MFU assumptions (model FLOPs utilisation of the dense BF16 peak, or FP16 where a card has no BF16):
0.40 for HBM datacenter cards, 0.30 for GDDR cards; x0.6 for multi-GPU over PCIe only, x0.8 for
multi-GPU with unknown interconnect; beyond one node x0.85 with InfiniBand/RoCE/EFA and x0.5
otherwise; QLoRA x0.7 for NF4 dequantisation in every matmul.

Spot: an interruption loses on average half a checkpoint interval of work plus a restart
(reload, warm-up). Expected overhead = hours × SPOT_INTERRUPTIONS_PER_HOUR ×
(CHECKPOINT_INTERVAL_H / 2 + RESTART_H), i.e. 0.05/h × (15 min + 10 min) ≈ +2%.
Unknown billing granularity is treated as hourly (the conservative choice).
"""

from __future__ import annotations

import math

from app.fit.memory import lora_adapter_params
from app.fit.presets import ModelArch
from app.fit.workload import Workload

MFU_HBM = 0.40
MFU_GDDR = 0.30
MFU_UNKNOWN_MEMORY = 0.35
PCIE_MULTI_GPU_FACTOR = 0.6
UNKNOWN_INTERCONNECT_FACTOR = 0.8
MULTI_NODE_FAST_FACTOR = 0.85
MULTI_NODE_SLOW_FACTOR = 0.5
QLORA_FACTOR = 0.7
FAST_NETWORKS = frozenset({"infiniband", "roce", "efa"})

SPOT_INTERRUPTIONS_PER_HOUR = 0.05
CHECKPOINT_INTERVAL_H = 0.5
RESTART_H = 10 / 60

GPUS_PER_NODE = 8


def flops_per_token(workload: Workload, arch: ModelArch) -> float:
    """Training FLOPs per token (see module docs)."""
    n = arch.flops_params
    recompute = 2 * n if workload.grad_checkpointing else 0.0
    if workload.is_peft:
        adapters = lora_adapter_params(arch, workload.lora_rank, workload.lora_targets)
        return 4 * n + 6 * adapters + recompute
    return 6 * n + recompute


def training_flops(workload: Workload, arch: ModelArch) -> float:
    """FLOPs for the whole run."""
    return flops_per_token(workload, arch) * workload.train_tokens(arch)


def peak_tflops(bf16: float | None, fp16: float | None) -> float | None:
    """Dense 16-bit peak: BF16, or FP16 for cards without BF16 (V100, T4)."""
    return bf16 if bf16 else fp16 or None


def assumed_mfu(
    *,
    method: str,
    gpus: float,
    memory_type: str | None,
    interconnect: str,
    network: str,
) -> float:
    """Model FLOPs utilisation for this layout (documented assumptions above)."""
    kind = (memory_type or "").upper()
    if kind.startswith("HBM"):
        mfu = MFU_HBM
    elif kind.startswith(("GDDR", "LPDDR")):
        mfu = MFU_GDDR
    else:
        mfu = MFU_UNKNOWN_MEMORY
    if gpus > 1:
        if interconnect == "pcie":
            mfu *= PCIE_MULTI_GPU_FACTOR
        elif interconnect not in ("nvlink", "nvswitch"):
            mfu *= UNKNOWN_INTERCONNECT_FACTOR
    if gpus > GPUS_PER_NODE:
        mfu *= MULTI_NODE_FAST_FACTOR if network in FAST_NETWORKS else MULTI_NODE_SLOW_FACTOR
    if method == "qlora":
        mfu *= QLORA_FACTOR
    return mfu


def compute_hours(total_flops: float, tflops: float, gpus: float, mfu: float) -> float:
    """Wall-clock hours at `mfu` of `gpus` × `tflops` peak."""
    return total_flops / (tflops * 1e12 * gpus * mfu) / 3600


def spot_overhead_hours(hours: float) -> float:
    """Expected extra hours from spot interruptions (lost work since checkpoint + restart)."""
    return hours * SPOT_INTERRUPTIONS_PER_HOUR * (CHECKPOINT_INTERVAL_H / 2 + RESTART_H)


def billed_hours(hours: float, billing: str) -> float:
    """Hours rounded up to the billing granularity; unknown counts as hourly."""
    unit = {"second": 1 / 3600, "minute": 1 / 60}.get(billing, 1.0)
    # Subtract a hair so float noise (e.g. 0.5000000001 h) does not bump a whole unit.
    return math.ceil(hours / unit - 1e-9) * unit
