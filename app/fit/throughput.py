"""Training speed from hardware and links: tokens/s per GPU, MFU, hours and communication share.

One micro-batch of T = batch_size × seq_len tokens on one of the job's data-parallel GPUs takes

  compute   matmul FLOPs ÷ (dense peak × the GPU family's matmul efficiency), each pass at least
            as long as reading its weights (roofline); forward 2·N per token, backward 4·N
            (full) or 2·N plus 6·N_adapter (LoRA: frozen weights get no weight gradient),
            recomputation another 2·N with per-layer checkpointing (N: linear parameters touched
            per token, the output head included, routed experts only for MoE)
  attention causal flash attention, 2·s·h_q FLOPs per token per layer forward, 2.5× that
            backward (FlashAttention-2's five matmuls against two), at the family's attention
            efficiency
  memory    elementwise passes (norms, rotary, residuals, the MLP nonlinearity) and the loss over
            the vocabulary, in bytes moved ÷ achievable memory bandwidth; per token and layer an
            eager forward moves ~100·h + 12·(h_q + 2·h_kv) + 10·i bytes (fp32 norm upcasts, one
            read and one write per op), fused kernels ~30·h + 4·(h_q + 2·h_kv) + 6·i; backward
            twice the forward, recomputation once more. The loss moves 30 bytes per logit with a
            full fp32 upcast, 10 when chunked, 4 when fused
  dequant   QLoRA: every pass dequantises the 4-bit weights (the stack's bytes per parameter)
  host      the stack's per-layer kernel-launch cost; the GPU runs ahead of the host, so a
            micro-batch takes the longer of device time and host time
  comm      what is not hidden behind compute: ZeRO-3/FSDP all-gathers the 16-bit (or 4-bit)
            weights for forward and again for backward and reduce-scatters gradients every
            micro-batch; DDP/ZeRO-1/2 all-reduce gradients once per optimizer step. Collectives
            run concurrently with compute (FSDP prefetch, DDP gradient buckets), so the exposed
            part is what exceeds the compute it can overlap (forward+backward for FSDP,
            backward for DDP), plus one layer's (FSDP) or one 25 MB bucket's (DDP) transfer that
            nothing can hide
  optimizer reading and writing weights, gradients and optimizer states once per step

MFU uses the PaLM / llm-foundry convention: model FLOPs per token 6·N (full) or 4·N + 6·N_adapter
(LoRA), plus 12·L·h_q·s for attention counted without the causal half, no recomputation, over
the dense peak. Sources of every efficiency and bandwidth: app/data/gpus.yaml (`performance`)
and app.fit.hardware.

Precision: bf16 needs a GPU with bf16 (V100 and T4 have none: the time is refused with a note);
fp16 uses the fp16 peak; fp32 is costed as TF32 (half the 16-bit peak, PyTorch's allow_tf32
assumed) on Ampere and newer and at an eighth of the 16-bit peak on older parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from app.fit.hardware import GpuFacts, Links, collective_busbw
from app.fit.memory import base_weights, lora_adapter_params, target_matrices, zero_divisors
from app.fit.presets import ModelArch
from app.fit.workload import Workload

BANDWIDTH_EFFICIENCY = 0.8  # share of HBM/GDDR bandwidth streaming kernels reach
ATTENTION_BACKWARD_FACTOR = 2.5
DDP_BUCKET_BYTES = 25e6  # torch DistributedDataParallel's default bucket_cap_mb
ELEMENTWISE_EAGER = (100.0, 12.0, 10.0)  # bytes per token-layer per forward: × h, × qkv, × i
ELEMENTWISE_FUSED = (30.0, 4.0, 6.0)
LOSS_BYTES_PER_LOGIT = {"upcast": 30.0, "chunked": 10.0, "fused": 4.0}
# LoRA adapters around each adapted matrix, bytes per token per forward pass: × d_in, × d_out.
LORA_EAGER = (7.0, 12.0)  # dropout (read, write, mask), then scale and add to the base output
LORA_FUSED = (2.0, 6.0)  # no dropout, scale-and-add in one pass
OVERLAP_COST = 0.3  # share of a hidden transfer's time that still slows the compute under it


@dataclass(frozen=True)
class TimeEstimate:
    """Speed of the job on its GPUs; `hours` covers the job's training tokens."""

    tokens_per_s_per_gpu: float
    mfu: float
    hours: float
    comm_share: float
    step_s: float  # one micro-batch, optimizer step and all-reduce amortised
    compute_s: float
    attention_s: float
    memory_s: float
    dequant_s: float
    host_s: float
    comm_exposed_s: float
    optimizer_s: float
    peak_tflops: float
    gpus: int
    precision: str

    def as_dict(self) -> dict[str, float | int | str]:
        """Rounded figures for JSON."""
        return {
            "tokens_per_s_per_gpu": round(self.tokens_per_s_per_gpu, 1),
            "mfu": round(self.mfu, 4),
            "hours": self.hours,
            "comm_share": round(self.comm_share, 4),
            "step_s": round(self.step_s, 6),
            "compute_s": round(self.compute_s, 6),
            "attention_s": round(self.attention_s, 6),
            "memory_s": round(self.memory_s, 6),
            "dequant_s": round(self.dequant_s, 6),
            "host_s": round(self.host_s, 6),
            "comm_exposed_s": round(self.comm_exposed_s, 6),
            "optimizer_s": round(self.optimizer_s, 6),
            "peak_tflops": self.peak_tflops,
            "gpus": self.gpus,
            "precision": self.precision,
        }


