"""assess_offer: does a workload fit an offer, how long does it take and what does it cost.

Time comes from app.fit.throughput.training_time with the offer's GPU (catalog facts by slug),
GPU count and links: the same function /api/estimate calls, so both give the same hours for
the same GPU, count, links and sharding.

GPU count: the offer's count is used, not the workload's `gpus` (which only shapes the
stand-alone estimate). The workload's sharding is applied at the offer's count; when that does not
fit and the offer has several GPUs, the job is re-assessed with ZeRO-3 (FSDP full shard) as "what
it would take", and the explanation says so. Fractional counts (shared GPUs) count as one GPU for
memory and at their fraction for throughput.
"""

from __future__ import annotations

import math
from dataclasses import replace

from app.fit.cost import billed_hours, spot_overhead_hours
from app.fit.estimate import MemoryEstimate
from app.fit.explain import explain_fit, factor_texts
from app.fit.hardware import (
    GPUS_PER_NODE,
    RDMA_NETWORKS,
    GpuFacts,
    Links,
    gpu_facts,
    uncatalogued_gpu,
)
from app.fit.memory import per_gpu_breakdown
from app.fit.offer_facts import OfferFacts, OfferFit
from app.fit.throughput import TimeEstimate, time_refusal, training_time
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


def offer_gpu(offer: OfferFacts) -> GpuFacts | None:
    """The offer's GPU as the time model sees it: the catalog entry, else the offer's peaks."""
    return gpu_facts(offer.gpu_slug) or uncatalogued_gpu(
        offer.bf16_tflops, offer.fp16_tflops, offer.nvlink_gbps
    )


def offer_links(offer: OfferFacts) -> Links:
    """The offer's GPUs (whole ones, at least one) and how they are joined."""
    return Links.for_count(
        max(1, math.floor(offer.gpu_count)),
        interconnect=offer.interconnect,
        nvlink_gbps=offer.nvlink_gbps,
        network=offer.network,
        network_gbps=offer.network_gbps,
    )


def offer_time(
    workload: Workload, estimate: MemoryEstimate, offer: OfferFacts, sharding: str
) -> TimeEstimate | str | None:
    """The job's speed on the offer (a fractional GPU runs at its share), the reason it has
    none (e.g. bf16 on a V100), or None when the offer's GPU has no known peak."""
    gpu = offer_gpu(offer)
    if gpu is None:
        return None
    refusal = time_refusal(workload, gpu)
    if refusal is not None:
        return refusal
    time = training_time(workload, estimate.arch, gpu, offer_links(offer), sharding=sharding)
    if time is not None and 0 < offer.gpu_count < 1:
        time = replace(
            time,
            tokens_per_s_per_gpu=time.tokens_per_s_per_gpu * offer.gpu_count,
            hours=time.hours / offer.gpu_count,
        )
    return time


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
    est_h = billed = cost = per_m = None
    tokens = workload.train_tokens(arch)
    time = offer_time(workload, estimate, offer, sharding)
    if isinstance(time, str):
        factors["precision"] = time
        time = None
    if time is not None:
        factors["speed"] = (
            f"{time.tokens_per_s_per_gpu:,.0f} tokens/s per GPU, MFU {time.mfu:.0%}, "
            f"{time.comm_share:.0%} of step time in unhidden communication"
        )
        est_h = time.hours
        if spot:
            est_h += spot_overhead_hours(est_h)
        billed = billed_hours(est_h, offer.billing)
        if price is not None:
            cost = billed * price
            per_m = cost / (tokens / 1e6)
    if multi_node and offer.network not in RDMA_NETWORKS:
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
        tokens_per_s_per_gpu=time.tokens_per_s_per_gpu if time else None,
        mfu=time.mfu if time else None,
        comm_share=time.comm_share if time else None,
    )
    return _with_explanation(fit, offer, auto_zero3, sharding)


def _with_explanation(
    fit: OfferFit, offer: OfferFacts, auto_zero3: bool, sharding: str
) -> OfferFit:
    return replace(
        fit, explanation=explain_fit(fit, offer, auto_zero3=auto_zero3, sharding=sharding)
    )
