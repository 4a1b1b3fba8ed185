"""Offer assessment: fit by offer GPU count, billing rounding, spot costing, ranking."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.fit import JobTerms, OfferFacts, Workload, assess_offer, estimate_memory, rank_key
from app.fit.cost import billed_hours, flops_per_token
from app.fit.market import expected_spot_overhead_hours, spot_risk_for_band
from app.fit.presets import get_preset

H100 = OfferFacts(
    gpu_count=8,
    vram_gib_per_gpu=79.6,
    bf16_tflops=989.0,
    fp16_tflops=989.0,
    memory_type="HBM3",
    interconnect="nvswitch",
    nvlink_gbps=900.0,
    network="infiniband",
    network_gbps=3200.0,
    billing="second",
    price_per_hour=24.0,
    spot_price_per_hour=12.0,
    spot=False,
    availability="in_stock",
    gpu_slug="h100-sxm",
)


def test_flops_per_token() -> None:
    arch = get_preset("llama-3.1-8b")
    n = arch.params
    assert (
        flops_per_token(
            Workload(model="llama-3.1-8b", method="full", grad_checkpointing=False), arch
        )
        == 6 * n
    )
    assert flops_per_token(Workload(model="llama-3.1-8b", method="full"), arch) == 8 * n
    lora = flops_per_token(
        Workload(model="llama-3.1-8b", method="lora", grad_checkpointing=False), arch
    )
    assert 4 * n < lora < 4.1 * n


def test_moe_flops_use_active_params() -> None:
    arch = get_preset("mixtral-8x7b")
    w = Workload(model="mixtral-8x7b", method="full", grad_checkpointing=False)
    assert flops_per_token(w, arch) == 6 * arch.active_params


def test_billing_rounding() -> None:
    assert billed_hours(0.2, "hour") == 1.0
    assert billed_hours(0.2, "unknown") == 1.0
    assert billed_hours(1.01, "hour") == 2.0
    assert billed_hours(0.2, "minute") == pytest.approx(12 / 60)
    assert billed_hours(0.2001, "minute") == pytest.approx(13 / 60)
    assert billed_hours(0.5, "second") == pytest.approx(0.5)
    assert billed_hours(1.0, "hour") == 1.0


def test_spot_costs_the_providers_interruption_risk() -> None:
    w = Workload(model="llama-3.1-8b", method="qlora")
    est = estimate_memory(w)
    one = replace(H100, gpu_count=1, provider="nebius")
    on_demand = assess_offer(w, est, one, JobTerms(market="on_demand"))
    spot = assess_offer(w, est, one, JobTerms(market="spot"))
    assert on_demand.market_used == "on_demand" and spot.market_used == "spot"
    assert on_demand.est_hours is not None and spot.est_hours is not None
    assert spot.run_hours == on_demand.run_hours and spot.setup_hours == on_demand.setup_hours
    risk = spot_risk_for_band("nebius", None)
    assert spot.spot_rate_per_hour == risk.per_hour and spot.spot_risk_source == risk.source
    working = spot.run_hours + (spot.checkpoint_hours or 0.0)  # type: ignore[operator]
    lost = expected_spot_overhead_hours(working, risk.per_hour, 60, 60 * spot.setup_hours)  # type: ignore[operator]
    assert spot.est_hours == pytest.approx(on_demand.est_hours + lost)
    assert spot.est_total_cost is not None and on_demand.est_total_cost is not None
    assert spot.est_total_cost < on_demand.est_total_cost  # half price beats a few % of losses
    assert "spot $12.00/h" in spot.explanation and "expected spot losses" in spot.explanation


def test_uses_offer_gpu_count() -> None:
    w = Workload(model="llama-3.1-8b", method="full", sharding="zero3", gpus=8)
    est = estimate_memory(w)
    assert assess_offer(w, est, H100).fits and assess_offer(w, est, H100).nodes == 1
    # One GPU alone cannot hold it, and a listing without a network cannot join others.
    single = assess_offer(w, est, replace(H100, gpu_count=1, network="none"))
    assert not single.fits
    assert (
        single.reason and "GiB" in single.reason and "no network between listings" in single.reason
    )
    assert single.explanation.startswith("does not fit")
    # Over InfiniBand, identical one-GPU listings join into a plan.
    joined = assess_offer(w, est, replace(H100, gpu_count=1))
    assert joined.fits and joined.nodes > 1 and joined.plan_gpu_count == joined.nodes


def test_auto_zero3_when_unsharded_job_does_not_fit() -> None:
    w = Workload(model="llama-3.1-8b", method="full")
    fit = assess_offer(w, estimate_memory(w), H100)
    assert fit.fits and fit.sharding_used == "zero3"
    assert "zero3" in fit.explanation


def test_unknown_vram_not_dropped() -> None:
    w = Workload(model="llama-3.1-8b", method="qlora")
    fit = assess_offer(w, estimate_memory(w), replace(H100, vram_gib_per_gpu=None))
    assert not fit.fits and fit.reason == "VRAM per GPU unknown"


def test_explanation_shape() -> None:
    w = Workload(model="llama-3.1-8b", method="full", tokens=50e6)
    fit = assess_offer(w, estimate_memory(w), H100)
    assert fit.explanation.startswith("fits with ")
    assert "8× H100 SXM · NVSwitch 900 GB/s" in fit.explanation
    assert "per-second billing" in fit.explanation
    assert "run " in fit.explanation and "set-up " in fit.explanation and "$" in fit.explanation
    # Cost per million tokens is the running cost (set-up and rounding aside) per 50M tokens.
    running = fit.est_hours - fit.setup_hours  # type: ignore[operator]
    assert fit.price_used_per_hour == 12.0  # the spot price: the lower expected total
    assert fit.cost_per_m_tokens == pytest.approx(running * 12.0 / 50)


def test_pcie_ranks_below_nvlink_at_equal_price() -> None:
    w = Workload(model="llama-3.1-8b", method="full", sharding="zero3", gpus=4)
    est = estimate_memory(w)
    nvlink = replace(H100, gpu_count=4, interconnect="nvlink", billing="hour")
    pcie = replace(nvlink, interconnect="pcie", nvlink_gbps=None)
    fits = [assess_offer(w, est, pcie), assess_offer(w, est, nvlink)]
    ranked = sorted(fits, key=rank_key)
    assert ranked[0] is fits[1]
    assert "bottleneck" in fits[0].factors["interconnect"]


def test_pcie_ranks_below_nvlink_even_when_cost_ties() -> None:
    w = Workload(model="llama-3.1-8b", method="full", sharding="zero3", gpus=4, tokens=1e6)
    est = estimate_memory(w)
    nvlink = replace(H100, gpu_count=4, interconnect="nvlink", billing="hour")
    pcie = replace(nvlink, interconnect="pcie")
    a, b = assess_offer(w, est, pcie), assess_offer(w, est, nvlink)
    assert a.est_total_cost == b.est_total_cost  # both round up to one hour
    assert sorted([a, b], key=rank_key)[0] is b


def test_per_second_beats_hourly_for_short_job() -> None:
    w = Workload(model="llama-3.2-1b", method="lora")
    est = estimate_memory(w)
    base = replace(H100, gpu_count=1, spot_price_per_hour=None)
    run_h = assess_offer(w, est, replace(base, billing="second")).run_hours
    assert run_h is not None
    # Scale tokens so the job runs ~20 minutes on this card; set-up is your 5 minutes.
    w20 = Workload(model="llama-3.2-1b", method="lora", tokens=100e6 * (1 / 3) / run_h)
    est20 = estimate_memory(w20)
    terms = JobTerms(setup_minutes=5)
    per_second = assess_offer(w20, est20, replace(base, billing="second"), terms)
    hourly = assess_offer(w20, est20, replace(base, billing="hour"), terms)
    assert per_second.est_hours == pytest.approx(1 / 3 + 5 / 60, rel=1e-3)
    assert hourly.billed_hours == 1.0
    ranked = sorted([hourly, per_second], key=rank_key)
    assert ranked[0] is per_second
    assert per_second.est_total_cost == pytest.approx(24.0 * (1 / 3 + 5 / 60), rel=1e-3)


def test_non_fitting_ranks_last() -> None:
    w = Workload(model="llama-3.1-70b", method="qlora")
    est = estimate_memory(w)
    small = replace(H100, gpu_count=1, vram_gib_per_gpu=22.5, price_per_hour=0.1, network="none")
    big = replace(H100, gpu_count=1)
    fits = sorted([assess_offer(w, est, small), assess_offer(w, est, big)], key=rank_key)
    assert fits[0].fits and not fits[1].fits


def test_multi_node_needs_fast_network() -> None:
    w = Workload(model="llama-3.1-70b", method="full", sharding="zero3", gpus=16)
    est = estimate_memory(w)
    cluster = replace(H100, gpu_count=16)
    ib = assess_offer(w, est, cluster)
    eth = assess_offer(w, est, replace(cluster, network="ethernet"))
    assert ib.fits and eth.fits
    assert "bottleneck" in eth.factors["network"]
    assert sorted([eth, ib], key=rank_key)[0] is ib
