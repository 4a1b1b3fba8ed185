"""Human-readable factors, plan names, reasons and the one-line explanation shown per row."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.fit.hardware import (
    DEFAULT_NETWORK_GBIT,
    GPUS_PER_NODE,
    RDMA_NETWORKS,
    UNKNOWN_NETWORK_GBIT,
    gpu_facts,
)
from app.fit.offer_facts import OfferFacts, OfferFit

if TYPE_CHECKING:  # plans imports nothing from here; the annotation alone needs it
    from app.fit.plans import JobTerms, PlanChoice

BILLING_TEXT = {
    "second": "per-second billing",
    "minute": "per-minute billing",
    "hour": "hourly billing",
    "unknown": "billing unknown (assumed hourly)",
}
AVAILABILITY_TEXT = {
    "in_stock": "in stock",
    "limited": "limited availability",
    "out": "out of stock",
    "unknown": "availability unknown",
}
NETWORK_TEXT = {
    "infiniband": "InfiniBand",
    "roce": "RoCE",
    "efa": "EFA",
    "ethernet": "Ethernet",
    "none": "no network",
    "unknown": "unknown network",
}
MARKET_TEXT = {"on_demand": "on-demand", "spot": "spot"}


def interconnect_text(offer: OfferFacts) -> str:
    """'NVLink 900 GB/s', 'NVSwitch', 'PCIe only', ..."""
    speed = f" {offer.nvlink_gbps:g} GB/s" if offer.nvlink_gbps else ""
    return {
        "nvswitch": f"NVSwitch{speed}",
        "nvlink": f"NVLink{speed}",
        "pcie": "PCIe only",
    }.get(offer.interconnect, "interconnect unknown")


def network_text(offer: OfferFacts) -> str:
    """'InfiniBand 3,200 Gbit/s', 'Ethernet 1 Gbit/s', 'unknown network (costed at 10 Gbit/s)'."""
    name = NETWORK_TEXT.get(offer.network, offer.network)
    if offer.network_gbps:
        return f"{name} {offer.network_gbps:,.0f} Gbit/s"
    assumed = DEFAULT_NETWORK_GBIT.get(offer.network, UNKNOWN_NETWORK_GBIT)
    return f"{name} (speed not given: costed at {assumed:,.0f} Gbit/s)"


def plan_text(offer: OfferFacts, nodes: int) -> str:
    """'2 × 8× H100 SXM · InfiniBand 3,200 Gbit/s' or '8× H200 · NVSwitch 900 GB/s'."""
    facts = gpu_facts(offer.gpu_slug)
    count = f"{offer.gpu_count:g}× {facts.name if facts else 'GPU'}"
    if nodes <= 1:
        return count + (f" · {interconnect_text(offer)}" if offer.gpu_count > 1 else "")
    return f"{nodes} × {count} · {network_text(offer)}"


def factor_texts(
    offer: OfferFacts, *, nodes: int, sharding: str, auto_sharding: bool
) -> dict[str, str]:
    """The visible ranking factors for one offer."""
    multi_gpu = nodes * offer.gpu_count > 1
    factors: dict[str, str] = {
        "interconnect": interconnect_text(offer)
        + (
            " (bottleneck for multi-GPU training)"
            if multi_gpu and offer.interconnect == "pcie"
            else ""
        ),
        "billing": BILLING_TEXT.get(offer.billing, BILLING_TEXT["unknown"]),
        "availability": AVAILABILITY_TEXT.get(offer.availability, "availability unknown"),
        "spot": "spot listing (interruptible)" if offer.spot else "on-demand listing",
        "sharding": sharding
        + (" (chosen: the job's own sharding does not fit)" if auto_sharding else ""),
    }
    if nodes > 1 or offer.gpu_count > GPUS_PER_NODE:
        factors["network"] = network_text(offer) + (
            ""
            if offer.network in RDMA_NETWORKS
            else ": not an RDMA fabric, a bottleneck between nodes (IB/RoCE/EFA advised)"
        )
    return factors


def miss_reason(choice: PlanChoice, offer: OfferFacts) -> str:
    """Why no plan fits: the closest layout tried and by how much it misses."""
    closest = choice.closest
    vram = offer.vram_gib_per_gpu
    if closest is None or vram is None:
        return "VRAM per GPU unknown"
    short = closest.need_gib - vram
    limit = f"; plans stop at {choice.max_nodes} listings ({choice.node_limit})"
    return (
        f"needs {closest.need_gib:.1f} GiB per GPU even with {closest.describe()} "
        f"(the best layout tried), card has {vram:.1f} GiB: {short:.1f} GiB short{limit}"
    )


def _hours(value: float) -> str:
    if value < 1 / 60:
        return "<1 min"
    return f"{value * 60:.0f} min" if value < 1 else f"{value:,.1f} h"


def cost_breakdown(fit: OfferFit, offer: OfferFacts) -> str:
    """'run 2.5 h + set-up 17 min + 2 checkpoint writes 17 min + spot losses 6 min = 3.1 h'."""
    if fit.run_hours is None or fit.est_hours is None:
        return ""
    parts = [f"run {_hours(fit.run_hours)}"]
    if fit.setup_hours:
        parts.append(f"set-up {_hours(fit.setup_hours)}")
    if fit.checkpoint_hours:
        parts.append(f"checkpoint writes {_hours(fit.checkpoint_hours)}")
    if fit.market_used == "spot" and fit.spot_overhead_hours is not None:
        rate = f" at {fit.spot_rate_per_hour:.2g} interruptions/h" if fit.spot_rate_per_hour else ""
        parts.append(f"expected spot losses {_hours(fit.spot_overhead_hours)}{rate}")
    return " + ".join(parts) + f" = {_hours(fit.est_hours)}"


def explain_fit(fit: OfferFit, offer: OfferFacts, terms: JobTerms, *, auto_sharding: bool) -> str:
    """e.g. 'fits with 22% headroom (zero3 over 2 listings × 8 GPUs); 2 × 8 GPUs · InfiniBand
    3,200 Gbit/s; spot $10.00/h per listing (on-demand $61.40); run 2.4 h + set-up 17 min + ...
    = 2.9 h; hourly billing: 3 h × 2 listings = $60.00; 1,920 tokens/s per GPU at 37% MFU'."""
    assert fit.headroom_pct is not None
    gpus = f"{fit.plan_gpu_count:g} GPU" + ("s" if fit.plan_gpu_count != 1 else "")
    layout = f"{fit.sharding_used} on {gpus}" + (", chosen to fit" if auto_sharding else "")
    if fit.tight:
        head = (
            f"tight: {fit.headroom_pct:.0f}% headroom, under the {terms.min_headroom_pct:g}% "
            f"margin (allocator fragmentation can end the run)"
        )
    else:
        head = f"fits with {fit.headroom_pct:.0f}% headroom"
    sharded = fit.sharding_used != "none" and fit.plan_gpu_count > 1
    parts = [f"{head} ({layout})" if sharded or auto_sharding else head]
    if fit.nodes > 1 or offer.gpu_count > 1:
        parts.append(fit.plan)
    if fit.nodes > 1 and offer.network not in RDMA_NETWORKS:
        parts.append("slow link between listings (flagged)")
    if offer.availability in ("limited", "out"):
        parts.append(AVAILABILITY_TEXT[offer.availability])
    if fit.run_hours is None or fit.est_hours is None:
        parts.append(fit.factors.get("precision", "speed unknown: no peak figure for this GPU"))
        return "; ".join(parts)
    if fit.market_used is not None and fit.price_used_per_hour is not None:
        other = f" (beats {fit.alternative})" if fit.alternative else ""
        per = " per listing" if fit.nodes > 1 else ""
        parts.append(
            f"{MARKET_TEXT[fit.market_used]} ${fit.price_used_per_hour:,.2f}/h{per}{other}"
        )
    else:
        parts.append("no price in the chosen market")
    parts.append(cost_breakdown(fit, offer))
    billing = BILLING_TEXT.get(offer.billing, BILLING_TEXT["unknown"])
    if fit.billed_hours is not None and fit.est_total_cost is not None:
        listings = f" × {fit.nodes} listings" if fit.nodes > 1 else ""
        parts.append(
            f"{billing}: {_hours(fit.billed_hours)}{listings} = ${fit.est_total_cost:,.2f}"
        )
    else:
        parts.append(billing)
    if fit.tokens_per_s_per_gpu is not None and fit.mfu is not None:
        comm = f", {fit.comm_share:.0%} communication" if fit.comm_share else ""
        parts.append(f"{fit.tokens_per_s_per_gpu:,.0f} tokens/s per GPU at {fit.mfu:.0%} MFU{comm}")
    return "; ".join(parts)
