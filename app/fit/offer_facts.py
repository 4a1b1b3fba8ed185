"""The fit engine's view of one offer (OfferFacts) and its verdict on it (OfferFit).

Kept apart from assess_offer so that explain.py can read both without importing the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FITS, TIGHT, NO_FIT = 0, 1, 2  # OfferFit.fit_class, in rank order


# Not frozen, though nothing assigns to facts (they key the fit caches): a frozen dataclass
# sets each field through object.__setattr__, ~5x slower to build, and a 1,000-row ranked page
# builds one per row.
@dataclass(unsafe_hash=True)
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
    # Set-up, billing minimum and spot defaults come from the provider's entry in
    # app/fit/data/provider_market.yaml ('' or None: a provider it does not know).
    provider: str | None = None
    # The AWS Spot Instance Advisor band of this instance type and region, when the feed has one,
    # and the listing's name for the text ("p5.48xlarge in us-east-1"; None for a shape).
    spot_band: str | None = None
    spot_where: str | None = None
    # Whole identical listings one can rent at once (the feed's available GPUs over the
    # listing's GPUs, rounded down to 1, 2, 4, 8 or 16); None when the feed does not say.
    listings_available: int | None = None


@dataclass(frozen=True)
class MarketCost:
    """The expected job on a plan in one market, before the price: hours and what is billed.

    cost = node_hours × the listing's hourly price in that market, exactly (SQL ranks by the
    same product); cost per million tokens = per_m_factor × price.
    """

    market: str  # on_demand | spot
    wall_hours: float  # run + set-up + checkpoint writes (+ expected spot losses)
    billed_hours: float  # per listing: rounded to the billing unit, at least the minimum
    node_hours: float  # listings × billed_hours
    per_m_factor: float  # listings × (run + checkpoints + spot losses) / million tokens
    spot_overhead_hours: float = 0.0
    spot_rate_per_hour: float | None = None
    spot_risk_source: str | None = None


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
    # The plan: `nodes` identical listings of `gpus_per_node` GPUs each.
    tight: bool = False  # fits, but with less headroom than the margin asked for
    nodes: int = 1
    gpus_per_node: float = 1.0
    plan: str = ""
    run_hours: float | None = None  # training alone (what /api/estimate's time.hours gives)
    setup_hours: float | None = None
    setup_notes: tuple[str, ...] = ()
    checkpoint_hours: float | None = None
    checkpoint_note: str = ""
    market_used: str | None = None  # the market whose price the row's cost uses
    price_used_per_hour: float | None = None  # per listing
    spot_overhead_hours: float | None = None
    spot_rate_per_hour: float | None = None
    spot_risk_source: str | None = None
    markets: dict[str, MarketCost] = field(default_factory=dict)  # price-free, per market
    alternative: str | None = None  # the other market's expected total, when both were costed

    @property
    def fit_class(self) -> int:
        """FITS (with margin), TIGHT or NO_FIT: the leading rank key."""
        if not self.fits:
            return NO_FIT
        return TIGHT if self.tight else FITS

    @property
    def plan_gpu_count(self) -> float:
        """GPUs in the whole plan."""
        return self.nodes * self.gpus_per_node
