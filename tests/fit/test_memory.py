"""Unit tests of the memory formulas and the worked acceptance examples."""

from __future__ import annotations

import pytest

from app.fit import Workload, estimate_memory, resolve_model
from app.fit.memory import (
    GIB,
    NF4_BITS,
    activation_bytes,
    activation_bytes_per_token_layer,
    adapter_bytes_per_param,
    bytes_per_param,
    lora_adapter_params,
    per_gpu_breakdown,
    zero_divisors,
)
from app.fit.presets import count_params, get_preset, preset_ids
from app.fit.topology import CARD_USABLE_GIB, smallest_card_gb


@pytest.mark.parametrize(
    ("precision", "optimizer", "pure", "expected"),
    [
        ("bf16", "adamw", False, 16.0),  # 2 + 2 + 4 master + 4 + 4
        ("fp16", "adamw", False, 16.0),
        ("bf16", "adamw8bit", False, 10.0),  # 2 + 2 + 4 master + 2
        ("bf16", "sgd", False, 12.0),  # 2 + 2 + 4 master + 4 momentum
        ("fp32", "adamw", False, 16.0),  # 4 + 4 + 8
        ("fp32", "sgd", False, 12.0),
        ("bf16", "adamw", True, 8.0),  # 2 + 2 + 2 + 2
        ("bf16", "adamw8bit", True, 6.0),
    ],
)
def test_bytes_per_param(precision: str, optimizer: str, pure: bool, expected: float) -> None:
    assert bytes_per_param(precision, optimizer, pure_16bit=pure).total == expected


def test_adapter_bytes() -> None:
    assert adapter_bytes_per_param("bf16", "adamw") == 16.0
    assert adapter_bytes_per_param("bf16", "adamw", pure_16bit=True) == 8.0


def test_zero_divisors() -> None:
    assert zero_divisors("none", 8) == (1, 1, 1)
    assert zero_divisors("zero1", 8) == (1, 1, 8)
    assert zero_divisors("zero2", 8) == (1, 8, 8)
    assert zero_divisors("zero3", 8) == (8, 8, 8)


def test_zero_stages_shrink_model_states() -> None:
    w = Workload(model="llama-3.1-8b", method="full", gpus=8)
    arch = resolve_model(w)
    n = arch.params
    states = {}
    for stage in ("none", "zero1", "zero2", "zero3"):
        bd = per_gpu_breakdown(w, arch, 8, stage)
        states[stage] = (bd.weights_gib + bd.gradients_gib + bd.optimizer_gib) * GIB
    assert states["none"] == pytest.approx(16 * n)
    assert states["zero1"] == pytest.approx(4 * n + 12 * n / 8)
    assert states["zero2"] == pytest.approx(2 * n + 14 * n / 8)
    assert states["zero3"] == pytest.approx(16 * n / 8)


def test_nf4_bits_match_qlora_paper() -> None:
    assert NF4_BITS - 4 == pytest.approx(0.127, abs=1e-3)


def test_activation_korthikanti_without_dropout_for_gpt2_shape() -> None:
    # GPT-2 shape (MHA, 4h GELU MLP): 32 s·b·h = Korthikanti's 34 minus the dropout masks.
    arch = get_preset("gpt2")
    assert activation_bytes_per_token_layer(arch) == 32 * arch.hidden


def test_activation_checkpointing() -> None:
    arch = get_preset("llama-3.1-8b")
    tokens = 4096
    full = activation_bytes(arch, tokens, checkpointing=False, elem=2)
    ckpt = activation_bytes(arch, tokens, checkpointing=True, elem=2)
    per_layer = activation_bytes_per_token_layer(arch) * tokens
    assert full == pytest.approx(arch.layers * per_layer)
    assert ckpt == pytest.approx(arch.layers * 2 * arch.hidden * tokens + per_layer)
    assert ckpt < full / 5


def test_lora_adapter_params_llama2_qv_rank8() -> None:
    # LitGPT reports 4,194,304 trainable parameters for Llama 2 7B, r=8 on q and v.
    assert lora_adapter_params(get_preset("llama-2-7b"), 8, "qv") == 4_194_304


def test_frozen_base_has_no_grads_or_optimizer() -> None:
    for method in ("lora", "qlora"):
        bd = estimate_memory(Workload(model="llama-3.1-8b", method=method)).breakdown
        assert bd.gradients_gib == 0 and bd.optimizer_gib == 0 and bd.adapter_gib > 0


def test_presets_param_counts_match_shapes() -> None:
    for pid in preset_ids():
        arch = get_preset(pid)
        assert count_params(arch) == pytest.approx(arch.params, rel=0.03), pid


def test_required_presets_exist() -> None:
    required = {
        "llama-3.2-1b",
        "llama-3.2-3b",
        "llama-3.1-8b",
        "llama-3.1-70b",
        "llama-3.1-405b",
        "mistral-7b",
        "mixtral-8x7b",
        "qwen2.5-0.5b",
        "qwen2.5-1.5b",
        "qwen2.5-7b",
        "qwen2.5-14b",
        "qwen2.5-32b",
        "qwen2.5-72b",
        "gemma-2-2b",
        "gemma-2-9b",
        "gemma-2-27b",
        "phi-3-mini",
        "gpt2",
    }
    assert required <= set(preset_ids())


@pytest.mark.parametrize("size", [0.3, 1.0, 5.0, 13.0, 30.0, 100.0, 500.0])
def test_typical_shape_matches_size(size: float) -> None:
    arch = resolve_model(Workload(params_b=size))
    assert count_params(arch) == pytest.approx(size * 1e9, rel=0.1)
    assert arch.heads % arch.kv_heads == 0


def test_card_sizes() -> None:
    assert smallest_card_gb(20) == 24
    assert smallest_card_gb(79.0) == 80
    assert smallest_card_gb(80.0) == 94
    assert smallest_card_gb(500) is None
    assert CARD_USABLE_GIB[80] == pytest.approx(79.6)


# Worked examples from the issue (acceptance criteria).


def test_llama8b_qlora_fits_24gb() -> None:
    est = estimate_memory(Workload(model="llama-3.1-8b", method="qlora", lora_rank=16))
    assert est.per_gpu_gib <= CARD_USABLE_GIB[24]
    assert est.fits_gpu_gib is not None and est.fits_gpu_gib <= 24
    assert est.topology == "single-gpu"


def test_llama8b_full_needs_sharding() -> None:
    one = estimate_memory(Workload(model="llama-3.1-8b", method="full"))
    assert one.per_gpu_gib > CARD_USABLE_GIB[80]
    eight = estimate_memory(Workload(model="llama-3.1-8b", method="full", gpus=8, sharding="zero3"))
    assert eight.per_gpu_gib <= CARD_USABLE_GIB[80]


def test_llama70b_qlora_fits_80gb() -> None:
    est = estimate_memory(Workload(model="llama-3.1-70b", method="qlora"))
    assert est.per_gpu_gib <= CARD_USABLE_GIB[80]
    assert est.topology == "single-gpu"


def test_llama70b_full_needs_multi_node() -> None:
    w = Workload(model="llama-3.1-70b", method="full", gpus=8, sharding="zero3")
    est = estimate_memory(w)
    states = (
        (est.breakdown.weights_gib + est.breakdown.gradients_gib + est.breakdown.optimizer_gib)
        * 8
        * GIB
    )
    assert states > 1e12
    assert est.per_gpu_gib > CARD_USABLE_GIB[80]
    assert est.topology == "multi-node"
    assert est.gpus_needed is not None and est.gpus_needed > 8
    assert any("InfiniBand" in n for n in est.notes)
