"""assess_offer: the plan that runs a workload on an offer, how long it takes and what it costs.

The plan (app.fit.plans.choose_plan) is the listing alone, or several identical listings joined
over the listing's network when one has too little memory; the workload's sharding is used
first and ZeRO-3 (FSDP full shard) when it does not fit, and the explanation says so. Fractional
counts (shared GPUs) count as one GPU for memory and at their fraction for throughput.

Time comes from app.fit.throughput.training_time with the offer's GPU (catalog facts by slug),
the plan's GPU count and links: the same function /api/estimate calls, so `run_hours` equals
its `time.hours` for the same GPU, count, listings (`nodes`), links and sharding. The expected
job adds set-up, checkpoint writes and, on spot, interruption losses (app.fit.plans), and the
market rule picks the price (`choose_market`).
"""

from __future__ import annotations

import math
from dataclasses import replace

from app.fit.estimate import MemoryEstimate
from app.fit.explain import explain_fit, factor_texts, miss_reason, network_text, plan_text
from app.fit.hardware import RDMA_NETWORKS, GpuFacts, Links, gpu_facts, uncatalogued_gpu
from app.fit.offer_facts import MarketCost, OfferFacts, OfferFit
from app.fit.plans import (
    MAX_SLOW_JOIN_COMM_SHARE,
    JobTerms,
    PlanLayout,
    choose_market,
    choose_plan,
    job_overheads,
    listing_prices,
    market_costs,
)
from app.fit.throughput import TimeEstimate, time_refusal, training_time
from app.fit.workload import Workload

INTERCONNECT_RANK = {"nvswitch": 0, "nvlink": 1, "unknown": 2, "pcie": 3}
BILLING_RANK = {"second": 0, "minute": 1, "hour": 2, "unknown": 3}
AVAILABILITY_RANK = {"in_stock": 0, "limited": 1, "unknown": 2, "out": 3}
TIGHT_PENALTY = 20.0


def _score(fit_tight: bool, interconnect_penalty: bool, offer: OfferFacts, spot: bool) -> float:
    """0-100 fit quality independent of price: margin, interconnect, billing, stock, market."""
    score = 100.0 - (TIGHT_PENALTY if fit_tight else 0.0)
    if interconnect_penalty:
        score -= 15
    score -= {"second": 0, "minute": 2, "hour": 5}.get(offer.billing, 8)
    score -= {"in_stock": 0, "limited": 10, "out": 40}.get(offer.availability, 5)
    if spot:
        score -= 10
    return max(0.0, score)


def offer_gpu(offer: OfferFacts) -> GpuFacts | None:
    """The offer's GPU as the time model sees it: the catalog entry, else the offer's peaks."""
    return gpu_facts(offer.gpu_slug) or uncatalogued_gpu(
        offer.bf16_tflops, offer.fp16_tflops, offer.nvlink_gbps
    )


def plan_links(offer: OfferFacts, nodes: int = 1) -> Links:
    """The plan's GPUs (whole ones, at least one per listing) and how they are joined."""
    return Links.for_plan(
        nodes,
        max(1, math.floor(offer.gpu_count)),
        interconnect=offer.interconnect,
        nvlink_gbps=offer.nvlink_gbps,
        network=offer.network,
        network_gbps=offer.network_gbps,
    )


def plan_time(
    workload: Workload, estimate: MemoryEstimate, offer: OfferFacts, layout: PlanLayout
) -> TimeEstimate | None:
    """The job's speed on the plan (a fractional GPU runs at its share); None when the GPU's
    peak is unknown. Callers check time_refusal first."""
    gpu = offer_gpu(offer)
    if gpu is None:
        return None
    links = plan_links(offer, layout.nodes)
    time = training_time(workload, estimate.arch, gpu, links, sharding=layout.sharding)
    if time is not None and 0 < offer.gpu_count < 1:
        time = replace(
            time,
            tokens_per_s_per_gpu=time.tokens_per_s_per_gpu * offer.gpu_count,
            hours=time.hours / offer.gpu_count,
        )
    return time


