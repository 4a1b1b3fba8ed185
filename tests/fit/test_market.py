"""Set-up time, checkpoint writes and spot risk (app/fit/market.py) over provider_market.yaml."""

from __future__ import annotations

import copy
import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from app.fit.market import (
    advisor_index,
    band_fraction,
    checkpoint_overhead_hours,
    expected_interruptions,
    expected_spot_overhead_hours,
    fraction_to_hourly_rate,
    hub_weight_bytes,
    load_market_data,
    parse_market_data,
    setup_hours,
    spot_interruption_rate,
)
from scrapers.base import RawPage
from scrapers.facts import ALIASES, load_facts
from scrapers.registry import SCRAPERS
from scrapers.skypilot import provider_for_cloud
from scrapers.spot_advisor import SpotAdvisorFeed
from tests.scrapers.conftest import fixture_text

# The advisor band reading's window (app/fit/data/provider_market.yaml, advisor.window_hours).
WINDOW = load_market_data().advisor.window_hours.value


@dataclass(frozen=True)
class Row:
    """Stands in for a spot_advisor ORM row."""

    region: str
    instance_type: str
    band_label: str
    provider_id: str = "aws"
    os: str = "Linux"
    fetched_at: datetime | None = datetime(2026, 12, 3, tzinfo=UTC)


def raw_data() -> dict[str, Any]:
    text = (resources.files("app.fit") / "data/provider_market.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def offer_provider_ids() -> set[str]:
    """Every provider id an offer can carry: direct scrapers and skypilot-<cloud> fallbacks."""
    return {
        provider_for_cloud(name.removeprefix("skypilot-")) if name.startswith("skypilot-") else name
        for name in SCRAPERS
    }


# --- the data file --------------------------------------------------------------------------


def test_every_offer_provider_has_an_entry() -> None:
    data = load_market_data()
    assert offer_provider_ids() <= set(data.providers)
    assert set(ALIASES.values()) <= set(data.aliases)  # facts-file names resolve too


@pytest.mark.parametrize("provider", sorted(offer_provider_ids()))
def test_spot_availability_agrees_with_the_facts_files(provider: str) -> None:
    facts = load_facts(provider)
    declared = facts.data.spot_available if facts.data else None
    entry = load_market_data().provider(provider)
    assert entry is not None
    if declared is not None:
        assert entry.spot.available == declared.value


def test_spot_markets_state_their_rule_and_a_traced_default() -> None:
    for provider_id, entry in load_market_data().providers.items():
        assert entry.spot.rule, provider_id
        if entry.spot.available:
            rate = entry.spot.default_rate
            assert rate is not None and (rate.source or rate.assumption), provider_id


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("kinds", "hyperscaler_vm", "image_minutes"), {"value": 2}, "source or an assumption"),
        (
            ("kinds", "hyperscaler_vm", "image_minutes"),
            {"value": 2, "source": "http://example.com"},
            "https URL",
        ),
        (("kinds", "hyperscaler_vm", "image_minutes"), {"value": -1, "assumption": "x"}, "0"),
        (("kinds", "gpu_cloud_vm", "download_gbps"), {"value": 0, "assumption": "x"}, "above 0"),
        (
            ("providers", "lambdalabs", "setup", "load_gbytes_per_s"),
            {"value": 0, "assumption": "x"},
            "above 0",
        ),
        (("providers", "vastai", "kind"), "cloud", "kind"),
        (
            ("providers", "vastai", "spot", "default_rate"),
            {"per_hour": 0.1, "band": ">20%", "assumption": "x"},
            "exactly one",
        ),
        (
            ("providers", "vastai", "spot", "default_rate"),
            {"band": "high", "assumption": "x"},
            "not like",
        ),
        (
            ("providers", "vastai", "spot", "default_rate"),
            {"band": "5%", "assumption": "x"},
            "not like",
        ),
        (("providers", "vastai", "spot", "default_rate"), None, "needs a default_rate"),
        (("advisor", "open_band_fraction"), {"value": 3, "assumption": "x"}, "fraction"),
        (("aliases", "vast"), "nosuch", "unknown providers"),
        (("providers", "vastai", "spot", "surprise"), 1, "Extra inputs"),
    ],
)
def test_invalid_data_files_are_rejected(
    path: tuple[str, ...], value: object, message: str
) -> None:
    raw = copy.deepcopy(raw_data())
    node = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ValidationError, match=message):
        parse_market_data(raw)


