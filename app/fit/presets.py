"""Model architectures: named presets (from each model's config.json) and typical shapes by size.

A preset gives the exact numbers the memory model needs (layers, hidden size, heads, KV heads,
vocabulary, MLP width). A bare size (`params_b`) gets a typical Llama-style decoder shape,
interpolated in log-parameter space between real models of neighbouring size, with the MLP width
solved so the parameter count comes out at the requested size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml


@dataclass(frozen=True)
class ModelArch:
    """Decoder-only transformer shape; `params` and `active_params` are counts, not billions."""

    id: str
    name: str
    params: float
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    intermediate: int
    gated_mlp: bool = True
    tied_embeddings: bool = False
    experts: int = 1
    experts_per_token: int = 1
    active_params: float = 0.0

    @property
    def params_b(self) -> float:
        """Total parameters in billions."""
        return self.params / 1e9

    @property
    def flops_params(self) -> float:
        """Parameters touched per token (MoE: shared + routed experts); used for FLOPs."""
        return self.active_params or self.params

    @property
    def embedding_params(self) -> float:
        """Input embedding plus (untied) output head parameters; never 4-bit quantized."""
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def layer_linear_params(self) -> float:
        """Weights of one layer's linear projections (all experts for MoE)."""
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        mlp = (3 if self.gated_mlp else 2) * self.hidden * self.intermediate * self.experts
        return float(attn + mlp)


def count_params(arch: ModelArch) -> float:
    """Parameter count implied by the shape: embeddings + per-layer projections + norms."""
    norms = 2 * arch.hidden
    return arch.embedding_params + arch.layers * (arch.layer_linear_params + norms) + arch.hidden


@lru_cache(maxsize=1)
def _raw_presets() -> dict[str, dict[str, Any]]:
    text = resources.files("app.fit").joinpath("data/presets.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise RuntimeError("app/fit/data/presets.yaml must map preset id -> fields")
    return data


def preset_ids() -> list[str]:
    """All preset ids, in file order."""
    return list(_raw_presets())


def get_preset(model_id: str) -> ModelArch:
    """The preset's architecture; KeyError for an unknown id."""
    raw = _raw_presets()[model_id]
    heads = int(raw["heads"])
    hidden = int(raw["hidden"])
    return ModelArch(
        id=model_id,
        name=str(raw.get("name", model_id)),
        params=float(raw["params_b"]) * 1e9,
        active_params=float(raw.get("active_params_b", 0.0)) * 1e9,
        layers=int(raw["layers"]),
        hidden=hidden,
        heads=heads,
        kv_heads=int(raw["kv_heads"]),
        head_dim=int(raw.get("head_dim", hidden // heads)),
        vocab=int(raw["vocab"]),
        intermediate=int(raw["intermediate"]),
        gated_mlp=bool(raw.get("gated_mlp", True)),
        tied_embeddings=bool(raw.get("tied_embeddings", False)),
        experts=int(raw.get("experts", 1)),
        experts_per_token=int(raw.get("experts_per_token", 1)),
    )


# (params_b, layers, hidden) of real dense decoders (Qwen2.5 0.5B, Llama 3.2 1B/3B, Llama 3.1 8B,
# Qwen2.5 14B/32B, Llama 3.1 70B/405B); intermediate width is solved from the size instead.
_TYPICAL_SHAPES: tuple[tuple[float, int, int], ...] = (
    (0.1, 12, 768),
    (0.5, 24, 896),
    (1.2, 16, 2048),
    (3.2, 28, 3072),
    (8.0, 32, 4096),
    (14.8, 48, 5120),
    (32.8, 64, 5120),
    (70.6, 80, 8192),
    (405.0, 126, 16384),
)
_TYPICAL_VOCAB = 128256  # modern tokenizers (Llama 3); large vocabularies dominate logits memory
_HEAD_DIM = 128


def _interp_shape(params_b: float) -> tuple[int, int]:
    table = _TYPICAL_SHAPES
    x = math.log(max(params_b, table[0][0]))
    if params_b >= table[-1][0]:
        lo, hi = table[-2], table[-1]
    else:
        lo, hi = next((a, b) for a, b in zip(table, table[1:], strict=False) if b[0] >= params_b)
    t = (x - math.log(lo[0])) / (math.log(hi[0]) - math.log(lo[0]))
    layers = math.exp(math.log(lo[1]) + t * (math.log(hi[1]) - math.log(lo[1])))
    hidden = math.exp(math.log(lo[2]) + t * (math.log(hi[2]) - math.log(lo[2])))
    step = 1024 if hidden >= 2048 else 128  # keeps heads a multiple of the 8 KV heads
    return max(1, round(layers)), max(128, round(hidden / step) * step)


def typical_arch(
    params_b: float,
    *,
    layers: int | None = None,
    hidden: int | None = None,
    heads: int | None = None,
    kv_heads: int | None = None,
    vocab: int | None = None,
    intermediate: int | None = None,
) -> ModelArch:
    """A plausible Llama-style shape for a model of `params_b` billions; given fields are kept."""
    guess_layers, guess_hidden = _interp_shape(params_b)
    layers = layers or guess_layers
    hidden = hidden or guess_hidden
    heads = heads or max(1, hidden // _HEAD_DIM)
    kv_heads = kv_heads or math.gcd(heads, 8)
    head_dim = max(1, hidden // heads)
    vocab = vocab or (_TYPICAL_VOCAB if params_b >= 1.0 else 50257)
    tied = params_b < 4.0  # small modern models tie input and output embeddings
    params = params_b * 1e9
    if intermediate is None:
        embed = vocab * hidden * (1 if tied else 2)
        attn = hidden * head_dim * (2 * heads + 2 * kv_heads)
        per_layer_mlp = (params - embed) / layers - attn
        intermediate = max(2 * hidden, round(per_layer_mlp / (3 * hidden) / 64) * 64)
    return ModelArch(
        id="custom",
        name=f"custom {params_b:g}B",
        params=params,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        vocab=vocab,
        intermediate=intermediate,
        tied_embeddings=tied,
    )
