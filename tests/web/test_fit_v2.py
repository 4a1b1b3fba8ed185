"""Fit engine v2 through the web layer: /api/offers and /api/estimate agree on time, the page shows
the memory bar, the stack and the new workload fields, and share links keep them."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from tests.web.helpers import csrf_of, ingest, record

HTML = {"accept": "text/html"}

# Several machine shapes: GPU, count and links differ; all on-demand (spot adds its overhead).
SHAPES: list[dict[str, Any]] = [
    {"instance_type": "t.1xh100", "gpu_count": 1},
    {"instance_type": "t.8xh100", "gpu_count": 8, "interconnect": "nvswitch"},
    {
        "instance_type": "t.4xa100",
        "gpu_model": "a100-80gb-sxm",
        "gpu_raw_name": "A100 SXM4 80GB",
        "gpu_count": 4,
        "vram_gib_per_gpu": 80.0,
        "interconnect": "nvlink",
    },
    {
        "instance_type": "t.2x4090",
        "gpu_model": "rtx-4090",
        "gpu_raw_name": "RTX 4090",
        "gpu_count": 2,
        "vram_gib_per_gpu": 24.0,
        "interconnect": "pcie",
        "price_per_hour": 0.8,
    },
    {
        "instance_type": "t.16xh100",
        "gpu_count": 16,
        "interconnect": "nvswitch",
        "network": "infiniband",
        "network_gbps": 3200,
    },
    {
        "instance_type": "t.16xh100eth",
        "gpu_count": 16,
        "interconnect": "nvswitch",
        "network": "ethernet",
        "network_gbps": 100,
    },
]

WORKLOADS: list[dict[str, Any]] = [
    {"model": "llama-3.1-8b", "method": "qlora", "stack": "torchtune", "batch_size": 2},
    {"model": "llama-3.2-3b", "method": "full", "sharding": "zero3", "tokens": 2e8},
    {"params_b": 1.5, "method": "pretrain", "vocab": 32000, "stack": "torchtitan"},
]


@pytest.fixture()
def shapes(session_factory: sessionmaker[Session]) -> None:
    ingest(session_factory, [record(**shape) for shape in SHAPES])


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: f"{w.get('model')}-{w['method']}")
def test_offers_hours_equal_estimate_time_hours(
    client: TestClient, shapes: None, workload: dict[str, Any]
) -> None:
    body = client.get("/api/offers", params={**workload, "limit": 100}).json()
    priced = [o for o in body["offers"] if o["fits"] and o["run_hours"] is not None]
    assert len(priced) >= 4, [o["explanation"] for o in body["offers"]]
    for offer in priced:
        params = {
            **workload,
            "gpu": offer["gpu_model"],
            "gpus": int(offer["plan_gpu_count"]),
            "nodes": offer["nodes"],
            "sharding": offer["sharding_used"],
            "interconnect": offer["interconnect"],
            "network": offer["network"],
        }
        if offer["network_gbps"] is not None:
            params["network_gbps"] = offer["network_gbps"]
        time = client.get("/api/estimate", params=params).json()["time"]
        # The training hours agree; the row's expected hours add set-up and checkpoint writes.
        assert time["hours"] == pytest.approx(offer["run_hours"], rel=1e-12), offer["instance_type"]
        overheads = offer["setup_hours"] + offer["checkpoint_hours"]
        if offer["market_used"] == "on_demand":
            assert offer["est_hours"] == pytest.approx(time["hours"] + overheads, rel=1e-12)
        assert time["tokens_per_s_per_gpu"] == pytest.approx(offer["tokens_per_s_per_gpu"], 1e-3)
        assert time["mfu"] == pytest.approx(offer["mfu"], abs=1e-4)
        assert time["comm_share"] == pytest.approx(offer["comm_share"], abs=1e-4)


def test_links_decide_the_ranking_speed(client: TestClient, shapes: None) -> None:
    params = {"model": "llama-3.1-70b", "method": "full", "sharding": "zero3", "limit": 100}
    offers = {
        o["instance_type"]: o for o in client.get("/api/offers", params=params).json()["offers"]
    }
    ib, eth = offers["t.16xh100"], offers["t.16xh100eth"]
    assert ib["fits"] and eth["fits"]
    assert ib["tokens_per_s_per_gpu"] > 2 * eth["tokens_per_s_per_gpu"]
    assert eth["comm_share"] > ib["comm_share"]
    assert "tokens/s per GPU at" in ib["explanation"] and "MFU" in ib["explanation"]


def test_page_shows_memory_bar_stack_and_row_speed(client: TestClient, shapes: None) -> None:
    html = client.get(
        "/?model=llama-3.1-8b&method=qlora&stack=torchtune&gpu=rtx-4090", headers=HTML
    ).text
    assert '<svg class="chart memory-bar"' in html
    assert "GeForce RTX 4090: 24.0 GiB" in html  # the filtered card's line on the bar
    assert "Stack assumed: <strong>torchtune recipes" in html
    assert "a chunked loss" in html  # the stated assumptions
    assert "tokens/s per GPU at" in html  # the row's detail line
    assert 'name="stack"' in html and '<option value="torchtune" selected>' in html


def test_advanced_fields_round_trip_and_bad_values_are_422(client: TestClient) -> None:
    query = (
        "params_b=7&method=full&stack=litgpt&pure_16bit=true&packed=true&grad_accum=4"
        "&lora_targets=qv&layers=32&hidden=4096&heads=32&kv_heads=8&vocab=32000"
        "&intermediate=14336&dataset_tokens=1000000&epochs=2"
    )
    assert client.get(f"/api/offers?{query}").status_code == 200
    html = client.get(f"/?{query}", headers=HTML).text
    for name, value in (("grad_accum", "4"), ("vocab", "32000"), ("epochs", "2")):
        assert f'name="{name}" value="{value}"' in html
    assert '<option value="true" selected>packed / fixed length</option>' in html
    bad_values = ("stack=megatron", "packed=maybe", "grad_accum=0", "lora_targets=mlp")
    # A run of under one token (5e-324 epochs was a 500: no cost per token).
    for bad in (*bad_values, "dataset_tokens=1000&epochs=5e-324"):
        response = client.get(f"/api/offers?model=gpt2&{bad}")
        assert response.status_code == 422, bad
        named = [e["loc"][-1] for e in response.json()["detail"]]
        assert bad.rsplit("&", 1)[-1].split("=")[0] in named, (bad, named)


def test_saved_search_and_share_link_keep_the_new_fields(client: TestClient) -> None:
    query = "model=llama-3.1-8b&method=qlora&stack=unsloth&packed=true&grad_accum=8"
    token = csrf_of(client.get("/").text)
    saved = client.post(
        "/saved",
        data={"csrf": token, "query": query, "name": "unsloth run"},
        follow_redirects=False,
    )
    assert saved.status_code == 303
    stored = [s for s in client.get("/api/saved").json()["saved"] if s["name"] == "unsloth run"]
    assert stored and all(p in stored[0]["query"] for p in query.split("&"))
    share = stored[0]["share_url"].rsplit("/", 1)[1]
    location = client.get(f"/s/{share}", follow_redirects=False).headers["location"]
    assert all(p in location for p in ("stack=unsloth", "packed=true", "grad_accum=8"))


def test_offer_page_shows_speed(client: TestClient, shapes: None) -> None:
    offers = client.get("/api/offers", params={"model": "llama-3.1-8b", "method": "qlora"}).json()
    first = offers["offers"][0]
    assert first["url"].endswith("?model=llama-3.1-8b&method=qlora")  # the link keeps the job
    html = client.get(first["url"], headers=HTML).text
    assert "Tokens/s per GPU" in html and "MFU" in html and "% of step time" in html