def test_kinds_missing_from_the_file_are_rejected() -> None:
    raw = copy.deepcopy(raw_data())
    del raw["kinds"]["unknown"]
    with pytest.raises(ValidationError, match="kinds missing"):
        parse_market_data(raw)


# --- set-up ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "params_b", "minutes", "basis"),
    [
        # provisioning + image + start + GB*8/Gbit/s/60 + GB/(GB/s)/60, from the data file
        ("aws", 70, 3 + 2 + 1 + 140 * 8 / 2 / 60 + 140 / 2 / 60, "provider"),
        ("gcp", 8, 3 + 2 + 1 + 16 * 8 / 2 / 60 + 16 / 2 / 60, "provider"),
        ("vastai", 8, 1 + 2 + 1 + 16 * 8 / 1 / 60 + 16 / 1 / 60, "provider"),
        ("vast", 8, 1 + 2 + 1 + 16 * 8 / 1 / 60 + 16 / 1 / 60, "provider"),  # facts alias
        ("lambdalabs", 8, 3 + 0 + 1 + 16 * 8 / 2 / 60 + 16 / 2 / 60, "provider"),  # Lambda Stack
        ("tensordock", 8, 3 + 2 + 1 + 16 * 8 / 1 / 60 + 16 / 1 / 60, "provider"),
        ("acme-gpus", 8, 5 + 3 + 1 + 16 * 8 / 1 / 60 + 16 / 1 / 60, "unknown_provider"),
        ("runpod", 0, 1 + 2 + 1, "provider"),  # no weights to fetch
    ],
)
def test_setup_minutes_per_provider(
    provider: str, params_b: float, minutes: float, basis: str
) -> None:
    setup = setup_hours(provider, hub_weight_bytes(params_b))
    assert setup.minutes == pytest.approx(minutes)
    assert setup.hours == pytest.approx(minutes / 60)
    assert setup.basis == basis
    assert sum(s.minutes for s in setup.steps) == pytest.approx(minutes)


def test_setup_scales_with_the_model_and_names_every_source() -> None:
    small, big = setup_hours("aws", hub_weight_bytes(8)), setup_hours("aws", hub_weight_bytes(70))
    download = {s.name: s.minutes for s in big.steps}["weights download"]
    assert download == pytest.approx(
        8.75 * {s.name: s.minutes for s in small.steps}["weights download"]
    )
    notes = "\n".join(big.notes)
    assert "https://arxiv.org/abs/2107.03467" in notes  # provisioning measurement cited
    assert "https://github.com/huggingface/hf_transfer" in notes
    assert "140.0 GB at 2 Gbit/s" in notes
    assert all("assumption:" in n or "source:" in n for n in big.notes)
    assert big.summary().startswith("set-up 16.5 min = provisioning 3.0 + image 2.0")
    unknown = setup_hours("acme-gpus", 1e9)
    assert "unknown provider (conservative default)" in unknown.notes[0]


def test_user_setup_minutes_replace_the_estimate() -> None:
    assert setup_hours("aws", hub_weight_bytes(70), setup_minutes=12).hours == pytest.approx(0.2)
    zero = setup_hours("acme", hub_weight_bytes(70), setup_minutes=0)
    assert (zero.hours, zero.basis, zero.notes) == (
        0.0,
        "user",
        ("set-up: 0.0 min (your setup_minutes)",),
    )


def test_offer_downlink_replaces_the_assumed_hub_speed() -> None:
    setup = setup_hours("vastai", hub_weight_bytes(8), download_gbps=10)
    step = {s.name: s for s in setup.steps}["weights download"]
    assert step.minutes == pytest.approx(16 * 8 / 10 / 60)
    assert "the offer's own downlink" in step.note