def peak_tflops(workload: Workload, gpu: GpuFacts) -> float | None:
    """The dense peak the job's precision runs at on this GPU, None when it cannot run."""
    if workload.precision == "bf16":
        return gpu.bf16_tflops or None
    half = gpu.fp16_tflops or gpu.bf16_tflops
    if not half:
        return None
    if workload.precision == "fp16":
        return half
    return half / 2 if gpu.tf32_capable else half / 8


def time_refusal(workload: Workload, gpu: GpuFacts) -> str | None:
    """Why no time can be given for this precision on this GPU (None when it can)."""
    if peak_tflops(workload, gpu) is not None:
        return None
    if workload.precision == "bf16":
        return f"no bf16 on {gpu.name}: choose precision=fp16"
    return f"no {workload.precision} throughput figure for {gpu.name}"


@lru_cache(maxsize=1024)
def linear_params(arch: ModelArch) -> tuple[float, float]:
    """(decoder-layer, output-head) parameters in matmuls touched per token."""
    h, hd = arch.hidden, arch.head_dim
    attn = h * hd * (2 * arch.heads + 2 * arch.kv_heads)
    mlp = (3 if arch.gated_mlp else 2) * h * arch.intermediate * arch.experts_per_token
    return float(arch.layers * (attn + mlp)), float(arch.vocab * h)


def model_flops_per_token(workload: Workload, arch: ModelArch) -> float:
    """FLOPs per token for MFU (see module docs; no recomputation)."""
    layer, head = linear_params(arch)
    n = layer + head
    attention = 12.0 * arch.layers * arch.heads * arch.head_dim * workload.seq_len
    if workload.is_peft:
        adapters = lora_adapter_params(arch, workload.lora_rank, workload.lora_targets)
        return 4 * n + 6 * adapters + attention
    return 6 * n + attention


def _recompute_share(workload: Workload) -> float:
    """Extra forward passes of the decoder layers spent on recomputation."""
    if not workload.grad_checkpointing:
        return 0.0
    return 0.5 if workload.stack_entry.checkpointing == "selective" else 1.0