def _waits_on_network(
    workload: Workload, estimate: MemoryEstimate, offer: OfferFacts, layout: PlanLayout
) -> bool:
    """Whether a join over a non-RDMA network spends most of its time communicating."""
    if layout.nodes <= 1 or offer.network in RDMA_NETWORKS:
        return False
    time = plan_time(workload, estimate, offer, layout)
    return time is not None and time.comm_share > MAX_SLOW_JOIN_COMM_SHARE


def _tiebreak(offer: OfferFacts, nodes: int, headroom: float | None) -> tuple[float, ...]:
    multi_gpu = nodes * offer.gpu_count > 1
    return (
        float(nodes),
        float(INTERCONNECT_RANK.get(offer.interconnect, 2) if multi_gpu else 0),
        float(BILLING_RANK.get(offer.billing, 3)),
        float(AVAILABILITY_RANK.get(offer.availability, 2)),
        -headroom if headroom is not None else 0.0,
    )


def assess_offer(
    workload: Workload,
    estimate: MemoryEstimate,
    offer: OfferFacts,
    terms: JobTerms | None = None,
) -> OfferFit:
    """Plan, fit, time, expected cost, factors and a one-line explanation of `workload` on
    `offer` under `terms` (market rule, headroom margin, set-up, checkpoint interval)."""
    terms = terms or JobTerms()
    arch = estimate.arch
    choice = choose_plan(workload, arch, offer, min_headroom_pct=terms.min_headroom_pct)
    gpu = offer_gpu(offer)
    refusal = time_refusal(workload, gpu) if gpu is not None else None
    slow_join = ""
    if (
        choice.layout is not None
        and refusal is None
        and _waits_on_network(workload, estimate, offer, choice.layout)
    ):
        slow_join = (
            f"; joining {choice.layout.nodes} listings over {network_text(offer)} would spend "
            f"over {MAX_SLOW_JOIN_COMM_SHARE:.0%} of each step communicating"
        )
        choice = choose_plan(
            workload, arch, offer, min_headroom_pct=terms.min_headroom_pct, join_slow=False
        )
    layout = choice.layout
    shown = layout or choice.closest
    need = shown.need_gib if shown else estimate.per_gpu_gib
    sharding = shown.sharding if shown else workload.sharding
    per_listing = max(1.0, offer.gpu_count) if offer.gpu_count >= 1 else offer.gpu_count
    if offer.vram_gib_per_gpu is None or refusal is not None or layout is None:
        if refusal is not None:
            reason = refusal
        elif offer.vram_gib_per_gpu is None:
            reason = "VRAM per GPU unknown"
        else:
            reason = miss_reason(choice, offer) + slow_join
        return OfferFit(
            fits=False,
            per_gpu_gib_needed=need,
            headroom_pct=None,
            est_hours=None,
            billed_hours=None,
            est_total_cost=None,
            cost_per_m_tokens=None,
            score=None,
            factors=factor_texts(offer, nodes=1, sharding=sharding, auto_sharding=False),
            explanation=f"does not fit: {reason}",
            reason=reason,
            sharding_used=sharding,
            tiebreak=_tiebreak(offer, 1, None),
            gpus_per_node=per_listing,
        )
    auto = layout.sharding != workload.sharding
    factors = factor_texts(offer, nodes=layout.nodes, sharding=layout.sharding, auto_sharding=auto)
    factors["headroom"] = f"{layout.headroom_pct:.0f}% VRAM headroom" + (
        f" (under the {terms.min_headroom_pct:g}% margin)" if choice.tight else ""
    )
    fit = OfferFit(
        fits=True,
        per_gpu_gib_needed=need,
        headroom_pct=layout.headroom_pct,
        est_hours=None,
        billed_hours=None,
        est_total_cost=None,
        cost_per_m_tokens=None,
        score=None,
        factors=factors,
        explanation="",
        reason=None,
        sharding_used=layout.sharding,
        tiebreak=_tiebreak(offer, layout.nodes, layout.headroom_pct),
        tight=choice.tight,
        nodes=layout.nodes,
        gpus_per_node=per_listing,
        plan=plan_text(offer, layout.nodes),
    )
    time = plan_time(workload, estimate, offer, layout)
    if time is not None:
        fit = _with_costs(fit, workload, estimate, offer, layout, time, terms)
    interconnect_penalty = layout.gpus > 1 and offer.interconnect in ("pcie", "unknown")
    spot = fit.market_used == "spot" or (offer.spot and fit.market_used is None)
    fit = replace(fit, score=_score(choice.tight, interconnect_penalty, offer, spot))
    return replace(fit, explanation=explain_fit(fit, offer, terms, auto_sharding=auto))


