"""Per-GPU training memory, term by term, with the source of every formula.

Model states (bytes per parameter, EleutherAI "Transformer Math 101" and the ZeRO paper,
Rajbhandari et al. 2020, section 3.1):

* `precision=bf16|fp16` (default, `pure_16bit=False`) is standard mixed precision: 16-bit weights
  (2) and gradients (2), an fp32 master copy (4) and fp32 optimizer states. With AdamW
  (two fp32 moments, 4 + 4) that is 2 + 2 + 4 + 4 + 4 = 16 bytes/param before activations; the
  master copy is booked under optimizer states, as the ZeRO paper does (its K = 12).
* `adamw8bit` (bitsandbytes, Dettmers et al. 2022): two 8-bit moments = 2 bytes/param, plus the
  fp32 master copy under mixed precision (so 4 + 2 = 6 bytes of optimizer state).
* `sgd` means SGD with momentum: one fp32 momentum buffer = 4 bytes/param (+4 master if mixed).
* `precision=fp32`: weights 4, gradients 4, AdamW 8 / adamw8bit 2 / sgd 4, no master copy.
* `pure_16bit=True` (torchtune, LitGPT `bf16-true`): weights 2, gradients 2, and optimizer states
  in the parameter dtype: AdamW 4, adamw8bit 2, sgd 2; no master copy.

LoRA / QLoRA (Hu et al. 2021; Dettmers et al. 2023): the frozen base has no gradients or optimizer
states. Adapters add r·(d_in + d_out) parameters per targeted matrix; under mixed precision they
are kept in fp32 (PEFT's default) with fp32 gradients and optimizer states. QLoRA stores the base
linear weights as 4-bit NF4 in blocks of 64 with double-quantized constants: 4 + 8/64 + 32/(64·256)
= 4.127 bits/param (QLoRA paper, section 3: "0.127 bits per parameter" for the constants).
Embeddings, the output head and norms stay 16-bit.

ZeRO (Rajbhandari et al. 2020) across N data-parallel GPUs: stage 1 divides optimizer states
(incl. the master copy) by N, stage 2 also gradients, stage 3 (= FSDP full shard) also weights.
Stage 3 additionally holds gathered full-precision-16 weights of two layers at a time (the layer
being computed and the prefetched next one). For LoRA/QLoRA, stage 3 also shards the frozen base
(FSDP-QLoRA, Answer.AI 2024); stages 1/2 only touch the tiny adapter states.

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", section 4.1): a GPT layer stores s·b·h·(34 + 5·a·s/h) bytes in 16-bit. Flash/fused
attention (Dao et al. 2022) never materialises the a·s² score and softmax tensors, so the
5·a·s²·b term is gone; modern decoders have no dropout (the 2·s·b·h + s·b·h mask bytes go too).
Generalised to GQA and gated MLPs, the tensors saved per token per layer are: the two norm inputs
(2h), the QKV input (h), Q, K, V (Hq + 2·Hkv), the attention output (Hq), the MLP input (h) and
the MLP intermediates (4·i for SwiGLU: gate, up, act(gate), product; 2·i for a plain GELU MLP),
times the element size. For GPT-2 shapes this gives 32·s·b·h, i.e. Korthikanti's 34 minus dropout.
With full (per-layer) activation checkpointing only each layer's input is kept (2·s·b·h bytes per
layer) plus one layer's full activations while it is recomputed in the backward pass.

Logits (vocabulary × tokens): HF-style losses upcast the 16-bit logits to fp32 and keep the fp32
logits, the fp32 log-softmax and its fp32 gradient alive at the start of the backward pass:
LOGITS_BYTES = 12 bytes per element. With Llama 3's 128k vocabulary this is 3 GiB at 2048 tokens.

Overheads: the CUDA context plus cuBLAS workspaces (~0.8 GiB, not seen by PyTorch's allocator
statistics), NCCL buffers for multi-GPU runs (~0.5 GiB), and caching-allocator fragmentation,
which grows with the short-lived, variable-size activation and logits blocks: we add
FRAGMENTATION = 30% of the transient (activations + logits) memory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from app.fit.presets import ModelArch
from app.fit.workload import Workload

GIB = float(2**30)

MASTER_FP32_BYTES = 4.0
NF4_BITS = 4.0 + 8.0 / 64 + 32.0 / (64 * 256)  # 4.127: NF4 + double-quantized block constants
LOGITS_BYTES = 12.0  # fp32 logits + fp32 log-softmax + fp32 gradient
FRAGMENTATION = 0.30  # share of transient memory lost to caching-allocator fragmentation
CUDA_CONTEXT_GIB = 0.8
NCCL_GIB = 0.5
ZERO3_PREFETCH_LAYERS = 2


@dataclass(frozen=True)
class ParamBytes:
    """Bytes per trainable parameter for weights, gradients and optimizer states (incl. master)."""

    weights: float
    gradients: float
    optimizer: float

    @property
    def total(self) -> float:
        """Sum of the three model-state terms."""
        return self.weights + self.gradients + self.optimizer


def element_bytes(precision: str) -> float:
    """Size of one weight/activation element in the training dtype."""
    return 4.0 if precision == "fp32" else 2.0


def bytes_per_param(precision: str, optimizer: str, *, pure_16bit: bool = False) -> ParamBytes:
    """Model-state bytes per trainable parameter (see module docs; 16 for bf16 mixed AdamW)."""
    elem = element_bytes(precision)
    mixed = precision != "fp32" and not pure_16bit
    state_elem = 4.0 if (precision == "fp32" or mixed) else elem
    states = {"adamw": 2 * state_elem, "adamw8bit": 2.0, "sgd": state_elem}[optimizer]
    master = MASTER_FP32_BYTES if mixed else 0.0
    return ParamBytes(weights=elem, gradients=elem, optimizer=states + master)


def adapter_bytes_per_param(precision: str, optimizer: str, *, pure_16bit: bool = False) -> float:
    """LoRA adapter bytes per parameter: fp32 weights/grads/states unless pure 16-bit training."""
    elem = 2.0 if pure_16bit and precision != "fp32" else 4.0
    states = {"adamw": 2 * elem, "adamw8bit": 2.0, "sgd": elem}[optimizer]
    return elem + elem + states


def zero_divisors(sharding: str, gpus: int) -> tuple[int, int, int]:
    """(weights, gradients, optimizer) divisors for a ZeRO stage over `gpus` data-parallel GPUs."""
    n = max(1, gpus)
    stage = {"none": 0, "zero1": 1, "zero2": 2, "zero3": 3}[sharding]
    return (n if stage >= 3 else 1, n if stage >= 2 else 1, n if stage >= 1 else 1)


def activation_bytes_per_token_layer(arch: ModelArch, elem: float = 2.0) -> float:
    """Saved activation bytes per token for one layer without checkpointing (flash attention)."""
    h = arch.hidden
    hq = arch.heads * arch.head_dim
    hkv = arch.kv_heads * arch.head_dim
    mlp = (4 if arch.gated_mlp else 2) * arch.intermediate * arch.experts_per_token
    router = arch.experts if arch.experts > 1 else 0
    return elem * (4 * h + 2 * hq + 2 * hkv + mlp + router)


def activation_bytes(arch: ModelArch, tokens: int, *, checkpointing: bool, elem: float) -> float:
    """Activation memory for `tokens` = micro-batch × sequence length on one GPU."""
    per_layer = activation_bytes_per_token_layer(arch, elem) * tokens
    if not checkpointing:
        return arch.layers * per_layer
    return arch.layers * elem * arch.hidden * tokens + per_layer


def logits_bytes(arch: ModelArch, tokens: int) -> float:
    """Output-logits memory at the loss: vocab × tokens × LOGITS_BYTES."""
    return float(arch.vocab) * tokens * LOGITS_BYTES


def lora_adapter_params(arch: ModelArch, rank: int, targets: str = "all") -> float:
    """Adapter parameters: r·(d_in + d_out) for each targeted matrix in every layer."""
    h, i = arch.hidden, arch.intermediate
    hq, hkv = arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
    q, k, v, o = h + hq, h + hkv, h + hkv, hq + h
    per_layer = {"qv": q + v, "attention": q + k + v + o}.get(targets)
    if per_layer is None:
        mlp = (3 if arch.gated_mlp else 2) * (h + i) * arch.experts
        per_layer = q + k + v + o + mlp
    return float(rank * per_layer * arch.layers)


def base_weight_bytes(arch: ModelArch, method: str, precision: str) -> float:
    """Frozen/trained base weights: NF4 linear layers for QLoRA, otherwise the training dtype."""
    if method == "qlora":
        linear = arch.params - arch.embedding_params
        return linear * NF4_BITS / 8 + arch.embedding_params * 2.0
    return arch.params * element_bytes(precision)


@dataclass(frozen=True)
class MemoryBreakdown:
    """Per-GPU GiB by component; `overhead_gib` = context + NCCL + ZeRO-3 buffers + frag."""

    weights_gib: float
    gradients_gib: float
    optimizer_gib: float
    activations_gib: float
    logits_gib: float
    adapter_gib: float
    quant_constants_gib: float
    shard_buffer_gib: float
    fragmentation_gib: float
    cuda_context_gib: float
    overhead_gib: float

    @property
    def total_gib(self) -> float:
        """Everything a process on one GPU needs (what must fit in the card)."""
        return (
            self.weights_gib
            + self.gradients_gib
            + self.optimizer_gib
            + self.activations_gib
            + self.logits_gib
            + self.adapter_gib
            + self.quant_constants_gib
            + self.overhead_gib
        )

    @property
    def reserved_gib(self) -> float:
        """What PyTorch's allocator reserves (torch.cuda.max_memory_reserved): no CUDA context."""
        return self.total_gib - self.cuda_context_gib

    @property
    def allocated_gib(self) -> float:
        """Live tensors only (torch.cuda.max_memory_allocated): no context, no fragmentation."""
        return self.reserved_gib - self.fragmentation_gib

    def as_dict(self) -> dict[str, float]:
        """Rounded GiB figures for JSON/CLI output."""
        return {k: round(v, 3) for k, v in asdict(self).items()}