@pytest.mark.parametrize(
    "kwargs",
    [
        {"weight_bytes": -1.0},
        {"weight_bytes": math.nan},
        {"weight_bytes": math.inf},
        {"weight_bytes": 1e9, "setup_minutes": -5},
        {"weight_bytes": 1e9, "download_gbps": 0},
    ],
)
def test_setup_rejects_bad_numbers(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        setup_hours("aws", **kwargs)


# --- checkpoints ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state_bytes", "interval", "run_hours", "gbps", "writers", "hours"),
    [
        (100e9, 30, 2.0, 8, 1, 3 * 100 / 3600),  # 3 writes inside 120 min, 100 s each
        (100e9, 30, 0.5, 8, 1, 0.0),  # ends exactly at the first boundary: the final save only
        (100e9, 30, 31 / 60, 8, 1, 100 / 3600),
        (100e9, 30, 2.0, 8, 2, 3 * 50 / 3600),  # two nodes write their shards in parallel
        (100e9, 30, 2.0, 80, 1, 3 * 10 / 3600),
        (100e9, None, 2.0, 8, 1, 0.0),  # no checkpoints
        (100e9, 0, 2.0, 8, 1, 0.0),
        (100e9, 30, 0.0, 8, 1, 0.0),  # a 0-minute job
        (0.0, 30, 2.0, 8, 1, 0.0),
        (16e9, 60, 1000.0, 8, 1, 999 * 16 / 3600),  # a very long run: one write per hour
    ],
)
def test_checkpoint_overhead(
    state_bytes: float,
    interval: float | None,
    run_hours: float,
    gbps: float,
    writers: int,
    hours: float,
) -> None:
    got = checkpoint_overhead_hours(
        state_bytes, interval, run_hours, write_gbps=gbps, writers=writers
    )
    assert got == pytest.approx(hours)


def test_checkpoint_default_bandwidth_comes_from_the_data_file() -> None:
    assert load_market_data().checkpoint.write_gbps.value == 8
    assert checkpoint_overhead_hours(100e9, 30, 2.0) == pytest.approx(3 * 100 / 3600)


@pytest.mark.parametrize(
    "args",
    [(-1.0, 30, 1.0), (1e9, -30, 1.0), (1e9, 30, -1.0), (1e9, math.nan, 1.0)],
)
def test_checkpoint_rejects_bad_numbers(args: tuple[float, float, float]) -> None:
    with pytest.raises(ValueError):
        checkpoint_overhead_hours(*args)
    with pytest.raises(ValueError):
        checkpoint_overhead_hours(1e9, 30, 1.0, writers=0)


# --- spot risk ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "fraction"),
    [("<5%", 0.025), ("5-10%", 0.075), ("10-15%", 0.125), ("15-20%", 0.175), (">20%", 0.30),
     (">40%", 0.40), (" 5 - 10 % ", 0.075)],
)  # fmt: skip
def test_band_fraction(label: str, fraction: float) -> None:
    assert band_fraction(label) == pytest.approx(fraction)


@pytest.mark.parametrize("label", ["high", "", "5%", "10-%"])
def test_band_fraction_rejects_other_labels(label: str) -> None:
    with pytest.raises(ValueError):
        band_fraction(label)


def test_fraction_to_hourly_rate() -> None:
    assert fraction_to_hourly_rate(0.3, WINDOW) == pytest.approx(-math.log(0.7) / WINDOW)
    assert fraction_to_hourly_rate(0.001, WINDOW) == pytest.approx(0.001 / WINDOW, rel=1e-3)
    assert fraction_to_hourly_rate(0.0, WINDOW) == 0.0
    # Round trip: an instance running the whole window is interrupted with probability p.
    rate = fraction_to_hourly_rate(0.125, WINDOW)
    assert 1 - math.exp(-rate * WINDOW) == pytest.approx(0.125)
    with pytest.raises(ValueError):
        fraction_to_hourly_rate(1.0, WINDOW)


