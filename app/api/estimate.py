"""GET /api/estimate (memory and, for a named GPU, time of a training job), GET /api/models and
GET /api/stacks."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.exceptions import RequestValidationError

from app.fit.estimate import estimate_memory, estimate_time
from app.fit.query import RequiredWorkloadQuery
from app.fit.serialize import estimate_dict, presets_list, stacks_list
from app.gpus.catalog import load_catalog
from app.records import MIN_NETWORK_GBPS

router = APIRouter()

Interconnect = Literal["nvswitch", "nvlink", "pcie", "unknown"]
Network = Literal["infiniband", "roce", "efa", "ethernet", "none", "unknown"]


@router.get("/api/estimate", tags=["fit"])
def get_estimate(
    workload: RequiredWorkloadQuery,
    gpu: Annotated[
        str | None, Query(description="catalog GPU slug (e.g. h100-sxm): adds `time`")
    ] = None,
    interconnect: Annotated[
        Interconnect | None,
        Query(description="between the node's GPUs (default: the GPU's form factor)"),
    ] = None,
    network: Annotated[Network, Query(description="between nodes (gpus > 8)")] = "unknown",
    network_gbps: Annotated[
        float | None,
        Query(
            ge=MIN_NETWORK_GBPS,
            le=100_000,
            description="Gbit/s per node between nodes (at least 0.001: 1 Mbit/s)",
        ),
    ] = None,
    nodes: Annotated[
        int | None,
        Query(
            ge=1,
            le=1024,
            description="identical machines the GPUs are split over (a ranked plan's `nodes`)",
        ),
    ] = None,
) -> dict[str, Any]:
    """Per-GPU memory with breakdown, smallest card size and minimal topology; with `gpu`,
    tokens/s per GPU, MFU, hours and communication share on `gpus` of that GPU."""
    estimate = estimate_memory(workload)
    time = None
    if gpu is not None and gpu.strip():
        time = estimate_time(
            workload,
            estimate,
            gpu.strip().lower(),
            interconnect=interconnect,
            network=network,
            network_gbps=network_gbps,
            nodes=nodes,
        )
        if time is None:
            raise RequestValidationError(
                [
                    {
                        "type": "unknown_gpu",
                        "loc": ("query", "gpu"),
                        "input": gpu[:100],
                        "msg": f"unknown GPU '{gpu[:100]}'; known slugs: "
                        + ", ".join(sorted(load_catalog())),
                    }
                ]
            )
    return estimate_dict(estimate, time)


@router.get("/api/models", tags=["fit"])
def list_models() -> dict[str, Any]:
    """Model presets usable as `model=`."""
    return {"models": presets_list()}


@router.get("/api/stacks", tags=["fit"])
def list_stacks() -> dict[str, Any]:
    """Training stacks usable as `stack=`, with what each changes and its sources."""
    return {"stacks": stacks_list()}