def _with_costs(
    fit: OfferFit,
    workload: Workload,
    estimate: MemoryEstimate,
    offer: OfferFacts,
    layout: PlanLayout,
    time: TimeEstimate,
    terms: JobTerms,
) -> OfferFit:
    """The fit with hours, the markets' expected jobs and the chosen market's cost."""
    arch = estimate.arch
    tokens = workload.train_tokens(arch)
    overheads = job_overheads(workload, arch, offer, layout.nodes, time.hours, terms)
    markets = market_costs(offer, layout.nodes, time.hours, tokens, overheads, terms)
    factors = dict(fit.factors)
    factors["speed"] = (
        f"{time.tokens_per_s_per_gpu:,.0f} tokens/s per GPU, MFU {time.mfu:.0%}, "
        f"{time.comm_share:.0%} of step time in unhidden communication"
    )
    factors["setup"] = overheads.setup.summary()
    factors["checkpoints"] = overheads.checkpoint_note
    if overheads.minimum_note:
        factors["billing minimum"] = overheads.minimum_note
    on_demand, spot = listing_prices(offer)
    chosen = choose_market(markets, on_demand, spot)
    basis: MarketCost | None = None
    cost = per_m = price = None
    alternative = None
    if chosen is not None:
        basis, price, cost = chosen
        per_m = basis.per_m_factor * price
        other = "on_demand" if basis.market == "spot" else "spot"
        other_price = on_demand if other == "on_demand" else spot
        if other in markets and other_price is not None:
            alt_cost = markets[other].node_hours * other_price
            alternative = f"{other.replace('_', '-')} ${alt_cost:,.2f}"
    else:
        basis = markets.get("spot" if offer.spot else "on_demand") or next(
            iter(markets.values()), None
        )
    if basis is not None and basis.market == "spot" and basis.spot_rate_per_hour is not None:
        factors["spot"] = (
            f"spot: {basis.spot_rate_per_hour:.2g} interruptions/h expected "
            "(source in spot_risk_source)"
        )
    return replace(
        fit,
        factors=factors,
        est_hours=basis.wall_hours if basis else None,
        billed_hours=basis.billed_hours if basis else None,
        est_total_cost=cost,
        cost_per_m_tokens=per_m,
        tokens_per_s_per_gpu=time.tokens_per_s_per_gpu,
        mfu=time.mfu,
        comm_share=time.comm_share,
        run_hours=time.hours,
        setup_hours=overheads.setup.hours,
        setup_notes=overheads.setup.notes,
        checkpoint_hours=overheads.checkpoint_hours,
        checkpoint_note=overheads.checkpoint_note,
        market_used=basis.market if chosen is not None and basis else None,
        price_used_per_hour=price,
        spot_overhead_hours=basis.spot_overhead_hours if basis else None,
        spot_rate_per_hour=basis.spot_rate_per_hour if basis else None,
        spot_risk_source=basis.spot_risk_source if basis else None,
        markets=markets,
        alternative=alternative,
    )
