"""The /api/estimate router and the `estimate` CLI command."""

from __future__ import annotations

import json

import typer
from fastapi import FastAPI
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.api.estimate import router
from app.cli.estimate import register
from app.fit.query import WorkloadQuery

app = FastAPI()
app.include_router(router)


@app.get("/probe")
def probe(workload: WorkloadQuery) -> dict[str, object]:
    return {"workload": None if workload is None else workload.model_dump()}


client = TestClient(app)


def _fields(resp: object) -> list[str]:
    body = resp.json()  # type: ignore[attr-defined]
    return [e["loc"][-1] for e in body["detail"] if e["loc"][0] == "query"]


def test_estimate_shape() -> None:
    resp = client.get(
        "/api/estimate",
        params={
            "model": "llama-3.1-8b",
            "method": "qlora",
            "grad_checkpointing": "true",
            "lora_rank": 16,
            "seq_len": 2048,
            "batch_size": 1,
        },
    )
    assert resp.status_code == 200
    body = resp.json()
    for key in ("per_gpu_gib", "breakdown", "fits_gpu_gib", "topology"):
        assert key in body
    for key in (
        "weights_gib",
        "gradients_gib",
        "optimizer_gib",
        "activations_gib",
        "overhead_gib",
        "logits_gib",
        "adapter_gib",
    ):
        assert key in body["breakdown"]
    assert body["topology"] == "single-gpu"
    assert body["fits_gpu_gib"] <= 24


def test_estimate_by_size() -> None:
    resp = client.get(
        "/api/estimate", params={"params_b": 13, "method": "full", "sharding": "zero3", "gpus": 8}
    )
    assert resp.status_code == 200
    assert resp.json()["model"] == "custom"


def test_422_names_field() -> None:
    cases = {
        "method": {"model": "gpt2", "method": "dpo"},
        "batch_size": {"model": "gpt2", "batch_size": 0},
        "grad_checkpointing": {"model": "gpt2", "grad_checkpointing": "maybe"},
        "sharding": {"model": "gpt2", "sharding": "zero4"},
        "model": {"model": "llama-9"},
        "params_b": {"params_b": -1},
    }
    for field, params in cases.items():
        resp = client.get("/api/estimate", params=params)
        assert resp.status_code == 422, field
        assert field in _fields(resp), (field, resp.json())


def test_422_cross_field() -> None:
    resp = client.get("/api/estimate", params={"method": "lora"})
    assert resp.status_code == 422 and _fields(resp) == ["model"]
    resp = client.get("/api/estimate", params={"model": "gpt2", "params_b": 1})
    assert resp.status_code == 422 and _fields(resp) == ["params_b"]
    resp = client.get("/api/estimate", params={"model": "nope"})
    assert "unknown model" in resp.json()["detail"][0]["msg"]


def test_models_list() -> None:
    body = client.get("/api/models").json()
    ids = {m["id"] for m in body["models"]}
    assert {"llama-3.1-8b", "gpt2", "mixtral-8x7b"} <= ids


def test_optional_workload_dependency() -> None:
    assert client.get("/probe").json() == {"workload": None}
    got = client.get("/probe", params={"model": "gpt2", "method": "full"}).json()
    assert got["workload"]["method"] == "full"
    assert client.get("/probe", params={"model": "bad"}).status_code == 422


def _cli() -> typer.Typer:
    cli = typer.Typer()
    register(cli)

    @cli.command("noop")
    def noop() -> None:  # a second command keeps typer in multi-command mode
        """Nothing."""

    return cli


def test_cli_table_and_json() -> None:
    runner = CliRunner()
    res = runner.invoke(_cli(), ["estimate", "--model", "llama-3.1-8b", "--method", "qlora"])
    assert res.exit_code == 0, res.output
    assert "weights" in res.output and "per GPU total" in res.output
    res = runner.invoke(
        _cli(),
        ["estimate", "--params-b", "7", "--method", "full", "--json", "--no-grad-checkpointing"],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["breakdown"]["optimizer_gib"] > 0


def test_cli_error_names_option() -> None:
    res = CliRunner().invoke(_cli(), ["estimate", "--model", "nope"])
    assert res.exit_code == 2


def test_non_finite_numbers_are_422_not_500() -> None:
    for value in ("nan", "inf"):
        resp = client.get("/api/estimate", params={"params_b": value})
        assert resp.status_code == 422 and _fields(resp) == ["params_b"]
