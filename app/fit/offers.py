"""assess_offer: does a workload fit an offer, how long does it take and what does it cost.

GPU count: the offer's count is used, not the workload's `gpus` (which only shapes the
stand-alone estimate). The workload's sharding is applied at the offer's count; when that does not
fit and the offer has several GPUs, the job is re-assessed with ZeRO-3 (FSDP full shard) as "what
it would take", and the explanation says so. Fractional counts (shared GPUs) count as one GPU for
memory and at their fraction for throughput.
"""

from __future__ import annotations

import math
from dataclasses import replace

from app.fit.cost import (
    FAST_NETWORKS,
    GPUS_PER_NODE,
    assumed_mfu,
    billed_hours,
    compute_hours,
    peak_tflops,
    spot_overhead_hours,
    training_flops,
)
from app.fit.estimate import MemoryEstimate
from app.fit.explain import explain_fit, factor_texts
from app.fit.memory import per_gpu_breakdown
from app.fit.offer_facts import OfferFacts, OfferFit
from app.fit.workload import Workload

INTERCONNECT_RANK = {"nvswitch": 0, "nvlink": 1, "unknown": 2, "pcie": 3}
BILLING_RANK = {"second": 0, "minute": 1, "hour": 2, "unknown": 3}
AVAILABILITY_RANK = {"in_stock": 0, "limited": 1, "unknown": 2, "out": 3}


def _spot_risk(spot: bool, hours: float | None) -> float:
    return 0.0 if not spot else 1.0 + (hours or 0.0) / 24


def _score(
    fits: bool,
    headroom: float | None,
    interconnect_penalty: bool,
    billing: str,
    availability: str,
    spot: bool,
) -> float | None:
    """0-100 fit quality independent of price: headroom, interconnect, billing, stock, spot."""
    if not fits:
        return None
    score = 100.0
    if headroom is not None and headroom < 10:
        score -= 20 - 2 * max(0.0, headroom)
    if interconnect_penalty:
        score -= 15
    score -= {"second": 0, "minute": 2, "hour": 5}.get(billing, 8)
    score -= {"in_stock": 0, "limited": 10, "out": 40}.get(availability, 5)
    if spot:
        score -= 10
    return max(0.0, score)


def assess_offer(
    workload: Workload, estimate: MemoryEstimate, offer: OfferFacts, *, use_spot: bool = False
) -> OfferFit:
    """Fit, time, cost, factors and a one-line explanation of `workload` on `offer`."""
    arch = estimate.arch
    gpus = max(1, math.floor(offer.gpu_count))
    sharding = workload.sharding
    bd = per_gpu_breakdown(workload, arch, gpus, sharding)
    auto_zero3 = False
    vram = offer.vram_gib_per_gpu
    if vram is not None and bd.total_gib > vram and gpus > 1 and sharding != "zero3":
        alt = per_gpu_breakdown(workload, arch, gpus, "zero3")
        if alt.total_gib <= vram:
            bd, sharding, auto_zero3 = alt, "zero3", True
    need = bd.total_gib
    spot = offer.spot or use_spot
    price = offer.price_per_hour
    if spot:
        price = (
            offer.spot_price_per_hour
            if offer.spot_price_per_hour is not None
            else (offer.price_per_hour if offer.spot else None)
        )
    multi_gpu = gpus > 1
    multi_node = gpus > GPUS_PER_NODE
    interconnect_penalty = multi_gpu and offer.interconnect in ("pcie", "unknown")
    factors = factor_texts(
        offer,
        multi_gpu=multi_gpu,
        multi_node=multi_node,
        spot=spot,
        auto_zero3=auto_zero3,
        sharding=sharding,
    )
    tiebreak_base = (
        float(INTERCONNECT_RANK.get(offer.interconnect, 2) if multi_gpu else 0),
        float(BILLING_RANK.get(offer.billing, 3)),
        float(AVAILABILITY_RANK.get(offer.availability, 2)),
    )
    if vram is None or need > vram:
        if vram is None:
            reason = "VRAM per GPU unknown"
        else:
            layout = (
                f"; needs {estimate.gpus_needed}x80 GB-class GPUs ({estimate.layout_sharding})"
                if estimate.gpus_needed and estimate.gpus_needed > gpus
                else ""
            )
            reason = (
                f"needs {need:.1f} GiB per GPU with {sharding} on {gpus} GPU(s), "
                f"card has {vram:.1f} GiB{layout}"
            )
        return OfferFit(
            fits=False,
            per_gpu_gib_needed=need,
            headroom_pct=None,
            est_hours=None,
            billed_hours=None,
            est_total_cost=None,
            cost_per_m_tokens=None,
            score=None,
            factors=factors,
            explanation=f"does not fit: {reason}",
            reason=reason,
            sharding_used=sharding,
            tiebreak=(*tiebreak_base, _spot_risk(spot, None), 0.0),
        )
    headroom = (vram - need) / vram * 100
    factors["headroom"] = f"{headroom:.0f}% VRAM headroom"
    tflops = peak_tflops(offer.bf16_tflops, offer.fp16_tflops)
    est_h = billed = cost = per_m = None
    tokens = workload.train_tokens(arch)
    if tflops:
        mfu = assumed_mfu(
            method=workload.method,
            gpus=offer.gpu_count,
            memory_type=offer.memory_type,
            interconnect=offer.interconnect,
            network=offer.network,
        )
        factors["mfu"] = f"assumed MFU {mfu:.2f}"
        est_h = compute_hours(training_flops(workload, arch), tflops, offer.gpu_count, mfu)
        if spot:
            est_h += spot_overhead_hours(est_h)
        billed = billed_hours(est_h, offer.billing)
        if price is not None:
            cost = billed * price
            per_m = cost / (tokens / 1e6)
    if multi_node and offer.network not in FAST_NETWORKS:
        factors["network"] = f"{offer.network} between nodes: bottleneck, IB/RoCE/EFA advised"
    fit = OfferFit(
        fits=True,
        per_gpu_gib_needed=need,
        headroom_pct=headroom,
        est_hours=est_h,
        billed_hours=billed,
        est_total_cost=cost,
        cost_per_m_tokens=per_m,
        score=_score(True, headroom, interconnect_penalty, offer.billing, offer.availability, spot),
        factors=factors,
        explanation="",
        reason=None,
        sharding_used=sharding,
        tiebreak=(*tiebreak_base, _spot_risk(spot, est_h), -headroom),
    )
    return _with_explanation(fit, offer, auto_zero3, sharding)


def _with_explanation(
    fit: OfferFit, offer: OfferFacts, auto_zero3: bool, sharding: str
) -> OfferFit:
    return replace(
        fit, explanation=explain_fit(fit, offer, auto_zero3=auto_zero3, sharding=sharding)
    )
