"""Plans through the API and the page: the issue's acceptance on the bundled sample, plans that
never mix listings or exceed stock, the market rule, tight rows, deadline and budget, the new
sorts, the assumptions panel, what would make it fit, and links that keep the workload."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.fit.hardware import RDMA_NETWORKS
from tests.web.helpers import ingest, record

HTML = {"accept": "text/html"}
FULL_70B = {"model": "llama-3.1-70b", "method": "full"}
JOBS: list[dict[str, Any]] = [
    {"model": "llama-3.1-8b", "method": "qlora"},
    FULL_70B,
    {"params_b": 1, "method": "pretrain"},
    {"model": "llama-3.1-8b", "method": "full"},
]


def ranked(client: TestClient, **params: Any) -> dict[str, Any]:
    response = client.get("/api/offers", params={"limit": 1000, **params})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def own_price(offer: dict[str, Any]) -> float | None:
    """The listing's price in the market the row says it used."""
    if offer["market_used"] == "on_demand":
        return offer["price_per_hour"] if not offer["spot"] else None
    if offer["spot_price_per_hour"] is not None:
        return float(offer["spot_price_per_hour"])
    return offer["price_per_hour"] if offer["spot"] else None


def assert_plans_are_one_listing_repeated(offers: list[dict[str, Any]]) -> None:
    """A plan never mixes providers, regions or instance types: it is `nodes` copies of the
    row's own listing, priced at that listing's price, within the stock the feed reports."""
    for o in offers:
        if not o["fits"]:
            continue
        assert o["nodes"] >= 1
        assert o["plan_gpu_count"] == pytest.approx(o["nodes"] * o["gpu_count"])
        if o["market_used"] is not None:
            assert o["price_used_per_hour"] == own_price(o), o["instance_type"]
            assert o["plan_price_per_hour"] == pytest.approx(o["nodes"] * o["price_used_per_hour"])
        if o["nodes"] > 1:
            assert o["network"] != "none"
            assert o["plan"].startswith(f"{o['nodes']} × {o['gpu_count']:g}× ")
            if o["availability_count"] is not None:
                assert o["nodes"] * o["gpu_count"] <= o["availability_count"]


# --- acceptance on the bundled sample -------------------------------------------------------


def test_70b_full_fine_tune_ranks_a_fast_multi_listing_plan_in_the_first_50(
    client: TestClient, sample_loaded: int
) -> None:
    body = ranked(client, **FULL_70B, limit=50)
    offers = body["offers"]
    plans = [
        o
        for o in offers
        if o["fits"]
        and o["nodes"] >= 2
        and o["gpu_count"] == 8
        and o["vram_gib_per_gpu"] >= 75
        and o["network"] in RDMA_NETWORKS
        and o["network_gbps"]
    ]
    assert plans, [(o["instance_type"], o["explanation"]) for o in offers]
    assert_plans_are_one_listing_repeated(offers)
    first = plans[0]
    # The row says how the listings are joined, e.g. "2 × 8× H100 SXM · InfiniBand 3,200 Gbit/s".
    label = {"infiniband": "InfiniBand", "roce": "RoCE", "efa": "EFA"}[first["network"]]
    assert f"{label} {first['network_gbps']:,.0f} Gbit/s" in first["plan"]
    assert first["plan"].startswith(f"{first['nodes']} × 8×") and not first["tight"]
    assert first["sharding_used"] == "zero3" and first["run_hours"] > 0
    assert first["est_total_cost"] == pytest.approx(
        first["nodes"] * first["billed_hours"] * first["price_used_per_hour"]
    )


