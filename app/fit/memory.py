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

Logits (vocabulary × tokens) depend on the training stack (app/fit/data/stacks.yaml): a loss that
upcasts the whole 16-bit logits tensor (Transformers, torchtitan) keeps the fp32 logits, the fp32
log-softmax and its fp32 gradient alive at the start of the backward pass (12 bytes per element;
with Llama 3's 128k vocabulary 3 GiB at 2048 tokens); a chunked loss (torchtune, LitGPT) keeps a
16-bit copy plus the 16-bit or per-chunk fp32 log-softmax (4-6 bytes); a fused linear
cross-entropy (Liger, Unsloth's Cut Cross Entropy) never materialises them and holds a few fp32
hidden-sized buffers per token instead.

Activation checkpointing as the stack does it: `full` keeps each layer's input; `selective`
keeps a stated fraction of each layer's activations; `offloaded` (Unsloth) copies layer inputs
to CPU memory, so the GPU holds two in flight plus the layer being recomputed.

QLoRA as the stack implements it: which linear layers are NF4 (all of them for bitsandbytes,
only the adapted ones for torchtune/torchao), the bytes of what stays unquantized (PEFT's
prepare_model_for_kbit_training casts embeddings, head and norms to fp32), and whether the 4-bit
matmul saves its inputs for the backward pass (bitsandbytes' MatMul4Bit does, even for frozen
weights, so the inputs of every quantized projection stay alive). Dequantising one layer's
weights to 16 bits needs a transient buffer the size of its largest matrix.

Overheads: the CUDA context plus cuBLAS workspaces (~0.8 GiB, not seen by PyTorch's allocator
statistics), NCCL buffers for multi-GPU runs (~0.5 GiB), and caching-allocator fragmentation,
what `torch.cuda.max_memory_reserved` holds beyond `max_memory_allocated`. It grows with the
short-lived activation and logits blocks and with how much their sizes vary: FRAG_PACKED (10%)
of the transient memory when every batch has the same shape (packed or fixed-length data),
FRAG_VARIABLE (50%) when batches are padded to their own longest sample, so block sizes change
from step to step and cached blocks are too small for the next request (PyTorch CUDA semantics,
"memory management": https://pytorch.org/docs/stable/notes/cuda.html#memory-management).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

from app.fit.presets import ModelArch
from app.fit.stacks import Stack
from app.fit.workload import Workload

GIB = float(2**30)

MASTER_FP32_BYTES = 4.0
NF4_BITS = 4.0 + 8.0 / 64 + 32.0 / (64 * 256)  # 4.127: NF4 + double-quantized block constants
FRAG_PACKED = 0.10  # reserved beyond allocated, share of transient memory, fixed-shape batches
FRAG_VARIABLE = 0.50  # the same for batches padded to their own length (sizes vary per step)
CUDA_CONTEXT_GIB = 0.8
NCCL_GIB = 0.5
ZERO3_PREFETCH_LAYERS = 2
OFFLOAD_INFLIGHT_LAYERS = 2  # layer inputs on the GPU while others travel to/from CPU memory


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
    """LoRA adapter bytes per parameter: fp32 weights/grads/states unless 16-bit adapters."""
    elem = 2.0 if pure_16bit and precision != "fp32" else 4.0
    states = {"adamw": 2 * elem, "adamw8bit": 2.0, "sgd": elem}[optimizer]
    return elem + elem + states


def adapters_are_16bit(workload: Workload) -> bool:
    """Adapter dtype: an explicit pure_16bit decides, else the stack's adapter dtype."""
    if workload.precision == "fp32":
        return False
    if workload.pure_16bit is not None:
        return workload.pure_16bit
    return workload.stack_entry.adapter_bytes <= 2


def zero_divisors(sharding: str, gpus: int) -> tuple[int, int, int]:
    """(weights, gradients, optimizer) divisors for a ZeRO stage over `gpus` data-parallel GPUs."""
    n = max(1, gpus)
    stage = {"none": 0, "zero1": 1, "zero2": 2, "zero3": 3}[sharding]
    return (n if stage >= 3 else 1, n if stage >= 2 else 1, n if stage >= 1 else 1)


@dataclass(frozen=True)
class SavedInputs:
    """Which projection inputs autograd keeps for the backward pass (see module docs)."""

    qkv: bool = True
    mlp_in: bool = True
    down: bool = True
    norm_weights: bool = True

    @staticmethod
    def for_workload(workload: Workload) -> SavedInputs:
        """Trained or adapted projections keep their input; frozen ones do not, unless the stack's
        4-bit matmul saves it anyway (bitsandbytes)."""
        if not workload.is_peft:
            return SavedInputs()
        if workload.method == "qlora" and workload.stack_entry.qlora.saves_inputs:
            return SavedInputs(norm_weights=False)
        mlp = workload.lora_targets == "all"
        return SavedInputs(qkv=True, mlp_in=mlp, down=mlp, norm_weights=False)


ALL_SAVED = SavedInputs()


def activation_bytes_per_token_layer(
    arch: ModelArch,
    elem: float = 2.0,
    saved: SavedInputs = ALL_SAVED,
    *,
    fused_norms: bool = True,
) -> float:
    """Saved activation bytes per token for one layer without checkpointing (flash attention).

    Norm inputs (fused: 16-bit; eager: the fp32 upcast, plus the fp32 normalised tensor when the
    norm weight trains), Q, K, V and the attention output (flash attention's saved tensors, the
    output doubling as o_proj's input), the MLP nonlinearity's inputs (gated: gate, up and
    act(gate); plain: the pre-activation) and the inputs of the projections that need them.
    """
    h = arch.hidden
    hq = arch.heads * arch.head_dim
    hkv = arch.kv_heads * arch.head_dim
    i = arch.intermediate * arch.experts_per_token
    if fused_norms:
        norms = 2 * elem * h
    else:
        fp32 = max(4.0, elem)
        norms = 2 * (fp32 * h + (fp32 * h if saved.norm_weights else 0.0))
    attention = elem * (hq + 2 * hkv + hq)
    mlp = elem * (3 * i if arch.gated_mlp else i)
    inputs = elem * (h * saved.qkv + h * saved.mlp_in + i * saved.down)
    router = elem * arch.experts if arch.experts > 1 else 0.0
    return norms + attention + mlp + inputs + router


def selective_bytes_per_token_layer(arch: ModelArch, elem: float = 2.0) -> float:
    """Per-op selective checkpointing (torchtitan's `op` policy): the layer input, the attention
    output and every second matmul output are saved; everything else is recomputed."""
    h = arch.hidden
    hq = arch.heads * arch.head_dim
    hkv = arch.kv_heads * arch.head_dim
    i = arch.intermediate * arch.experts_per_token
    mm_outputs = (hq + 2 * hkv) + h + (2 * i if arch.gated_mlp else i) + h
    return elem * (h + hq + mm_outputs / 2)


def activation_bytes(
    arch: ModelArch,
    tokens: int,
    *,
    checkpointing: bool,
    elem: float,
    kind: str = "full",
    saved: SavedInputs = ALL_SAVED,
    fused_norms: bool = True,
) -> float:
    """Activation memory for `tokens` = micro-batch × sequence length on one GPU.

    `kind` is what the stack's checkpointing keeps: full (layer inputs), selective (per-op
    policy, see selective_bytes_per_token_layer) or offloaded (layer inputs in CPU memory).
    """
    per_layer = (
        activation_bytes_per_token_layer(arch, elem, saved, fused_norms=fused_norms) * tokens
    )
    if not checkpointing:
        return arch.layers * per_layer
    layer_input = elem * arch.hidden * tokens
    if kind == "selective":
        return arch.layers * selective_bytes_per_token_layer(arch, elem) * tokens
    if kind == "offloaded":
        return OFFLOAD_INFLIGHT_LAYERS * layer_input + per_layer
    return arch.layers * layer_input + per_layer


def logits_bytes(arch: ModelArch, tokens: int, stack: Stack) -> float:
    """Memory the loss holds for `tokens` (see module docs: upcast, chunked or fused)."""
    if stack.loss == "fused":
        return float(arch.hidden) * tokens * stack.fused_bytes_per_token_hidden
    return float(arch.vocab) * tokens * stack.logits_bytes


@lru_cache(maxsize=1024)
def target_matrices(arch: ModelArch, targets: str) -> tuple[tuple[int, int], ...]:
    """(d_in, d_out) of the matrices LoRA adapts in one layer (all experts for MoE)."""
    h, i = arch.hidden, arch.intermediate
    hq, hkv = arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
    q, k, v, o = (h, hq), (h, hkv), (h, hkv), (hq, h)
    if targets == "qv":
        return (q, v)
    if targets == "attention":
        return (q, k, v, o)
    mlp = [(h, i), (h, i), (i, h)] if arch.gated_mlp else [(h, i), (i, h)]
    return (q, k, v, o, *(mlp * arch.experts))


@lru_cache(maxsize=1024)
def lora_adapter_params(arch: ModelArch, rank: int, targets: str = "all") -> float:
    """Adapter parameters: r·(d_in + d_out) for each targeted matrix in every layer."""
    per_layer = sum(d_in + d_out for d_in, d_out in target_matrices(arch, targets))
    return float(rank * per_layer * arch.layers)


def lora_target_weight_params(arch: ModelArch, targets: str) -> float:
    """Frozen base weights of the adapted matrices (what torchtune's QLoRA quantizes)."""
    return float(sum(a * b for a, b in target_matrices(arch, targets)) * arch.layers)


@dataclass(frozen=True)
class BaseWeights:
    """Bytes of the frozen or trained base model on one unsharded GPU."""

    weights: float  # incl. NF4 codes, 16-bit layers and unquantized parts
    quant_constants: float  # NF4 block constants
    quantized_params: float  # how many parameters are 4-bit


def base_weights(workload: Workload, arch: ModelArch) -> BaseWeights:
    """Base weights as the method and stack store them (QLoRA: see module docs)."""
    if workload.method != "qlora":
        return BaseWeights(arch.params * element_bytes(workload.precision), 0.0, 0.0)
    impl = workload.stack_entry.qlora
    if impl.quantized == "lora_targets":
        quantized = lora_target_weight_params(arch, workload.lora_targets)
    else:
        quantized = float(arch.layers * arch.layer_linear_params)
    rest = max(0.0, arch.params - quantized)
    codes = quantized * 4.0 / 8
    constants = quantized * (NF4_BITS - 4.0) / 8
    return BaseWeights(codes + rest * impl.other_params_bytes, constants, quantized)


def dequant_buffer_bytes(arch: ModelArch) -> float:
    """One dequantised 16-bit copy of a layer's largest matrix (QLoRA's transient buffer)."""
    h, i = arch.hidden, arch.intermediate
    return 2.0 * max(h * i, h * arch.heads * arch.head_dim)


@dataclass(frozen=True)
class MemoryBreakdown:
    """Per-GPU GiB by component; `overhead_gib` = context + NCCL + buffers + fragmentation.

    `peak_overlap_gib` is subtracted from the sum, for parts never alive together: the logits
    and the one layer being recomputed under per-layer checkpointing (the loss's backward is done
    before the last layer is recomputed); and, without gradient accumulation and without DDP's
    persistent gradient buckets, gradients and activations (gradients appear layer by layer as
    the backward pass frees that layer's activations).
    """

    weights_gib: float
    gradients_gib: float
    optimizer_gib: float
    activations_gib: float
    logits_gib: float
    adapter_gib: float
    quant_constants_gib: float
    shard_buffer_gib: float
    dequant_buffer_gib: float
    fragmentation_gib: float
    cuda_context_gib: float
    overhead_gib: float
    peak_overlap_gib: float = 0.0

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
            - self.peak_overlap_gib
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
    stack = workload.stack_entry
    w_div, g_div, o_div = zero_divisors(sharding, gpus)
    pure = workload.uses_pure_16bit
    pb = bytes_per_param(workload.precision, workload.optimizer, pure_16bit=pure)
    elem = element_bytes(workload.precision)
    quant_constants = dequant = 0.0
    if workload.is_peft:
        base = base_weights(workload, arch)
        weights = base.weights / w_div
        quant_constants = base.quant_constants / w_div
        if base.quantized_params:
            dequant = dequant_buffer_bytes(arch)
        grads = optim = 0.0
        n_adapter = lora_adapter_params(arch, workload.lora_rank, workload.lora_targets)
        adapter = n_adapter * adapter_bytes_per_param(
            workload.precision, workload.optimizer, pure_16bit=adapters_are_16bit(workload)
        )
        # ZeRO stages shard adapter states like any trainable parameter; the effect is tiny.
        adapter /= max(1, min(o_div, gpus))
    else:
        weights = arch.params * pb.weights / w_div
        grads = arch.params * pb.gradients / g_div
        optim = arch.params * pb.optimizer / o_div
        adapter = 0.0
    tokens = workload.batch_size * workload.seq_len
    saved = SavedInputs.for_workload(workload)
    acts = activation_bytes(
        arch,
        tokens,
        checkpointing=workload.grad_checkpointing,
        elem=elem,
        kind=stack.checkpointing,
        saved=saved,
        fused_norms=stack.fused_kernels,
    )
    # With per-layer recomputation, a layer is recomputed only after the loss's backward is
    # done, so the recomputed layer and the logits never peak together.
    recomputed = 0.0
    if workload.grad_checkpointing and stack.checkpointing in ("full", "offloaded"):
        per_token = activation_bytes_per_token_layer(
            arch, elem, saved, fused_norms=stack.fused_kernels
        )
        recomputed = per_token * tokens
    logits = logits_bytes(arch, tokens, stack)
    shard_buffer = 0.0
    if w_div > 1:
        shard_buffer = ZERO3_PREFETCH_LAYERS * arch.layer_linear_params * elem
    frag = (FRAG_PACKED if workload.is_packed else FRAG_VARIABLE) * (acts + logits)
    overlap = min(logits, recomputed)
    ddp_buckets = gpus > 1 and g_div == 1
    if workload.grad_accum == 1 and not ddp_buckets:
        overlap += min(grads, acts + logits - overlap)
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
        dequant_buffer_gib=dequant / GIB,
        fragmentation_gib=frag / GIB,
        cuda_context_gib=context / GIB,
        overhead_gib=(context + shard_buffer + dequant + frag) / GIB,
        peak_overlap_gib=overlap / GIB,
    )
