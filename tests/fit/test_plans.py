"""Plans (app/fit/plans.py) through assess_offer: listings joined over their network, the market
rule, set-up, checkpoints and spot risk in the expected job, tight rows, precision refusals."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from importlib import resources

import pytest
import yaml

from app.fit import JobTerms, OfferFacts, Workload, assess_offer, estimate_memory, rank_key
from app.fit.assumptions import LONG_RUN_HOURS, job_assumptions
from app.fit.market import load_market_data, spot_risk_for_band
from app.fit.offer_facts import FITS, NO_FIT, TIGHT
from app.fit.plans import checkpoint_state_bytes, listing_step
from app.fit.presets import get_preset
from tests.fit.test_offers import H100

# An 8x H100 InfiniBand node billed by the hour, on-demand only, from a known GPU cloud.
H100_NODE = replace(
    H100, billing="hour", price_per_hour=23.6, spot_price_per_hour=None, provider="nebius"
)
H200_NODE = replace(H100_NODE, vram_gib_per_gpu=140.4, gpu_slug="h200", price_per_hour=28.0)
FULL_70B = Workload(model="llama-3.1-70b", method="full")
QLORA_8B = Workload(model="llama-3.1-8b", method="qlora")


def assess(workload: Workload, facts: OfferFacts, terms: JobTerms | None = None):  # type: ignore[no-untyped-def]
    return assess_offer(workload, estimate_memory(workload), facts, terms)


# --- plans ----------------------------------------------------------------------------------


def test_a_listing_that_holds_the_job_is_the_plan() -> None:
    fit = assess(QLORA_8B, H100_NODE)
    assert fit.fits and fit.fit_class == FITS and fit.nodes == 1 and fit.plan_gpu_count == 8


def test_70b_full_joins_two_8x80gb_listings_over_infiniband() -> None:
    fit = assess(FULL_70B, H100_NODE)
    assert fit.fits and not fit.tight
    assert fit.nodes == 2 and fit.plan_gpu_count == 16 and fit.sharding_used == "zero3"
    assert fit.plan == "2 × 8× H100 SXM · InfiniBand 3,200 Gbit/s"
    assert fit.plan in fit.explanation and "× 2 listings" in fit.explanation
    # Cost = listings × billed hours × the listing's price, billed hours from the expected job.
    assert fit.billed_hours == math.ceil(fit.est_hours)  # type: ignore[arg-type]
    assert fit.est_total_cost == pytest.approx(2 * fit.billed_hours * 23.6)  # type: ignore[operator]


def test_plans_stop_at_the_listings_available() -> None:
    assert listing_step(None, 8) is None
    assert listing_step(0, 8) == 1  # out of stock: a single listing, shown with its stock
    assert listing_step(15, 8) == 1
    assert listing_step(16, 8) == 2
    assert listing_step(31, 8) == 2  # rounded down: never more than are available
    assert listing_step(40, 8) == 4
    assert listing_step(1000, 1) == 16
    one = assess(FULL_70B, replace(H100_NODE, listings_available=1))
    assert not one.fits and "1 listing available" in (one.reason or "")
    two = assess(FULL_70B, replace(H100_NODE, listings_available=2))
    assert two.fits and two.nodes == 2
    # 405B needs more than two 8x80 GB listings: with two available, none fits.
    big = Workload(model="llama-3.1-405b", method="full")
    assert not assess(big, replace(H100_NODE, listings_available=2)).fits
    assert assess(big, H100_NODE).nodes > 2


def test_no_join_without_a_network_or_for_shared_gpus() -> None:
    alone = assess(FULL_70B, replace(H100_NODE, network="none"))
    assert not alone.fits and "no network between listings" in (alone.reason or "")
    shared = replace(H100_NODE, gpu_count=0.5, vram_gib_per_gpu=40.0)
    assert not assess(FULL_70B, shared).fits


def test_joins_that_wait_on_a_slow_network_are_not_offered() -> None:
    # 16 one-GPU listings over an unknown network (costed at 10 Gbit/s) would communicate
    # almost all the time: the plan is refused, and the reason says so.
    slow = replace(H100_NODE, gpu_count=1, network="unknown", network_gbps=None, price_per_hour=2.9)
    fit = assess(FULL_70B, slow)
    assert not fit.fits and "communicating" in (fit.reason or "")
    # Over InfiniBand the same listings may join (and are flagged nowhere).
    fast = assess(FULL_70B, replace(slow, network="infiniband", network_gbps=400.0))
    assert fast.fits and fast.nodes > 1


def test_a_tight_listing_is_not_joined_over_a_slow_network_but_is_over_rdma() -> None:
    # 70B full on one 8x H200 listing: ~1% headroom.
    unknown_net = replace(H200_NODE, network="unknown", network_gbps=None)
    tight = assess(FULL_70B, unknown_net)
    assert tight.fits and tight.tight and tight.nodes == 1 and tight.fit_class == TIGHT
    assert tight.explanation.startswith("tight: ")
    joined = assess(FULL_70B, H200_NODE)  # InfiniBand: two listings give margin
    assert joined.fits and not joined.tight and joined.nodes == 2


def test_tight_ranks_after_margin_even_when_cheaper() -> None:
    tight = assess(FULL_70B, replace(H200_NODE, network="unknown", network_gbps=None))
    margin = assess(FULL_70B, H100_NODE)
    assert tight.est_total_cost < margin.est_total_cost  # type: ignore[operator]
    assert sorted([tight, margin], key=rank_key) == [margin, tight]
    relaxed = assess(
        FULL_70B,
        replace(H200_NODE, network="unknown", network_gbps=None),
        JobTerms(min_headroom_pct=0),
    )
    assert relaxed.fits and not relaxed.tight


@pytest.mark.parametrize("slug", ["v100-16gb", "v100-32gb", "t4"])
def test_no_bf16_card_does_not_fit_a_bf16_job(slug: str) -> None:
    card = replace(
        H100_NODE, gpu_slug=slug, gpu_count=1, vram_gib_per_gpu=31.7, bf16_tflops=None,
        network="none",
    )  # fmt: skip
    small = Workload(model="llama-3.2-1b", method="lora")
    fit = assess(small, card)
    assert not fit.fits and fit.fit_class == NO_FIT
    assert fit.reason is not None and fit.reason.startswith("no bf16 on ")
    assert "fp16" in fit.reason
    fp16 = assess(Workload(model="llama-3.2-1b", method="lora", precision="fp16"), card)
    assert fp16.fits and fp16.run_hours is not None


def test_the_closest_layout_is_quoted_when_nothing_fits() -> None:
    fit = assess(
        Workload(model="llama-3.1-405b", method="full"), replace(H100_NODE, network="none")
    )
    assert not fit.fits and fit.reason is not None
    assert "even with zero3 on 8 GPUs (the best layout tried)" in fit.reason
    assert "card has 79.6 GiB" in fit.reason and "GiB short" in fit.reason


# --- one market rule ------------------------------------------------------------------------


BOTH = replace(H100_NODE, gpu_count=1, price_per_hour=3.0, spot_price_per_hour=1.2)


def test_market_any_costs_both_prices_and_keeps_the_lower_expected_total() -> None:
    fit = assess(QLORA_8B, BOTH)
    spot, on_demand = fit.markets["spot"], fit.markets["on_demand"]
    assert fit.market_used == "spot" and fit.price_used_per_hour == 1.2
    assert fit.est_total_cost == spot.node_hours * 1.2 < on_demand.node_hours * 3.0
    assert fit.alternative == f"on-demand ${on_demand.node_hours * 3.0:,.2f}"
    assert "spot $1.20/h (beats on-demand" in fit.explanation
    # A spot price barely under on-demand loses once its expected interruptions are counted.
    close = assess(QLORA_8B, replace(BOTH, spot_price_per_hour=2.99, billing="second"))
    assert close.market_used == "on_demand" and close.price_used_per_hour == 3.0
    assert close.markets["spot"].node_hours * 2.99 > close.markets["on_demand"].node_hours * 3.0


def test_a_single_market_uses_only_its_price() -> None:
    on_demand = assess(QLORA_8B, BOTH, JobTerms(market="on_demand"))
    assert on_demand.market_used == "on_demand" and on_demand.price_used_per_hour == 3.0
    assert set(on_demand.markets) == {"on_demand"} and on_demand.alternative is None
    spot = assess(QLORA_8B, BOTH, JobTerms(market="spot"))
    assert spot.market_used == "spot" and spot.price_used_per_hour == 1.2
    assert set(spot.markets) == {"spot"}
    # A spot-only listing has no on-demand price to fall back on.
    spot_only = replace(BOTH, spot=True, price_per_hour=None)
    assert assess(QLORA_8B, spot_only, JobTerms(market="on_demand")).est_total_cost is None


# --- the expected job -----------------------------------------------------------------------


def test_five_minute_job_per_second_beats_hourly_and_set_up_shows_in_hours_and_cost() -> None:
    card = replace(H100_NODE, gpu_count=1, price_per_hour=2.0, network="none")
    run = assess(QLORA_8B, replace(card, billing="second")).run_hours
    assert run is not None
    job = Workload(model="llama-3.1-8b", method="qlora", tokens=100e6 * (5 / 60) / run)
    terms = JobTerms(setup_minutes=10)
    per_second = assess(job, replace(card, billing="second"), terms)
    hourly = assess(job, replace(card, billing="hour"), terms)
    assert per_second.run_hours == pytest.approx(5 / 60)
    assert per_second.est_hours == pytest.approx(15 / 60)  # 5 min of training + 10 of set-up
    assert per_second.est_total_cost == pytest.approx(2.0 * 15 / 60)
    assert hourly.est_total_cost == 2.0  # a whole hour
    assert sorted([hourly, per_second], key=rank_key)[0] is per_second
    longer = assess(job, replace(card, billing="second"), JobTerms(setup_minutes=40))
    assert longer.est_hours - per_second.est_hours == pytest.approx(0.5)  # type: ignore[operator]
    assert longer.est_total_cost - per_second.est_total_cost == pytest.approx(1.0)  # type: ignore[operator]
    assert "set-up 10 min" in per_second.explanation


def test_provider_set_up_comes_from_the_data_file() -> None:
    fit = assess(FULL_70B, H100_NODE)
    assert fit.setup_hours is not None and 0.2 < fit.setup_hours < 0.4  # ~17 min for 141 GB
    assert any("weights download" in note and "141.1 GB" in note for note in fit.setup_notes)
    # Pretraining starts from scratch: nothing to download.
    pretrain = assess(Workload(params_b=1, method="pretrain"), H100_NODE)
    downloads = [n for n in pretrain.setup_notes if n.startswith("weights download")]
    assert downloads and all(n.startswith("weights download: 0.0 min") for n in downloads)


def test_billing_minimum_applies_per_listing() -> None:
    aws = replace(H100_NODE, provider="aws", billing="second", gpu_count=1, network="none")
    tiny = Workload(model="llama-3.1-8b", method="qlora", tokens=2e4)
    fit = assess(tiny, aws, JobTerms(setup_minutes=0))
    assert fit.est_hours is not None and fit.est_hours < 1 / 60
    assert fit.billed_hours == pytest.approx(1 / 60)  # AWS bills at least 60 s
    assert "1 min minimum" in fit.factors["billing minimum"]


def test_checkpoint_writes_are_visible_but_sane() -> None:
    state = checkpoint_state_bytes(FULL_70B, get_preset("llama-3.1-70b"))
    assert 0.9e12 < state < 1.1e12  # bf16 weights + fp32 master + AdamW moments: ~1 TB
    fit = assess(FULL_70B, H100_NODE)
    assert fit.checkpoint_hours is not None and fit.run_hours is not None
    assert 0.03 < fit.checkpoint_hours / fit.run_hours < 0.2
    assert "checkpoint writes of 987.8 GB every 60 min" in fit.checkpoint_note
    none = assess(FULL_70B, H100_NODE, JobTerms(checkpoint_minutes=0))
    assert none.checkpoint_hours == 0
    lora = checkpoint_state_bytes(QLORA_8B, get_preset("llama-3.1-8b"))
    assert lora < 1e9  # adapters and their states only


def test_spot_risk_per_advisor_band() -> None:
    aws = replace(
        H100_NODE, provider="aws", spot=True, price_per_hour=None, spot_price_per_hour=40.0
    )
    safe = assess(FULL_70B, replace(aws, spot_band="<5%"))
    risky = assess(FULL_70B, replace(aws, spot_band=">20%"))
    assert safe.market_used == risky.market_used == "spot"
    assert safe.spot_rate_per_hour < risky.spot_rate_per_hour  # type: ignore[operator]
    assert safe.est_total_cost < risky.est_total_cost  # type: ignore[operator]
    assert "'<5%' band" in (safe.spot_risk_source or "")
    unknown_band = assess(FULL_70B, aws)
    assert "no advisor row" in (unknown_band.spot_risk_source or "")


def test_advisor_band_reading_sits_inside_the_measured_spot_traces() -> None:
    text = (resources.files("app.fit") / "data/spot_traces.yaml").read_text("utf-8")
    traces = yaml.safe_load(text)
    rates = [t["per_hour"] for t in traces["traces"]]
    for trace in traces["traces"]:  # the derived rates follow from the recorded counts
        assert trace["per_hour"] == pytest.approx(
            trace["interruptions"] / trace["instance_hours"], abs=5e-4
        )
    top = spot_risk_for_band("aws", traces["advisor_band"]).per_hour
    assert min(rates) <= top <= statistics.median(rates)
    # No AWS band reads as safer than the GPU-cloud default by more than the bands' own spread.
    safest = spot_risk_for_band("aws", "<5%").per_hour
    assert safest > 0.5 * spot_risk_for_band("verda", None).per_hour
    assert load_market_data().advisor.window_hours.value == 1


# --- assumptions ----------------------------------------------------------------------------


def test_assumptions_name_every_number_source() -> None:
    fit = assess(FULL_70B, H100_NODE, JobTerms(market="spot"))
    items = dict(
        job_assumptions(
            FULL_70B, estimate_memory(FULL_70B), JobTerms(), top=fit, top_gpu="h100-sxm", spot=fit
        )
    )
    assert set(items) >= {
        "Tokens", "Speed", "Set-up", "Checkpoints", "Spot risk", "Billing", "Market",
        "Headroom", "Plans",
    }  # fmt: skip
    assert "100M tokens" in items["Tokens"] and "fine-tuning default" in items["Tokens"]
    assert "matmul efficiency" in items["Speed"] and "H100" in items["Speed"]
    assert "weights download" in items["Set-up"]
    assert "every 60 min" in items["Checkpoints"]
    assert "Nebius" in items["Spot risk"]
    pretrain = Workload(params_b=1, method="pretrain")
    tokens = dict(job_assumptions(pretrain, estimate_memory(pretrain), JobTerms()))["Tokens"]
    assert "Chinchilla" in tokens and "20 per parameter" in tokens


def test_a_top_row_longer_than_a_week_says_so_and_how_to_rank_faster_plans() -> None:
    pretrain = Workload(params_b=1, method="pretrain")
    estimate = estimate_memory(pretrain)
    fit = assess(pretrain, H100, JobTerms())
    assert fit.est_hours is not None
    slow = replace(fit, est_hours=LONG_RUN_HOURS * 4.3)
    items = dict(job_assumptions(pretrain, estimate, JobTerms(), top=slow, top_gpu="h100-sxm"))
    assert "30 days" in items["Duration"] and "max_hours=" in items["Duration"]
    quick = replace(fit, est_hours=LONG_RUN_HOURS * 0.5)
    items = dict(job_assumptions(pretrain, estimate, JobTerms(), top=quick, top_gpu="h100-sxm"))
    assert "Duration" not in items


@pytest.mark.parametrize("minutes", [5e-324, 0.5, -1.0, math.nan])
def test_job_terms_refuse_checkpoint_intervals_under_a_minute(minutes: float) -> None:
    with pytest.raises(ValueError, match="checkpoint_minutes"):
        JobTerms(checkpoint_minutes=minutes)
    assert JobTerms(checkpoint_minutes=0).checkpoint_interval == 0