@pytest.mark.parametrize(
    "job", JOBS, ids=lambda j: f"{j.get('model', j.get('params_b'))}-{j['method']}"
)
def test_sample_rankings_keep_margin_first_and_no_bf16_on_v100_or_t4(
    client: TestClient, sample_loaded: int, job: dict[str, Any]
) -> None:
    for margin in ("5", "25"):
        offers = ranked(client, **job, min_headroom_pct=margin)["offers"]
        classes = [0 if o["fits"] and not o["tight"] else 1 if o["fits"] else 2 for o in offers]
        assert classes == sorted(classes), job
        for o in offers:
            if o["fits"] and not o["tight"]:
                assert o["headroom_pct"] >= float(margin)
            if o["tight"]:
                assert 0 <= o["headroom_pct"] < float(margin)
            if o["gpu_model"].startswith(("v100", "t4")):
                assert not o["fits"] and o["reason"].startswith("no bf16 on "), o
        assert_plans_are_one_listing_repeated(offers)


# --- plans from ingested listings -----------------------------------------------------------


@pytest.fixture()
def cluster(session_factory: sessionmaker[Session]) -> None:
    """8x H100 InfiniBand listings with known and unknown stock, and a lone 8x A100."""
    common = {"network": "infiniband", "network_gbps": 3200.0, "billing": "hour"}
    ingest(
        session_factory,
        [
            record(instance_type="ib.unknown-stock", **common),
            record(instance_type="ib.one-left", availability_count=8, **common),
            record(instance_type="ib.three-left", availability_count=24, **common),
            record(
                instance_type="eth.a100",
                gpu_model="a100-80gb-sxm",
                gpu_raw_name="A100 SXM4 80GB",
                vram_gib_per_gpu=79.6,
                network="none",
                price_per_hour=12.0,
            ),
        ],
    )


def test_plans_respect_stock_and_agree_with_the_estimate(client: TestClient, cluster: None) -> None:
    offers = {o["instance_type"]: o for o in ranked(client, **FULL_70B)["offers"]}
    assert offers["ib.unknown-stock"]["nodes"] == 2
    assert offers["ib.three-left"]["nodes"] == 2  # two are enough
    one = offers["ib.one-left"]
    assert not one["fits"] and "1 listing available" in one["reason"]
    assert not offers["eth.a100"]["fits"] and "no network" in offers["eth.a100"]["reason"]
    assert_plans_are_one_listing_repeated(list(offers.values()))
    plan = offers["ib.unknown-stock"]
    time = client.get(
        "/api/estimate",
        params={
            **FULL_70B,
            "gpu": plan["gpu_model"],
            "gpus": int(plan["plan_gpu_count"]),
            "nodes": plan["nodes"],
            "sharding": plan["sharding_used"],
            "interconnect": plan["interconnect"],
            "network": plan["network"],
            "network_gbps": plan["network_gbps"],
        },
    ).json()["time"]
    assert time["nodes"] == 2 and time["gpus"] == 16
    assert time["hours"] == pytest.approx(plan["run_hours"], rel=1e-12)


@pytest.fixture()
def both_prices(session_factory: sessionmaker[Session]) -> None:
    """One-GPU listings: one with a cheap spot price too, one with a spot price barely under its
    on-demand price, one spot-only."""
    one = {"gpu_count": 1, "billing": "second", "network": "none"}
    ingest(
        session_factory,
        [
            record(
                instance_type="both.cheap-spot", price_per_hour=3.0, spot_price_per_hour=1.0, **one
            ),
            record(
                instance_type="both.dear-spot", price_per_hour=3.0, spot_price_per_hour=2.99, **one
            ),
            record(instance_type="spot.only", spot=True, spot_price_per_hour=1.5, **one),
        ],
    )


