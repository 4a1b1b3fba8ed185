"""Training stacks (data/stacks.yaml): what each does that changes memory or speed, with sources.

A stack is a data entry, not code: how the loss treats the logits, the default dtype policy, the
adapter dtype, what activation checkpointing means, how QLoRA is implemented, whether norms and
activations run as fused kernels, and the host-side cost that sets its speed on small batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

StackId = Literal["hf", "hf-liger", "torchtune", "litgpt", "unsloth", "torchtitan"]
STACK_IDS: tuple[str, ...] = ("hf", "hf-liger", "torchtune", "litgpt", "unsloth", "torchtitan")
DEFAULT_STACK: StackId = "hf"


class _QLoraEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    implementation: str
    quantized: Literal["all_linear", "lora_targets"]
    other_params_bytes: float = Field(gt=0, le=4)
    dequant_bytes_per_param: float = Field(gt=0, le=32)
    saves_inputs: bool


class _StackEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    loss: Literal["upcast", "chunked", "fused"]
    logits_bytes: float = Field(default=0.0, ge=0, le=32)
    fused_bytes_per_token_hidden: float = Field(default=0.0, ge=0, le=64)
    pure_16bit: bool
    adapter_bytes: float = Field(gt=0, le=4)
    checkpointing: Literal["full", "selective", "offloaded"]
    qlora: _QLoraEntry
    eager_overhead_us: float = Field(ge=0, le=100_000)
    fused_kernels: bool
    sources: dict[str, str]


@dataclass(frozen=True)
class QLoraImpl:
    """How a stack stores and uses 4-bit base weights."""

    implementation: str
    quantized: str
    other_params_bytes: float
    dequant_bytes_per_param: float
    saves_inputs: bool


@dataclass(frozen=True)
class Stack:
    """One training stack's memory- and speed-relevant behaviour (see data/stacks.yaml)."""

    id: str
    name: str
    loss: str
    logits_bytes: float
    fused_bytes_per_token_hidden: float
    pure_16bit: bool
    adapter_bytes: float
    checkpointing: str
    qlora: QLoraImpl
    eager_overhead_us: float
    fused_kernels: bool
    sources: dict[str, str]


@lru_cache(maxsize=1)
def _stacks() -> dict[str, Stack]:
    text = resources.files("app.fit").joinpath("data/stacks.yaml").read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    if not isinstance(raw, dict) or tuple(raw) != STACK_IDS:
        raise RuntimeError(f"app/fit/data/stacks.yaml must define exactly {STACK_IDS} in order")
    out: dict[str, Stack] = {}
    for sid, item in raw.items():
        entry = _StackEntry.model_validate(item)
        fields = entry.model_dump(exclude={"qlora"})
        out[sid] = Stack(id=sid, qlora=QLoraImpl(**entry.qlora.model_dump()), **fields)
    return out


def get_stack(stack_id: str) -> Stack:
    """The stack's entry; KeyError for an unknown id (the Workload validator prevents that)."""
    return _stacks()[stack_id]


def all_stacks() -> list[Stack]:
    """Every stack, in file order."""
    return list(_stacks().values())
