"""Plans: which layout of identical listings runs a job, and what the job costs in each market.

A plan is one listing, or `nodes` identical listings (same provider, region and instance type)
joined over the listing's inter-node network when one listing has too little memory. Choice of
layout (`choose_plan`), per GPU-count the workload's own sharding and then ZeRO-3:

1. one listing with at least `min_headroom_pct` VRAM headroom;
2. the fewest listings with that headroom, over an RDMA fabric (InfiniBand, RoCE, EFA), or over
   any network when one listing cannot hold the job at all (public internet, unknown networks:
   costed at that network's speed and flagged);
3. one listing that fits with less headroom ("tight": ranked after every row with margin);
4. the fewest listings that fit tight.

Listings per plan stop at the data file's `plans.max_nodes`, at the listings the feed says are
available, and at one for shared (fractional) GPUs and listings without an inter-node network.
A join over a network that is not an RDMA fabric is kept only while communication takes at most
MAX_SLOW_JOIN_COMM_SHARE of the step time (app.fit.offers checks it with the time model): past
that the plan mostly waits on the network, and no one rents it.

Expected job (`market_costs`), per market: wall hours = training (app.fit.throughput) + set-up
once (listings set up in parallel) + synchronous checkpoint writes (each listing writes its
shard) + on spot the expected losses to interruptions (lost work since the last checkpoint plus
a set-up per interruption), all from app.fit.market. Each listing is billed those hours rounded
up to its billing unit and at least the provider's minimum; cost = listings × billed hours ×
the listing's hourly price in that market (`choose_market`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from app.fit.cost import billed_hours
from app.fit.hardware import RDMA_NETWORKS
from app.fit.market import (
    SetupTime,
    billing_minimum_hours,
    checkpoint_overhead_hours,
    default_checkpoint_minutes,
    expected_spot_overhead_hours,
    hub_weight_bytes,
    load_market_data,
    max_plan_nodes,
    setup_hours,
    spot_risk_for_band,
)
from app.fit.memory import (
    MemoryBreakdown,
    adapter_bytes_per_param,
    adapters_are_16bit,
    bytes_per_param,
    lora_adapter_params,
    per_gpu_breakdown,
)
from app.fit.offer_facts import MarketCost, OfferFacts
from app.fit.presets import ModelArch
from app.fit.workload import Workload

Market = Literal["any", "on_demand", "spot"]
DEFAULT_MIN_HEADROOM_PCT = 5.0
# Listings the feed says are available, rounded down to these plan sizes (few distinct values
# keep the number of machine shapes the ranking assesses small).
LISTING_STEPS = (16, 8, 4, 2, 1)
MAX_SLOW_JOIN_COMM_SHARE = 0.5
MIN_CHECKPOINT_MINUTES = 1.0


@dataclass(frozen=True)
class JobTerms:
    """How the job is rented: market rule, headroom margin, set-up and checkpoint interval."""

    market: Market = "any"
    min_headroom_pct: float = DEFAULT_MIN_HEADROOM_PCT
    setup_minutes: float | None = None  # None: the provider's estimate
    checkpoint_minutes: float | None = None  # None: the data file's default; 0: none

    def __post_init__(self) -> None:
        minutes = self.checkpoint_minutes
        if minutes is not None and minutes != 0 and not minutes >= MIN_CHECKPOINT_MINUTES:
            raise ValueError(
                f"checkpoint_minutes must be 0 (none) or at least {MIN_CHECKPOINT_MINUTES:g}"
            )

    @property
    def checkpoint_interval(self) -> float:
        """Minutes of training between checkpoints (0: none)."""
        if self.checkpoint_minutes is None:
            return default_checkpoint_minutes()
        return self.checkpoint_minutes

    def allows(self, market: str) -> bool:
        """Whether the market rule lets a row be costed in `market`."""
        return self.market in ("any", market)


def listing_step(available_gpus: int | None, gpu_count: float) -> int | None:
    """Whole listings available (`available_gpus` over the listing's GPUs), rounded down to a
    LISTING_STEPS value (0 counts as 1: a single listing is shown with its stock); None when
    the feed gives no count. app.store.models.listing_step_sql is the same in SQL."""
    if available_gpus is None:
        return None
    for step in LISTING_STEPS[:-1]:
        if available_gpus >= step * gpu_count:
            return step
    return 1


@dataclass(frozen=True)
class PlanLayout:
    """`nodes` listings of `gpus_per_node` GPUs with one ZeRO stage, and the memory it needs."""

    nodes: int
    gpus_per_node: int
    sharding: str
    breakdown: MemoryBreakdown
    headroom_pct: float  # of the card's VRAM; negative when it does not fit

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def need_gib(self) -> float:
        return self.breakdown.total_gib

    def describe(self) -> str:
        """'zero3 on 8 GPUs', 'zero3 over 2 listings × 8 GPUs'."""
        if self.nodes == 1:
            return f"{self.sharding} on {self.gpus_per_node} GPU" + (
                "s" if self.gpus_per_node > 1 else ""
            )
        per = f"{self.gpus_per_node} GPU" + ("s" if self.gpus_per_node > 1 else "")
        return f"{self.sharding} over {self.nodes} listings × {per}"


@dataclass(frozen=True)
class PlanChoice:
    """The chosen layout (None: nothing fits), whether it is tight, and what was tried."""

    layout: PlanLayout | None
    tight: bool
    closest: PlanLayout | None  # the layout that needed the least memory per GPU
    max_nodes: int
    node_limit: str  # why plans stop at max_nodes


def node_limit(facts: OfferFacts, *, cap: int | None = None) -> tuple[int, str]:
    """(most listings a plan may join, why)."""
    cap = cap or max_plan_nodes()
    if 0 < facts.gpu_count < 1:
        return 1, "a shared GPU cannot be joined to others"
    if facts.network == "none":
        return 1, "no network between listings"
    if facts.listings_available is not None and facts.listings_available < cap:
        available = max(1, facts.listings_available)
        return available, f"{available} listing{'s' if available > 1 else ''} available"
    return cap, f"at most {cap} listings per plan"


def choose_plan(
    workload: Workload,
    arch: ModelArch,
    facts: OfferFacts,
    *,
    min_headroom_pct: float = DEFAULT_MIN_HEADROOM_PCT,
    join_slow: bool = True,
) -> PlanChoice:
    """The layout that runs the job on this listing (see module docs for the order);
    `join_slow=False` joins listings only over an RDMA fabric."""
    max_nodes, why = node_limit(facts)
    vram = facts.vram_gib_per_gpu
    if vram is None or vram <= 0:
        return PlanChoice(None, False, None, max_nodes, why)
    per_node = max(1, math.floor(facts.gpu_count))
    tried: list[PlanLayout] = []

    def layouts(nodes: int) -> list[PlanLayout]:
        gpus = nodes * per_node
        shardings = [workload.sharding]
        if gpus > 1 and workload.sharding != "zero3":
            shardings.append("zero3")
        out = []
        for sharding in shardings:
            bd = per_gpu_breakdown(workload, arch, gpus, sharding)
            headroom = (vram - bd.total_gib) / vram * 100
            out.append(PlanLayout(nodes, per_node, sharding, bd, headroom))
        tried.extend(out)
        return out

    def margin(layout: PlanLayout) -> bool:
        return layout.headroom_pct >= min_headroom_pct

    def fits(layout: PlanLayout) -> bool:
        return layout.headroom_pct >= 0

    single = layouts(1)
    if chosen := next((lay for lay in single if margin(lay)), None):
        return PlanChoice(chosen, False, chosen, max_nodes, why)
    single_tight = next((lay for lay in single if fits(lay)), None)
    many_tight: PlanLayout | None = None
    # Joining listings over a slow or unknown network only when one listing cannot hold the
    # job; ZeRO-3 memory falls as listings are added, so if the most allowed do not fit, none do.
    rdma = facts.network in RDMA_NETWORKS
    worth_joining = rdma or (single_tight is None and join_slow)
    if worth_joining and max_nodes > 1 and fits(layouts(max_nodes)[-1]):
        for nodes in range(2, max_nodes + 1):
            options = layouts(nodes)
            if chosen := next((lay for lay in options if margin(lay)), None):
                return PlanChoice(chosen, False, chosen, max_nodes, why)
            if many_tight is None:
                many_tight = next((lay for lay in options if fits(lay)), None)
    closest = min(tried, key=lambda lay: lay.need_gib)
    if single_tight is not None:
        return PlanChoice(single_tight, True, closest, max_nodes, why)
    if many_tight is not None:
        return PlanChoice(many_tight, True, closest, max_nodes, why)
    return PlanChoice(None, False, closest, max_nodes, why)


def checkpoint_state_bytes(workload: Workload, arch: ModelArch) -> float:
    """Bytes one checkpoint writes: trained weights plus optimizer states (fp32 master copy
    included under mixed precision); LoRA/QLoRA save only the adapters and their states."""
    if workload.is_peft:
        adapters = lora_adapter_params(arch, workload.lora_rank, workload.lora_targets)
        pure = adapters_are_16bit(workload)
        per = adapter_bytes_per_param(workload.precision, workload.optimizer, pure_16bit=pure)
        grads = 2.0 if pure else 4.0
        return adapters * (per - grads)
    pb = bytes_per_param(
        workload.precision, workload.optimizer, pure_16bit=workload.uses_pure_16bit
    )
    return arch.params * (pb.weights + pb.optimizer)


def download_bytes(workload: Workload, arch: ModelArch) -> float:
    """What set-up downloads from the hub: the 16-bit base for fine-tuning, nothing for
    pretraining from scratch."""
    return 0.0 if workload.method == "pretrain" else hub_weight_bytes(arch.params_b)


@dataclass(frozen=True)
class JobOverheads:
    """What a plan adds to the training hours, shared by both markets."""

    setup: SetupTime
    checkpoint_hours: float
    checkpoint_note: str
    minimum_hours: float
    minimum_note: str


def job_overheads(
    workload: Workload,
    arch: ModelArch,
    facts: OfferFacts,
    nodes: int,
    run_hours: float,
    terms: JobTerms,
) -> JobOverheads:
    """Set-up, checkpoint writes and billing minimum of a plan of `nodes` listings."""
    provider = facts.provider or ""
    data = load_market_data()
    entry = data.provider(provider)
    downlink = None
    if (
        entry is not None
        and entry.kind == "marketplace_container"
        and facts.network == "ethernet"
        and facts.network_gbps
    ):
        downlink = facts.network_gbps  # a marketplace host's own internet link
    setup = setup_hours(
        provider,
        download_bytes(workload, arch),
        setup_minutes=terms.setup_minutes,
        download_gbps=downlink,
    )
    interval = terms.checkpoint_interval
    state = checkpoint_state_bytes(workload, arch)
    ckpt = checkpoint_overhead_hours(state, interval, run_hours, writers=nodes)
    writes = max(0, math.ceil(run_hours * 60 / interval) - 1) if interval else 0
    gbps = data.checkpoint.write_gbps.value
    note = (
        f"{writes} checkpoint write{'s' if writes != 1 else ''} of {state / 1e9:,.1f} GB "
        f"every {interval:g} min at {gbps / 8:g} GB/s per listing"
        if interval
        else "no checkpoints (checkpoint_minutes=0)"
    )
    minimum, minimum_note = billing_minimum_hours(provider)
    return JobOverheads(setup, ckpt, note, minimum, minimum_note)


def market_costs(
    facts: OfferFacts,
    nodes: int,
    run_hours: float,
    tokens: float,
    overheads: JobOverheads,
    terms: JobTerms,
) -> dict[str, MarketCost]:
    """The plan's expected hours and billed node-hours in each market the terms allow (spot
    only where its expected losses are finite)."""
    out: dict[str, MarketCost] = {}
    working = run_hours + overheads.checkpoint_hours
    setup = overheads.setup
    million = tokens / 1e6

    def billed(wall: float) -> float:
        return max(overheads.minimum_hours, billed_hours(wall, facts.billing))

    if terms.allows("on_demand") and not facts.spot:
        wall = working + setup.hours
        per = billed(wall)
        per_m = nodes * working / million
        out["on_demand"] = MarketCost("on_demand", wall, per, nodes * per, per_m)
    if terms.allows("spot"):
        where = facts.spot_where or "this instance type and region"
        risk = spot_risk_for_band(facts.provider or "", facts.spot_band, where=where)
        interval = terms.checkpoint_interval
        lost = expected_spot_overhead_hours(working, risk.per_hour, interval, setup.minutes)
        if math.isfinite(lost):
            wall = working + setup.hours + lost
            per = billed(wall)
            out["spot"] = MarketCost(
                "spot",
                wall,
                per,
                nodes * per,
                nodes * (working + lost) / million,
                spot_overhead_hours=lost,
                spot_rate_per_hour=risk.per_hour,
                spot_risk_source=risk.source,
            )
    return out


def listing_prices(facts: OfferFacts) -> tuple[float | None, float | None]:
    """(on-demand, spot) hourly price of one listing: a spot-only listing's price is its spot
    price (app.store.models.market_price_sql is the same in SQL)."""
    on_demand = None if facts.spot else facts.price_per_hour
    spot = facts.spot_price_per_hour
    if spot is None and facts.spot:
        spot = facts.price_per_hour
    return on_demand, spot


def choose_market(
    markets: dict[str, MarketCost], on_demand: float | None, spot: float | None
) -> tuple[MarketCost, float, float] | None:
    """(market, price, cost) with the lower expected total; on-demand wins a tie (no risk).
    None when no allowed market has a price."""
    od = markets.get("on_demand")
    sp = markets.get("spot")
    od_cost = od.node_hours * on_demand if od is not None and on_demand is not None else None
    sp_cost = sp.node_hours * spot if sp is not None and spot is not None else None
    if sp is not None and sp_cost is not None and (od_cost is None or sp_cost < od_cost):
        assert spot is not None
        return sp, spot, sp_cost
    if od is not None and od_cost is not None:
        assert on_demand is not None
        return od, on_demand, od_cost
    return None
