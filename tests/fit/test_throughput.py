"""The time model: each term moves the way the hardware says, and the estimate is fast."""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

import pytest

from app.fit import OfferFacts, Workload, assess_offer, estimate_memory, resolve_model
from app.fit.estimate import estimate_time
from app.fit.hardware import (
    HOST_STAGED_EFFICIENCY,
    NCCL_LINK_EFFICIENCY,
    Links,
    collective_busbw,
    gpu_facts,
    intra_node_busbw,
)
from app.fit.throughput import TimeEstimate, peak_tflops, time_refusal, training_time
from app.gpus.catalog import load_catalog, load_performance


def _time(workload: Workload, slug: str, links: Links | None = None) -> TimeEstimate:
    gpu = gpu_facts(slug)
    assert gpu is not None
    result = training_time(workload, resolve_model(workload), gpu, links or Links())
    assert result is not None
    return result


def test_every_catalog_gpu_has_sourced_efficiencies() -> None:
    perf = load_performance()
    assert set(perf) == set(load_catalog())
    for slug, p in perf.items():
        assert 0.3 <= p.matmul_efficiency <= 1.0, slug
        assert 0.2 <= p.attention_efficiency <= 1.0, slug
        assert len(p.source) > 30, slug
    assert perf["a100-80gb-sxm"].matmul_efficiency == 0.869  # MAMF table
    assert perf["h100-sxm"].matmul_efficiency == 0.803
    assert not perf["rtx-4090"].p2p and perf["a100-80gb-pcie"].p2p


def test_bf16_is_refused_without_bf16_and_fp16_uses_the_fp16_peak() -> None:
    v100 = gpu_facts("v100-32gb")
    assert v100 is not None
    bf16 = Workload(model="llama-3.2-1b", method="lora")
    assert time_refusal(bf16, v100) == "no bf16 on V100 32GB: choose precision=fp16"
    assert training_time(bf16, resolve_model(bf16), v100, Links()) is None
    fp16 = bf16.model_copy(update={"precision": "fp16"})
    assert time_refusal(fp16, v100) is None
    assert peak_tflops(fp16, v100) == 112.0
    assert _time(fp16, "v100-32gb").peak_tflops == 112.0


def test_attention_square_term_slows_long_sequences() -> None:
    # Same tokens per micro-batch: 4 x 2048 against 1 x 8192.
    short = Workload(model="llama-3.1-8b", method="full", batch_size=4, seq_len=2048)
    long = short.model_copy(update={"batch_size": 1, "seq_len": 8192})
    t_short, t_long = _time(short, "a100-80gb-sxm"), _time(long, "a100-80gb-sxm")
    assert t_long.attention_s == pytest.approx(4 * t_short.attention_s)
    assert t_long.compute_s == pytest.approx(t_short.compute_s)
    assert t_long.tokens_per_s_per_gpu < 0.9 * t_short.tokens_per_s_per_gpu
    assert t_long.mfu > t_short.mfu * 0.9  # MFU counts the attention FLOPs too


def test_small_models_and_micro_batches_run_at_lower_mfu() -> None:
    big = _time(Workload(model="llama-3.1-8b", method="full", batch_size=4), "h100-sxm")
    small = _time(Workload(model="qwen2.5-0.5b", method="full", batch_size=4), "h100-sxm")
    assert small.mfu < big.mfu
    tiny_batch = _time(
        Workload(model="llama-3.1-8b", method="qlora", batch_size=1, seq_len=256), "rtx-4090"
    )
    batch = _time(
        Workload(model="llama-3.1-8b", method="qlora", batch_size=8, seq_len=2048), "rtx-4090"
    )
    assert tiny_batch.mfu < 0.8 * batch.mfu
    assert tiny_batch.dequant_s / tiny_batch.step_s > batch.dequant_s / batch.step_s


def test_qlora_pays_for_dequantisation() -> None:
    lora = Workload(model="llama-3.1-8b", method="lora", stack="torchtune", batch_size=2)
    qlora = lora.model_copy(update={"method": "qlora"})
    t_lora, t_qlora = _time(lora, "rtx-4090"), _time(qlora, "rtx-4090")
    assert t_lora.dequant_s == 0 and t_qlora.dequant_s > 0
    assert t_qlora.tokens_per_s_per_gpu < t_lora.tokens_per_s_per_gpu


