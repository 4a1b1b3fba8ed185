"""The fit engine's view of one offer (OfferFacts) and its verdict on it (OfferFit).

Kept apart from assess_offer so that explain.py can read both without importing the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class OfferFacts:
    """What the fit engine needs to know about one offer (filled in by the caller)."""

    gpu_count: float
    vram_gib_per_gpu: float | None
    bf16_tflops: float | None
    fp16_tflops: float | None
    memory_type: str | None
    interconnect: str = "unknown"
    nvlink_gbps: float | None = None
    network: str = "unknown"
    network_gbps: float | None = None
    billing: str = "unknown"
    price_per_hour: float | None = None
    spot_price_per_hour: float | None = None
    spot: bool = False
    availability: str = "unknown"
    gpu_slug: str | None = None  # catalog slug: efficiencies, bandwidth, PCIe, peer-to-peer


@dataclass(frozen=True)
class OfferFit:
    """Result for one offer; `tiebreak` orders offers of equal cost (see rank_key)."""

    fits: bool
    per_gpu_gib_needed: float
    headroom_pct: float | None
    est_hours: float | None
    billed_hours: float | None
    est_total_cost: float | None
    cost_per_m_tokens: float | None
    score: float | None
    factors: dict[str, str]
    explanation: str
    reason: str | None
    sharding_used: str = "none"
    tiebreak: tuple[float, ...] = field(default=())
    tokens_per_s_per_gpu: float | None = None
    mfu: float | None = None
    comm_share: float | None = None