def test_market_any_keeps_the_lower_expected_total_and_says_so(
    client: TestClient, both_prices: None
) -> None:
    job = {"model": "llama-3.1-8b", "method": "qlora", "tokens": 3e8}
    body = ranked(client, **job)
    assert "shown at the lower expected total" in body["caption"]
    assert body["terms"]["market"] == "any"
    offers = {o["instance_type"]: o for o in body["offers"]}
    cheap, dear = offers["both.cheap-spot"], offers["both.dear-spot"]
    assert cheap["market_used"] == "spot" and cheap["price_used_per_hour"] == 1.0
    assert cheap["alternative"].startswith("on-demand $")
    assert dear["market_used"] == "on_demand" and dear["price_used_per_hour"] == 3.0
    assert dear["alternative"].startswith("spot $")
    assert float(dear["alternative"].split("$")[1].replace(",", "")) > dear["est_total_cost"]
    assert offers["spot.only"]["market_used"] == "spot"
    for o in body["offers"]:
        assert ("spot $" if o["market_used"] == "spot" else "on-demand $") in o["explanation"]
    on_demand = ranked(client, **job, market="on_demand")["offers"]
    assert {o["instance_type"] for o in on_demand} == {"both.cheap-spot", "both.dear-spot"}
    assert all(
        o["market_used"] == "on_demand" and o["price_used_per_hour"] == 3.0 for o in on_demand
    )
    spot = ranked(client, **job, market="spot")["offers"]
    assert len(spot) == 3
    assert all(
        o["market_used"] == "spot" and o["price_used_per_hour"] == o["spot_price_per_hour"]
        for o in spot
    )


