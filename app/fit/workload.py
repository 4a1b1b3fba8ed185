"""The training job being sized: method, model, precision, optimizer, batch shape, parallelism.

Defaults follow the most common fine-tuning setup: the Hugging Face stack, bf16 with its dtype
policy (mixed precision), AdamW, micro-batch 1 without gradient accumulation, 2048-token
variable-length sequences (packed for pretraining), gradient checkpointing on, LoRA rank 16 on
all linear layers, one GPU.
Tokens default to 100M for fine-tuning (a few epochs over a mid-sized instruction set) and to
20 tokens per parameter for pretraining (Chinchilla-optimal, Hoffmann et al. 2022).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from app.fit.presets import ModelArch, get_preset, preset_ids, typical_arch
from app.fit.stacks import DEFAULT_STACK, Stack, StackId, get_stack

Method = Literal["pretrain", "full", "lora", "qlora"]
Precision = Literal["bf16", "fp16", "fp32"]
Optimizer = Literal["adamw", "adamw8bit", "sgd"]
Sharding = Literal["none", "zero1", "zero2", "zero3"]
LoraTargets = Literal["all", "attention", "qv"]

DEFAULT_FINETUNE_TOKENS = 100e6
PRETRAIN_TOKENS_PER_PARAM = 20.0


class Workload(BaseModel):
    """A validated job description; every error names the offending field."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    model: str | None = None
    params_b: float | None = Field(default=None, gt=0, le=10_000)
    layers: int | None = Field(default=None, ge=1, le=1000)
    hidden: int | None = Field(default=None, ge=16, le=1_000_000)
    heads: int | None = Field(default=None, ge=1, le=10_000)
    kv_heads: int | None = Field(default=None, ge=1, le=10_000)
    vocab: int | None = Field(default=None, ge=2, le=10_000_000)
    intermediate: int | None = Field(default=None, ge=1, le=10_000_000)
    method: Method = "lora"
    precision: Precision = "bf16"
    # The training stack (app/fit/data/stacks.yaml): loss, dtype policy, checkpointing, QLoRA.
    stack: StackId = DEFAULT_STACK
    # False = standard mixed precision (fp32 master weights + fp32 optimizer states); True =
    # everything in the 16-bit training dtype, as torchtune and LitGPT `bf16-true` do.
    # None = the stack's default.
    pure_16bit: bool | None = None
    # True = packed or fixed-length batches; False = variable-length batches padded per batch
    # (the caching allocator fragments more). None = packed for pretraining, not otherwise.
    packed: bool | None = None
    optimizer: Optimizer = "adamw"
    batch_size: int = Field(default=1, ge=1, le=4096)
    # Micro-batches per optimizer step: gradients stay alive across them (memory) and the
    # optimizer step and gradient all-reduce happen once per step (time).
    grad_accum: int = Field(default=1, ge=1, le=10_000)
    seq_len: int = Field(default=2048, ge=1, le=4_194_304)
    grad_checkpointing: bool = True
    lora_rank: int = Field(default=16, ge=1, le=4096)
    lora_targets: LoraTargets = "all"
    sharding: Sharding = "none"
    gpus: int = Field(default=1, ge=1, le=100_000)
    tokens: float | None = Field(default=None, ge=1, le=1e15)  # a count (5e-324 broke cost/token)
    dataset_tokens: float | None = Field(default=None, ge=1, le=1e15)
    epochs: float = Field(default=1.0, gt=0, le=1000)

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip().lower()
        if not value:
            return None
        if value not in preset_ids():
            raise PydanticCustomError(
                "unknown_model",
                "unknown model id '{value}'; known ids: {known}",
                {"value": value, "known": ", ".join(preset_ids())},
            )
        return value

    @model_validator(mode="after")
    def _cross_field(self) -> Workload:
        # ctx["field"] lets the API attribute these whole-model checks to one query parameter.
        if self.model is None and self.params_b is None:
            raise PydanticCustomError(
                "model_required",
                "model: give a preset model id or params_b (model size in billions)",
                {"field": "model"},
            )
        if self.model is not None and self.params_b is not None:
            raise PydanticCustomError(
                "model_conflict",
                "params_b: give either a preset model or params_b, not both",
                {"field": "params_b"},
            )
        if self.heads and self.kv_heads and self.heads % self.kv_heads:
            raise PydanticCustomError(
                "kv_heads", "kv_heads: must divide heads", {"field": "kv_heads"}
            )
        if self.heads and self.hidden and self.hidden % self.heads:
            raise PydanticCustomError("heads", "heads: must divide hidden", {"field": "heads"})
        if self.tokens is not None and self.dataset_tokens is not None:
            raise PydanticCustomError(
                "tokens_conflict",
                "tokens: give tokens or dataset_tokens with epochs, not both",
                {"field": "tokens"},
            )
        if self.dataset_tokens is not None and self.dataset_tokens * self.epochs < 1:
            # A run of under one token has no cost per token (5e-324 epochs made a 500).
            raise PydanticCustomError(
                "tokens_too_few",
                "epochs: dataset_tokens × epochs must be at least 1 token",
                {"field": "epochs"},
            )
        return self

    @property
    def stack_entry(self) -> Stack:
        """The stack's memory- and speed-relevant behaviour."""
        return get_stack(self.stack)

    @property
    def uses_pure_16bit(self) -> bool:
        """Weights, gradients and optimizer states all 16-bit (explicit, else the stack's way)."""
        if self.precision == "fp32":
            return False
        return self.stack_entry.pure_16bit if self.pure_16bit is None else self.pure_16bit

    @property
    def is_packed(self) -> bool:
        """Fixed-length batches (explicit, else: pretraining packs, fine-tuning pads)."""
        return self.method == "pretrain" if self.packed is None else self.packed

    @property
    def is_peft(self) -> bool:
        """LoRA and QLoRA freeze the base model and train small adapters."""
        return self.method in ("lora", "qlora")

    def train_tokens(self, arch: ModelArch) -> float:
        """Tokens processed over the whole run (see module docs for the defaults)."""
        if self.tokens is not None:
            return self.tokens
        if self.dataset_tokens is not None:
            return self.dataset_tokens * self.epochs
        if self.method == "pretrain":
            return PRETRAIN_TOKENS_PER_PARAM * arch.params
        return DEFAULT_FINETUNE_TOKENS


def resolve_model(workload: Workload) -> ModelArch:
    """The architecture of the workload's preset, or a typical shape for its size."""
    if workload.model is not None:
        return get_preset(workload.model)
    assert workload.params_b is not None  # guaranteed by the validator
    return typical_arch(
        workload.params_b,
        layers=workload.layers,
        hidden=workload.hidden,
        heads=workload.heads,
        kv_heads=workload.kv_heads,
        vocab=workload.vocab,
        intermediate=workload.intermediate,
    )
