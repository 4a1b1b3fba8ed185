"""Human-readable factors and the one-line explanation shown next to each offer."""

from __future__ import annotations

from app.fit.offer_facts import OfferFacts, OfferFit

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


def interconnect_text(offer: OfferFacts) -> str:
    """'NVLink 900 GB/s', 'NVSwitch', 'PCIe only', ..."""
    speed = f" {offer.nvlink_gbps:g} GB/s" if offer.nvlink_gbps else ""
    return {
        "nvswitch": f"NVSwitch{speed}",
        "nvlink": f"NVLink{speed}",
        "pcie": "PCIe only",
    }.get(offer.interconnect, "interconnect unknown")


def factor_texts(
    offer: OfferFacts,
    *,
    multi_gpu: bool,
    multi_node: bool,
    spot: bool,
    auto_zero3: bool,
    sharding: str,
) -> dict[str, str]:
    """The visible ranking factors for one offer."""
    factors: dict[str, str] = {
        "interconnect": interconnect_text(offer)
        + (
            " (bottleneck for multi-GPU training)"
            if multi_gpu and offer.interconnect == "pcie"
            else ""
        ),
        "billing": BILLING_TEXT.get(offer.billing, BILLING_TEXT["unknown"]),
        "availability": AVAILABILITY_TEXT.get(offer.availability, "availability unknown"),
        "spot": "spot: interruptible, restart overhead included" if spot else "on-demand",
        "sharding": sharding + (" (auto: needed to fit)" if auto_zero3 else ""),
    }
    if multi_node:
        speed = f" {offer.network_gbps:g} Gb/s" if offer.network_gbps else ""
        factors["network"] = f"{offer.network}{speed}"
    return factors


def explain_fit(fit: OfferFit, offer: OfferFacts, *, auto_zero3: bool, sharding: str) -> str:
    """e.g. 'fits with 22% headroom; NVLink 900 GB/s; per-second billing; est. 3.1 h, $9.40;
    2,410 tokens/s per GPU at 41% MFU'."""
    parts = [f"fits with {fit.headroom_pct:.0f}% headroom"]
    if auto_zero3:
        parts[0] += f" using {sharding} across {max(1, int(offer.gpu_count))} GPUs"
    if offer.gpu_count > 1:
        parts.append(fit.factors["interconnect"])
    parts.append(BILLING_TEXT.get(offer.billing, BILLING_TEXT["unknown"]))
    if offer.spot or "interruptible" in fit.factors.get("spot", ""):
        parts.append("spot")
    if offer.availability in ("limited", "out"):
        parts.append(AVAILABILITY_TEXT[offer.availability])
    if fit.est_hours is not None:
        cost = (
            f", ${fit.est_total_cost:,.2f}" if fit.est_total_cost is not None else ", price unknown"
        )
        parts.append(f"est. {fit.est_hours:.1f} h{cost}")
        if fit.tokens_per_s_per_gpu is not None and fit.mfu is not None:
            comm = f", {fit.comm_share:.0%} communication" if fit.comm_share else ""
            parts.append(
                f"{fit.tokens_per_s_per_gpu:,.0f} tokens/s per GPU at {fit.mfu:.0%} MFU{comm}"
            )
    else:
        parts.append(fit.factors.get("precision", "speed unknown"))
    return "; ".join(parts)