def test_short_job_per_second_beats_hourly_and_set_up_is_in_hours_and_cost(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    one = {"gpu_count": 1, "network": "none", "price_per_hour": 2.0}
    ingest(
        session_factory,
        [
            record(instance_type="per.second", billing="second", **one),
            record(instance_type="per.hour", billing="hour", **one),
        ],
    )
    probe = {
        o["instance_type"]: o
        for o in ranked(client, model="llama-3.1-8b", method="qlora")["offers"]
    }
    tokens = 1e8 * (5 / 60) / probe["per.second"]["run_hours"]  # a 5-minute run
    job = {"model": "llama-3.1-8b", "method": "qlora", "tokens": tokens, "setup_minutes": 10}
    offers = ranked(client, **job)["offers"]
    assert [o["instance_type"] for o in offers] == ["per.second", "per.hour"]
    fast, hourly = offers
    assert fast["run_hours"] == pytest.approx(5 / 60)
    assert fast["setup_hours"] == pytest.approx(10 / 60)
    assert fast["est_hours"] == pytest.approx(15 / 60)
    assert fast["est_total_cost"] == pytest.approx(2.0 * 15 / 60)
    assert hourly["est_total_cost"] == pytest.approx(2.0)
    longer = ranked(client, **{**job, "setup_minutes": 40})["offers"][0]
    assert longer["est_hours"] - fast["est_hours"] == pytest.approx(0.5)
    assert longer["est_total_cost"] - fast["est_total_cost"] == pytest.approx(1.0)


# --- sorts, deadline and budget ------------------------------------------------------------


def test_sorts_by_time_and_cost_per_million_tokens(client: TestClient, sample_loaded: int) -> None:
    job = {"model": "llama-3.1-8b", "method": "qlora"}
    for sort, key in (
        ("time", "est_hours"),
        ("cost_per_m", "cost_per_m_tokens"),
        ("cost", "est_total_cost"),
    ):
        body = ranked(client, **job, sort=sort)
        assert body["sort"] == sort
        for tight in (False, True):
            values = [
                o[key]
                for o in body["offers"]
                if o["fits"] and o["tight"] is tight and o[key] is not None
            ]
            assert values == sorted(values), sort
    assert ranked(client, **job, sort="fit")["sort"] == "cost"  # the old name still works


def test_deadline_and_budget_filter_the_plans(client: TestClient, sample_loaded: int) -> None:
    job = {"params_b": 1, "method": "pretrain"}
    everything = ranked(client, **job)
    within = ranked(client, **job, max_hours=48, fits_only="true")
    assert 0 < within["fitting"] < everything["fitting"]
    assert within["total"] == within["fitting"] == len(within["offers"])
    assert all(o["est_hours"] <= 48 for o in within["offers"])
    assert "finishing within 48 h" in within["caption"]
    budget = ranked(client, **job, max_cost=150, fits_only="true")
    assert 0 < budget["fitting"] < everything["fitting"]
    assert all(o["est_total_cost"] <= 150 for o in budget["offers"])
    both = ranked(client, **job, max_cost=400, max_hours=24)
    fitting = [o for o in both["offers"] if o["fits"]]
    assert len(fitting) == both["fitting"]
    assert all(o["est_total_cost"] <= 400 and o["est_hours"] <= 24 for o in fitting)
    for bad in ("max_hours=-1", "max_cost=abc", "min_headroom_pct=95", "checkpoint_minutes=-5"):
        response = client.get(f"/api/offers?model=gpt2&{bad}")
        assert response.status_code == 422, bad
        assert bad.split("=")[0] in [e["loc"][-1] for e in response.json()["detail"]]


# --- the page -------------------------------------------------------------------------------


def test_page_shows_plans_tight_rows_and_assumptions(
    client: TestClient, sample_loaded: int
) -> None:
    # One row per offer, and far enough down to reach the tight rows after those with margin.
    html = client.get("/", params={**FULL_70B, "limit": 100, "group": "offer"}, headers=HTML).text
    assert "Assumptions behind every number below" in html
    for topic in ("Tokens", "Speed", "Set-up", "Checkpoints", "Spot risk", "Market", "Headroom"):
        assert f"<dt>{topic}</dt>" in html
    assert "100M tokens: the fine-tuning default" in html
    assert "plan: 2 × 8× H100 SXM · InfiniBand 3,200 Gbit/s" in html
    assert "⚠ tight" in html
    assert 'name="max_hours"' in html and 'name="checkpoint_minutes"' in html
    # Every link from a ranked row keeps the workload.
    row_links = re.findall(r'href="/(?:offers|gpus)/[^"?]+([^"]*)"', html)
    assert len(row_links) >= 100
    assert set(row_links) == {"?model=llama-3.1-70b&amp;method=full"}
    body = ranked(client, **FULL_70B, limit=50)
    assert all(o["url"].endswith("?model=llama-3.1-70b&method=full") for o in body["offers"])
    topics = [a["topic"] for a in body["assumptions"]]
    assert "Tokens" in topics and "Spot risk" in topics


def test_a_month_long_cheapest_plan_is_called_out(client: TestClient, sample_loaded: int) -> None:
    # Pretraining 1B on Chinchilla tokens: the cheapest expected total on the sample is a
    # single-card run of weeks; the page says so and how to rank faster plans first.
    body = ranked(client, params_b=1, method="pretrain", limit=5)
    top = body["offers"][0]
    notes = {a["topic"]: a["text"] for a in body["assumptions"]}
    assert top["est_hours"] > 168
    assert f"{top['est_hours']:,.0f} h" in notes["Duration"] and "max_hours=" in notes["Duration"]
    fast = ranked(client, params_b=1, method="pretrain", max_hours=48, limit=5)
    assert fast["offers"][0]["est_hours"] <= 48
    assert "Duration" not in {a["topic"] for a in fast["assumptions"]}


def test_page_says_what_would_make_a_hard_job_fit(client: TestClient, sample_loaded: int) -> None:
    # Without checkpointing few listings hold a 70B full fine-tune: the page lists the changes
    # that open the most, computed by the fit engine.
    hard = {**FULL_70B, "grad_checkpointing": "false"}
    body = ranked(client, **hard, limit=50)
    assert body["fitting"] < 50
    suggestion = body["suggestions"][0]
    assert suggestion["opens"] > 0 and suggestion["saves_gib"] > 0
    html = client.get("/", params=hard, headers=HTML).text
    assert "What would make it fit" in html and "QLoRA (4-bit base)" in html


def test_offer_page_shows_the_plan_with_the_workload(client: TestClient, cluster: None) -> None:
    plan = next(
        o for o in ranked(client, **FULL_70B)["offers"] if o["instance_type"] == "ib.unknown-stock"
    )
    html = client.get(plan["url"], headers=HTML).text
    assert "2 listings · 16 GPUs · zero3" in html
    assert "Checkpoint writes" in html and "weights download" in html
    assert 'href="/?model=llama-3.1-70b&amp;method=full"' in html  # back to the same ranking
    detail = client.get(plan["url"].replace("/offers/", "/api/offers/")).json()
    assert detail["nodes"] == 2 and detail["est_total_cost"] == plan["est_total_cost"]


# --- spot risk per instance type and region (the advisor join) ------------------------------


@pytest.fixture()
def aws_spot(session_factory: sessionmaker[Session]) -> None:
    """Identical AWS spot listings in two regions whose advisor bands differ, plus one the feed
    does not cover."""
    from app.pipeline.side_feeds import replace_advisor_rows
    from app.store.models import utcnow
    from scrapers.spot_advisor import SpotAdvisorRecord

    spot = {
        "provider": "aws",
        "instance_type": "p5.48xlarge",
        "spot": True,
        "price_per_hour": None,
        "spot_price_per_hour": 40.0,
        "network": "efa",
        "network_gbps": 3200.0,
        "billing": "second",
    }
    ingest(
        session_factory,
        [
            record(**spot, region="us-east-1"),
            record(**spot, region="us-west-2"),
            record(**spot, region="eu-west-1"),
        ],
        source="aws",
    )
    band = {"os": "Linux", "instance_type": "p5.48xlarge"}
    with session_factory.begin() as session:
        replace_advisor_rows(
            session,
            provider_id="aws",
            records=[
                SpotAdvisorRecord(
                    region="us-east-1", band_index=0, band_label="<5%", band_max_pct=5, **band
                ),
                SpotAdvisorRecord(
                    region="us-west-2", band_index=4, band_label=">20%", band_max_pct=100, **band
                ),
            ],
            now=utcnow(),
        )


def test_aws_spot_rows_are_costed_with_their_advisor_band(
    client: TestClient, aws_spot: None, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.fit import Workload
    from app.queries import OfferFilters, ranking, search_offers

    body = ranked(client, **FULL_70B, market="spot")
    by_region = {o["region"]: o for o in body["offers"]}
    safe, risky, unknown = by_region["us-east-1"], by_region["us-west-2"], by_region["eu-west-1"]
    assert "'<5%' band" in safe["spot_risk_source"] and "us-east-1" in safe["spot_risk_source"]
    assert "'>20%' band" in risky["spot_risk_source"]
    assert "no advisor row" in unknown["spot_risk_source"]
    assert safe["spot_rate_per_hour"] < risky["spot_rate_per_hour"]
    assert safe["est_total_cost"] < risky["est_total_cost"]
    assert body["offers"][0]["region"] == "us-east-1"
    # The database ranks them by band exactly as the Python fallback does.
    workload = Workload(**FULL_70B)
    filters = OfferFilters(market="spot", limit=100)
    sql = [i.row.id for i in search_offers(session, filters=filters, workload=workload).offers]
    monkeypatch.setattr(ranking, "MAX_SQL_SHAPES", 0)
    monkeypatch.setattr(ranking, "MAX_PG_SHAPES", 0)
    memory = [i.row.id for i in search_offers(session, filters=filters, workload=workload).offers]
    assert sql == memory == [o["id"] for o in body["offers"]]


@pytest.mark.parametrize("path", ["/api/offers", "/offers.csv", "/"])
@pytest.mark.parametrize("minutes", ["5e-324", "0.5"])
def test_checkpoint_intervals_under_a_minute_are_a_422(
    client: TestClient, path: str, minutes: str
) -> None:
    # Found by schemathesis: a denormal interval meant infinitely many checkpoint writes (500).
    response = client.get(path, params={"params_b": 1, "checkpoint_minutes": minutes})
    assert response.status_code == 422
    assert "checkpoint_minutes" in response.text