def _compute_seconds(workload: Workload, arch: ModelArch, gpu: GpuFacts, peak: float) -> float:
    """Matmul time of one micro-batch, each pass at least its weight reads (roofline)."""
    tokens = workload.batch_size * workload.seq_len
    layer, head = linear_params(arch)
    recompute = _recompute_share(workload)
    rate = peak * 1e12 * gpu.matmul_efficiency
    bandwidth = gpu.memory_bandwidth_gbps * 1e9 * BANDWIDTH_EFFICIENCY
    weight_bytes = 2.0 * (layer + head)
    if workload.is_peft:
        adapters = lora_adapter_params(arch, workload.lora_rank, workload.lora_targets)
        passes = 2.0 + recompute  # forward, input gradients, recomputation
        flops = tokens * (2 * (layer + head) * 2 + 2 * layer * recompute + 6 * adapters)
    else:
        passes = 3.0 + recompute  # forward, input gradients, weight gradients, recomputation
        flops = tokens * (6 * (layer + head) + 2 * layer * recompute)
    return max(flops / rate, passes * weight_bytes / bandwidth)


def _attention_seconds(workload: Workload, arch: ModelArch, gpu: GpuFacts, peak: float) -> float:
    tokens = workload.batch_size * workload.seq_len
    forward = 2.0 * workload.seq_len * arch.heads * arch.head_dim * arch.layers
    passes = 1.0 + ATTENTION_BACKWARD_FACTOR + _recompute_share(workload)
    return tokens * forward * passes / (peak * 1e12 * gpu.attention_efficiency)


def _memory_seconds(workload: Workload, arch: ModelArch, gpu: GpuFacts) -> float:
    """Elementwise passes over the activations plus the loss over the vocabulary."""
    tokens = workload.batch_size * workload.seq_len
    stack = workload.stack_entry
    kh, kqkv, ki = ELEMENTWISE_FUSED if stack.fused_kernels else ELEMENTWISE_EAGER
    qkv = arch.heads * arch.head_dim + 2 * arch.kv_heads * arch.head_dim
    per_layer = kh * arch.hidden + kqkv * qkv + ki * arch.intermediate * arch.experts_per_token
    if workload.precision == "fp32":
        per_layer *= 2
    if workload.is_peft:
        k_in, k_out = LORA_FUSED if stack.fused_kernels else LORA_EAGER
        matrices = target_matrices(arch, workload.lora_targets)
        per_layer += sum(k_in * d_in + k_out * d_out for d_in, d_out in matrices) / max(
            1, arch.experts // max(1, arch.experts_per_token)
        )
    passes = 3.0 + _recompute_share(workload)  # forward, backward (2×), recomputation
    loss = arch.vocab * LOSS_BYTES_PER_LOGIT[stack.loss]
    moved = tokens * (arch.layers * per_layer * passes + loss)
    return moved / (gpu.memory_bandwidth_gbps * 1e9 * BANDWIDTH_EFFICIENCY)


def _dequant_seconds(workload: Workload, arch: ModelArch, gpu: GpuFacts) -> float:
    if workload.method != "qlora":
        return 0.0
    quantized = base_weights(workload, arch).quantized_params
    passes = 2.0 + _recompute_share(workload)
    moved = passes * quantized * workload.stack_entry.qlora.dequant_bytes_per_param
    return moved / (gpu.memory_bandwidth_gbps * 1e9 * BANDWIDTH_EFFICIENCY)


def _trainable(workload: Workload, arch: ModelArch) -> float:
    if workload.is_peft:
        return lora_adapter_params(arch, workload.lora_rank, workload.lora_targets)
    return arch.params


def _grad_bytes(workload: Workload) -> float:
    """Bytes per gradient element as reduced: fp32 under mixed precision, else 16-bit."""
    if workload.precision == "fp32" or not workload.uses_pure_16bit:
        return 4.0
    return 2.0


def _optimizer_seconds(workload: Workload, arch: ModelArch, gpu: GpuFacts, shards: int) -> float:
    """One optimizer step: read and write weights and states, read gradients."""
    pure = workload.uses_pure_16bit
    state = 4.0 if not pure or workload.precision == "fp32" else 2.0
    states = {"adamw": 2 * state, "adamw8bit": 2.0, "sgd": state}[workload.optimizer]
    master = 4.0 if not pure and workload.precision != "fp32" else 0.0
    weights = 4.0 if workload.precision == "fp32" else 2.0
    per_param = 2 * (states + master + weights) + _grad_bytes(workload)
    moved = _trainable(workload, arch) * per_param / max(1, shards)
    return moved / (gpu.memory_bandwidth_gbps * 1e9 * BANDWIDTH_EFFICIENCY)