def test_links_bandwidths() -> None:
    h100, rtx = gpu_facts("h100-sxm"), gpu_facts("rtx-4090")
    a100_pcie = gpu_facts("a100-80gb-pcie")
    assert h100 is not None and rtx is not None and a100_pcie is not None
    nvswitch = Links(gpus_per_node=8, interconnect="nvswitch")
    assert intra_node_busbw(h100, nvswitch) == 900 / 2 * NCCL_LINK_EFFICIENCY
    pcie = Links(gpus_per_node=2, interconnect="pcie")
    assert intra_node_busbw(a100_pcie, pcie) == 31.5 * NCCL_LINK_EFFICIENCY
    assert intra_node_busbw(rtx, pcie) == 31.5 * HOST_STAGED_EFFICIENCY  # no P2P on GeForce
    ib = Links(gpus_per_node=8, nodes=2, interconnect="nvswitch", network="infiniband",
               network_gbps=3200)  # fmt: skip
    eth = replace(ib, network="ethernet", network_gbps=100)
    assert collective_busbw(h100, ib) == 3200 / 8 / 8 * NCCL_LINK_EFFICIENCY
    assert collective_busbw(h100, eth) < collective_busbw(h100, ib) / 20


def test_sharded_training_over_pcie_spends_more_time_communicating() -> None:
    w = Workload(model="llama-3.1-8b", method="full", sharding="zero3", gpus=4)
    nvlink = _time(w, "a100-80gb-pcie", Links(gpus_per_node=4, interconnect="nvlink"))
    pcie = _time(w, "a100-80gb-pcie", Links(gpus_per_node=4, interconnect="pcie"))
    assert pcie.comm_share > nvlink.comm_share
    assert pcie.tokens_per_s_per_gpu < nvlink.tokens_per_s_per_gpu
    # LoRA under DDP moves only adapter gradients: PCIe barely matters.
    lora = Workload(model="llama-3.1-8b", method="lora", gpus=4)
    assert (
        _time(lora, "a100-80gb-pcie", Links(gpus_per_node=4, interconnect="pcie")).comm_share < 0.02
    )


def test_gradient_accumulation_amortises_the_all_reduce() -> None:
    w = Workload(model="llama-3.2-1b", method="full", gpus=8, batch_size=2)
    links = Links(gpus_per_node=8, interconnect="pcie")
    once = _time(w, "l40s", links)
    accumulated = _time(w.model_copy(update={"grad_accum": 8}), "l40s", links)
    assert accumulated.comm_share < once.comm_share
    assert accumulated.tokens_per_s_per_gpu > once.tokens_per_s_per_gpu


def test_hours_follow_tokens_speed_and_gpus() -> None:
    w = Workload(model="llama-3.1-8b", method="lora", tokens=1e9, gpus=2)
    t = _time(w, "h100-sxm", Links(gpus_per_node=2, interconnect="nvswitch"))
    assert t.hours == pytest.approx(1e9 / (t.tokens_per_s_per_gpu * 2) / 3600)
    assert t.step_s == pytest.approx(2048 / t.tokens_per_s_per_gpu)


def test_assess_offer_and_estimate_time_agree() -> None:
    w = Workload(model="llama-3.1-8b", method="full", sharding="zero3", gpus=8, tokens=5e8)
    est = estimate_memory(w)
    offer = OfferFacts(
        gpu_count=8, vram_gib_per_gpu=79.6, bf16_tflops=989, fp16_tflops=989,
        memory_type="HBM3", interconnect="nvswitch", nvlink_gbps=900, billing="second",
        price_per_hour=20.0, gpu_slug="h100-sxm",
    )  # fmt: skip
    fit = assess_offer(w, est, offer)
    answer = estimate_time(w, est, "h100-sxm", interconnect="nvswitch")
    assert answer is not None and answer.time is not None
    # Training time agrees; the expected job adds set-up and checkpoint writes to it.
    assert fit.run_hours == pytest.approx(answer.time.hours, rel=1e-12)
    assert fit.mfu == pytest.approx(answer.time.mfu)
    overheads = (fit.setup_hours or 0.0) + (fit.checkpoint_hours or 0.0)
    assert fit.est_hours == pytest.approx(answer.time.hours + overheads, rel=1e-12)


def test_estimate_answers_in_under_5_ms_in_process() -> None:
    w = Workload(
        model="llama-3.1-70b", method="full", sharding="zero3", gpus=16, stack="torchtitan"
    )
    samples = []
    for _ in range(30):
        start = time.perf_counter()
        est = estimate_memory(w)
        estimate_time(w, est, "h100-sxm", network="infiniband", network_gbps=3200)
        samples.append(time.perf_counter() - start)
    assert statistics.median(samples) < 0.005, samples