def per_gpu_breakdown(
    workload: Workload, arch: ModelArch, gpus: int, sharding: str
) -> MemoryBreakdown:
    """Memory on one of `gpus` data-parallel GPUs under ZeRO stage `sharding`."""
    w_div, g_div, o_div = zero_divisors(sharding, gpus)
    pb = bytes_per_param(workload.precision, workload.optimizer, pure_16bit=workload.pure_16bit)
    elem = element_bytes(workload.precision)
    quant_constants = 0.0
    if workload.is_peft:
        weights = base_weight_bytes(arch, workload.method, workload.precision) / w_div
        if workload.method == "qlora":
            linear = arch.params - arch.embedding_params
            quant_constants = linear * (NF4_BITS - 4.0) / 8 / w_div
            weights -= quant_constants
        grads = optim = 0.0
        n_adapter = lora_adapter_params(arch, workload.lora_rank, workload.lora_targets)
        adapter = n_adapter * adapter_bytes_per_param(
            workload.precision, workload.optimizer, pure_16bit=workload.pure_16bit
        )
        # ZeRO stages shard adapter states like any trainable parameter; the effect is tiny.
        adapter /= max(1, min(o_div, gpus))
    else:
        weights = arch.params * pb.weights / w_div
        grads = arch.params * pb.gradients / g_div
        optim = arch.params * pb.optimizer / o_div
        adapter = 0.0
    tokens = workload.batch_size * workload.seq_len
    acts = activation_bytes(arch, tokens, checkpointing=workload.grad_checkpointing, elem=elem)
    logits = logits_bytes(arch, tokens)
    shard_buffer = 0.0
    if w_div > 1:
        shard_buffer = ZERO3_PREFETCH_LAYERS * arch.layer_linear_params * elem
    frag = FRAGMENTATION * (acts + logits)
    context = CUDA_CONTEXT_GIB * GIB + (NCCL_GIB * GIB if gpus > 1 else 0.0)
    return MemoryBreakdown(
        weights_gib=weights / GIB,
        gradients_gib=grads / GIB,
        optimizer_gib=optim / GIB,
        activations_gib=acts / GIB,
        logits_gib=logits / GIB,
        adapter_gib=adapter / GIB,
        quant_constants_gib=quant_constants / GIB,
        shard_buffer_gib=shard_buffer / GIB,
        fragmentation_gib=frag / GIB,
        cuda_context_gib=context / GIB,
        overhead_gib=(context + shard_buffer + frag) / GIB,
    )