def _gathered_weight_bytes(workload: Workload, arch: ModelArch) -> float:
    """What ZeRO-3/FSDP all-gathers per pass: 16-bit weights, or the stored 4-bit base."""
    if workload.method == "qlora":
        base = base_weights(workload, arch)
        return base.weights + base.quant_constants
    return arch.params * 2.0


@dataclass(frozen=True)
class _Comm:
    per_micro: float  # exposed seconds every micro-batch
    per_step: float  # exposed seconds once per optimizer step


def _communication(
    workload: Workload,
    arch: ModelArch,
    gpu: GpuFacts,
    links: Links,
    sharding: str,
    device_s: float,
) -> _Comm:
    n = links.gpus
    if n <= 1:
        return _Comm(0.0, 0.0)
    busbw = collective_busbw(gpu, links) * 1e9
    share = (n - 1) / n
    grads = _trainable(workload, arch) * _grad_bytes(workload)
    if sharding == "zero3":
        volume = share * (2 * _gathered_weight_bytes(workload, arch) + grads)
        t = volume / busbw
        unhidden = t / max(1, arch.layers)
        hidden = min(t, device_s)
        return _Comm(max(0.0, t - device_s) + unhidden + OVERLAP_COST * hidden, 0.0)
    # DDP, ZeRO-1 and ZeRO-2 move the same bytes once per step (all-reduce, or reduce-scatter
    # plus all-gather), overlapped with the last micro-batch's backward pass.
    t = 2 * share * grads / busbw
    unhidden = min(t, 2 * share * DDP_BUCKET_BYTES / busbw)
    backward = device_s * 2 / 3
    hidden = min(t, backward)
    return _Comm(0.0, max(0.0, t - backward) + unhidden + OVERLAP_COST * hidden)


def training_time(
    workload: Workload,
    arch: ModelArch,
    gpu: GpuFacts,
    links: Links,
    *,
    sharding: str | None = None,
    train_tokens: float | None = None,
) -> TimeEstimate | None:
    """Speed and hours of `workload` on `links.gpus` GPUs of `gpu` (None: see time_refusal).

    `sharding` is the ZeRO stage actually used (default: the workload's); `train_tokens` the
    tokens of the whole run (default: the workload's).
    """
    peak = peak_tflops(workload, gpu)
    if peak is None:
        return None
    sharding = sharding or workload.sharding
    tokens = workload.batch_size * workload.seq_len
    compute = _compute_seconds(workload, arch, gpu, peak)
    attention = _attention_seconds(workload, arch, gpu, peak)
    memory = _memory_seconds(workload, arch, gpu)
    dequant = _dequant_seconds(workload, arch, gpu)
    host = arch.layers * workload.stack_entry.eager_overhead_us * 1e-6
    device = compute + attention + memory + dequant
    busy = max(device, host)
    shards = zero_divisors(sharding, links.gpus)[2]
    optimizer = _optimizer_seconds(workload, arch, gpu, shards)
    comm = _communication(workload, arch, gpu, links, sharding, device)
    accum = workload.grad_accum
    exposed = comm.per_micro + comm.per_step / accum
    step = busy + exposed + optimizer / accum
    per_gpu = tokens / step
    mfu = per_gpu * model_flops_per_token(workload, arch) / (peak * 1e12)
    run_tokens = train_tokens if train_tokens is not None else workload.train_tokens(arch)
    hours = run_tokens / (per_gpu * links.gpus) / 3600
    return TimeEstimate(
        tokens_per_s_per_gpu=per_gpu,
        mfu=mfu,
        hours=hours,
        comm_share=exposed / step,
        step_s=step,
        compute_s=compute,
        attention_s=attention,
        memory_s=memory,
        dequant_s=dequant,
        host_s=host,
        comm_exposed_s=exposed,
        optimizer_s=optimizer / accum,
        peak_tflops=peak,
        gpus=links.gpus,
        precision=workload.precision,
    )