ADVISOR = [
    Row("us-east-1", "p5.48xlarge", ">20%"),
    Row("us-east-1", "p5en.48xlarge", "<5%"),
    Row("us-west-2", "p4d.24xlarge", "10-15%"),
    Row("us-east-1", "p4d.24xlarge", "<5%", os="Windows"),
    Row("us-east-1", "g6.xlarge", "very high"),
]


@pytest.mark.parametrize(
    ("provider", "itype", "region", "per_hour", "basis", "text"),
    [
        ("aws", "p5.48xlarge", "us-east-1", -math.log(0.7) / WINDOW, "advisor", "'>20%' band"),
        ("aws", "p5en.48xlarge", "us-east-1", -math.log(0.975) / WINDOW, "advisor", "'<5%'"),
        ("aws", "p4d.24xlarge", "us-west-2", -math.log(0.875) / WINDOW, "advisor", "us-west-2"),
        # Windows rows are not used for training; no Linux row -> AWS default ('>20%' band)
        ("aws", "p4d.24xlarge", "us-east-1", -math.log(0.7) / WINDOW, "provider_default",
         "no advisor row"),
        ("aws", "g6.xlarge", "us-east-1", -math.log(0.7) / WINDOW, "provider_default",
         "not understood"),
        ("AWS ", "p5.48xlarge", "us-east-1", -math.log(0.7) / WINDOW, "advisor",
         "fetched 2026-12-03"),
        ("gcp", "a3-highgpu-8g", "us-central1", -math.log(0.7) / WINDOW, "provider_default",
         "30 s notice"),
        ("azure", "Standard_ND96isr_H100_v5", "eastus", -math.log(0.7) / WINDOW, "provider_default",
         "28 days"),
        ("vastai", "8x H100", "Texas, US", 0.05, "provider_default", "outbid"),
        ("vast", "8x H100", "Texas, US", 0.05, "provider_default", "docs.vast.ai"),
        ("runpod", "H100 SXM", "CA", 0.05, "provider_default", "docs.runpod.io"),
        ("verda", "1H100.80S.30V", "FIN-01", 0.02, "provider_default", "assumption"),
        ("lambdalabs", "gpu_1x_h100", "us-east-1", 0.05, "no_spot_market", "no spot market"),
        ("acme-gpus", "big", "mars-1", 0.05, "unknown_provider", "unknown provider 'acme-gpus'"),
    ],
)  # fmt: skip
def test_spot_interruption_rate(
    provider: str, itype: str, region: str, per_hour: float, basis: str, text: str
) -> None:
    risk = spot_interruption_rate(provider, itype, region, advisor_index(ADVISOR))
    assert risk.per_hour == pytest.approx(per_hour)
    assert risk.basis == basis
    assert text in risk.source


def test_rows_of_another_provider_are_not_used() -> None:
    rows = [Row("us-east-1", "a3-highgpu-8g", "<5%", provider_id="aws")]
    risk = spot_interruption_rate("gcp", "a3-highgpu-8g", "us-east-1", rows)
    assert risk.basis == "provider_default"


def test_aws_without_any_advisor_data_uses_its_documented_default() -> None:
    for advisor in (None, [], {}):
        risk = spot_interruption_rate("aws", "p5.48xlarge", "us-east-1", advisor)
        assert risk.basis == "provider_default" and risk.notice_seconds == 120
        assert "290 of the 682 Linux GPU rows" in risk.source


def test_rates_from_the_recorded_feed() -> None:
    """The scraper's records feed the rate function directly (through a row-like adapter)."""
    parsed = SpotAdvisorFeed().parse(
        RawPage(url="x", body=fixture_text("aws_spot_advisor", "spot-advisor-2025-06.json"))
    )
    rows = [
        Row(r.region, r.instance_type, r.band_label, os=r.os, fetched_at=None)
        for r in parsed.records
    ]
    index = advisor_index(rows)
    p4d = spot_interruption_rate("aws", "p4d.24xlarge", "us-east-1", index)
    p5en = spot_interruption_rate("aws", "p5en.48xlarge", "us-east-1", index)
    assert p4d.band_label == "10-15%" and p5en.band_label == "<5%"
    assert p5en.per_hour < p4d.per_hour


