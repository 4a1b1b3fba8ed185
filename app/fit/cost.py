"""Cost of a run: training FLOPs and billing rounding.

Speed comes from app.fit.throughput (hardware and links); this module turns hours into what a
provider bills.

FLOPs (Kaplan et al. 2020; EleutherAI "Transformer Math 101"): full/pretrain training costs
6·N FLOPs per token (2·N forward, 4·N backward); full activation checkpointing re-runs the forward
pass, so 8·N. LoRA/QLoRA: the frozen base still runs forward (2·N) and the input-gradient half of
the backward (2·N) but skips weight gradients: 4·N, plus 6·N_adapter, plus 2·N recompute with
checkpointing. N is the parameters touched per token (active parameters for MoE).

Set-up, checkpoints and spot risk are app.fit.market's and app.fit.plans' business. Unknown
billing granularity is treated as hourly (the conservative choice).
"""

from __future__ import annotations

import math

from app.fit.memory import lora_adapter_params
from app.fit.presets import ModelArch
from app.fit.workload import Workload


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


def billed_hours(hours: float, billing: str) -> float:
    """Hours rounded up to the billing granularity; unknown counts as hourly."""
    unit = {"second": 1 / 3600, "minute": 1 / 60}.get(billing, 1.0)
    # Subtract a hair so float noise (e.g. 0.5000000001 h) does not bump a whole unit.
    return math.ceil(hours / unit - 1e-9) * unit
