"""The assumptions behind a ranked table's numbers, in one place: tokens, speed, set-up,
checkpoints, spot risk, billing, market rule, headroom and plans, each with its source."""

from __future__ import annotations

from app.fit.estimate import MemoryEstimate
from app.fit.hardware import gpu_facts
from app.fit.market import load_market_data
from app.fit.offer_facts import OfferFit
from app.fit.plans import JobTerms
from app.fit.workload import DEFAULT_FINETUNE_TOKENS, PRETRAIN_TOKENS_PER_PARAM, Workload

MARKET_RULES = {
    "any": (
        "market=any: a listing with both prices is costed in both markets (spot with its "
        "expected interruption losses) and shown at the lower expected total; a tie goes to "
        "on-demand; each row names the price it used"
    ),
    "on_demand": "market=on_demand: on-demand prices only; spot-only listings are left out",
    "spot": "market=spot: spot prices only, each with its expected interruption losses",
}

# A top row longer than this gets a "Duration" note: the cost sort ranks the cheapest expected
# total first however long it runs, and a week on one spot or marketplace listing is exposed
# to the hourly changes of its price and stock that the expected total does not price in.
LONG_RUN_HOURS = 168.0


def tokens_assumption(workload: Workload, estimate: MemoryEstimate) -> str:
    """How many tokens the hours and costs are for, and why."""
    tokens = estimate.train_tokens
    if workload.tokens is not None:
        return f"{tokens:,.0f} tokens (your tokens=)"
    if workload.dataset_tokens is not None:
        return f"{tokens:,.0f} tokens: dataset_tokens × {workload.epochs:g} epochs (yours)"
    if workload.method == "pretrain":
        return (
            f"{tokens / 1e9:,.1f}B tokens: {PRETRAIN_TOKENS_PER_PARAM:g} per parameter, "
            "Chinchilla-optimal pretraining (Hoffmann et al. 2022, "
            "https://arxiv.org/abs/2203.15556); set tokens= for your run"
        )
    return (
        f"{DEFAULT_FINETUNE_TOKENS / 1e6:,.0f}M tokens: the fine-tuning default (a few epochs "
        "over a mid-sized instruction set); set tokens= or dataset_tokens= with epochs="
    )


def job_assumptions(
    workload: Workload,
    estimate: MemoryEstimate,
    terms: JobTerms,
    *,
    top: OfferFit | None = None,
    top_gpu: str | None = None,
    spot: OfferFit | None = None,
) -> list[tuple[str, str]]:
    """(topic, text) pairs; `top` is the first ranked row (its GPU `top_gpu`), `spot` the first
    row costed at a spot price."""
    data = load_market_data()
    out = [("Tokens", tokens_assumption(workload, estimate))]
    gpu = gpu_facts(top_gpu)
    if gpu is not None and top is not None and top.mfu is not None:
        out.append(
            (
                "Speed",
                f"top row on {gpu.name}: {top.tokens_per_s_per_gpu:,.0f} tokens/s per GPU, "
                f"MFU {top.mfu:.0%}, from matmul efficiency {gpu.matmul_efficiency:.1%} and "
                f"attention efficiency {gpu.attention_efficiency:.0%} of the dense peak "
                f"({gpu.source}); communication over the plan's links (app/fit/throughput.py)",
            )
        )
    if top is not None and top.setup_notes:
        out.append(
            (
                "Set-up",
                "top row: "
                + "; ".join(top.setup_notes)
                + ". Listings of a plan set up in parallel; a spot interruption repeats it",
            )
        )
    elif terms.setup_minutes is not None:
        out.append(("Set-up", f"{terms.setup_minutes:g} min (your setup_minutes)"))
    interval = terms.checkpoint_interval
    ckpt = data.checkpoint
    out.append(
        (
            "Checkpoints",
            (
                f"a synchronous save every {interval:g} min of training "
                + (
                    "(your checkpoint_minutes)"
                    if terms.checkpoint_minutes is not None
                    else f"(default: {ckpt.interval_minutes.cite()})"
                )
                + f", each listing writing its shard at {ckpt.write_gbps.value / 8:g} GB/s "
                f"({ckpt.write_gbps.cite()})"
                + (f"; top row: {top.checkpoint_note}" if top and top.checkpoint_note else "")
            )
            if interval
            else "none (checkpoint_minutes=0): a spot interruption loses the whole run so far",
        )
    )
    if spot is not None and spot.spot_risk_source:
        out.append(
            (
                "Spot risk",
                f"first spot row: {spot.spot_rate_per_hour:.2g} interruptions per running hour; "
                f"{spot.spot_risk_source}. Each interruption loses the work since the last "
                "checkpoint plus a new set-up",
            )
        )
    else:
        out.append(
            (
                "Spot risk",
                "per provider from app/fit/data/provider_market.yaml; AWS per instance type and "
                "region from the Spot Instance Advisor feed; no row on this page uses a spot price",
            )
        )
    out.append(
        (
            "Billing",
            "each listing is billed the expected hours rounded up to its unit (second, minute, "
            "hour; unknown counts as hourly) and at least the provider's minimum charge",
        )
    )
    if top is not None and top.est_hours is not None and top.est_hours > LONG_RUN_HOURS:
        out.append(
            (
                "Duration",
                f"the top row runs {top.est_hours / 24:,.0f} days ({top.est_hours:,.0f} h): "
                "sorted by cost, the lowest expected total comes first however long it runs, "
                "and a run this long on one spot or marketplace listing meets the hourly "
                "changes of its price and stock that the total does not include. A deadline "
                "(max_hours=, e.g. 48) or sort=time ranks faster plans first",
            )
        )
    out.append(("Market", MARKET_RULES[terms.market]))
    out.append(
        (
            "Headroom",
            f"rows with less than {terms.min_headroom_pct:g}% VRAM to spare are 'tight' and "
            "ranked after every row with margin (min_headroom_pct=): allocator fragmentation "
            "and a longer sample can end such a run",
        )
    )
    out.append(
        (
            "Plans",
            f"a row may join up to {data.plans.max_nodes.value:g} identical listings "
            f"({data.plans.max_nodes.cite()}), never more than the feed says are available; "
            "over a network that is not InfiniBand/RoCE/EFA only when one listing cannot hold "
            "the job, costed at that network's speed and flagged",
        )
    )
    return out