# --- expected spot overhead -----------------------------------------------------------------


def segment_time(rate: float, restart_h: float, work_h: float) -> float:
    return (1 / rate + restart_h) * math.expm1(rate * work_h)


@pytest.mark.parametrize(
    ("run", "rate", "ckpt", "restart", "hours"),
    [
        (0.0, 0.05, 30, 10, 0.0),  # a 0-minute job
        (10.0, 0.0, 30, 10, 0.0),  # no interruptions
        (1.0, 1.0, None, 0, math.e - 2),  # one segment, no restart: (e - 1) - 1
        (1.0, 1.0, 30, 0, 2 * segment_time(1, 0, 0.5) - 1),
        (1.25, 0.5, 30, 6, 2 * segment_time(0.5, 0.1, 0.5) + segment_time(0.5, 0.1, 0.25) - 1.25),
        (1000.0, 1.0, None, 10, math.inf),  # never finishes in expectation
    ],
)  # fmt: skip
def test_expected_spot_overhead_exact_cases(
    run: float, rate: float, ckpt: float | None, restart: float, hours: float
) -> None:
    assert expected_spot_overhead_hours(run, rate, ckpt, restart) == pytest.approx(hours)


def test_small_rates_cost_half_an_interval_plus_restart_per_interruption() -> None:
    run, rate, ckpt, restart = 100.0, 0.001, 30.0, 10.0
    first_order = rate * run * (ckpt / 60 / 2 + restart / 60)
    assert expected_spot_overhead_hours(run, rate, ckpt, restart) == pytest.approx(
        first_order, rel=0.01
    )
    assert expected_interruptions(run, rate, ckpt) == pytest.approx(rate * run, rel=0.01)


def test_long_runs_grow_linearly_with_checkpoints_and_explode_without() -> None:
    with_ckpt = [expected_spot_overhead_hours(h, 0.05, 30, 10) for h in (100, 200, 400)]
    assert with_ckpt[1] / with_ckpt[0] == pytest.approx(2, rel=1e-6)
    assert with_ckpt[2] / with_ckpt[0] == pytest.approx(4, rel=1e-6)
    without = [expected_spot_overhead_hours(h, 0.05, None, 10) for h in (10, 20, 40)]
    assert without[1] / without[0] > 2.5 and without[2] / without[1] > without[1] / without[0]


def test_more_frequent_checkpoints_and_faster_restarts_lose_less() -> None:
    by_interval = [expected_spot_overhead_hours(48, 0.05, c, 10) for c in (5, 15, 60, 240, None)]
    assert by_interval == sorted(by_interval)
    by_restart = [expected_spot_overhead_hours(48, 0.05, 30, r) for r in (0, 10, 60)]
    assert by_restart == sorted(by_restart) and by_restart[0] > 0


def test_closed_form_matches_a_simulation() -> None:
    """Monte Carlo of the same process: exponential interruptions, work lost, then a restart."""
    rate, ckpt_h, restart_h, run = 0.2, 1.0, 0.25, 5.0
    rng = random.Random(13)
    total = 0.0
    trials = 20_000
    for _ in range(trials):
        done = wall = 0.0
        while done < run - 1e-12:
            work = min(ckpt_h, run - done)
            failure = rng.expovariate(rate)
            if failure >= work:
                wall += work
                done += work
            else:
                wall += failure + restart_h
        total += wall - run
    simulated = total / trials
    assert expected_spot_overhead_hours(run, rate, 60, 15) == pytest.approx(simulated, rel=0.05)


@pytest.mark.parametrize(
    "args",
    [(-1.0, 0.1, 30, 10), (1.0, -0.1, 30, 10), (1.0, 0.1, -30, 10), (1.0, 0.1, 30, -1),
     (math.inf, 0.1, 30, 10)],
)  # fmt: skip
def test_spot_overhead_rejects_bad_numbers(args: tuple[float, float, float, float]) -> None:
    with pytest.raises(ValueError):
        expected_spot_overhead_hours(*args)
