"""GET /api/estimate (memory need of a training job) and GET /api/models (presets)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.fit.estimate import estimate_memory
from app.fit.query import RequiredWorkloadQuery
from app.fit.serialize import estimate_dict, presets_list

router = APIRouter()


@router.get("/api/estimate", tags=["fit"])
def get_estimate(workload: RequiredWorkloadQuery) -> dict[str, Any]:
    """Per-GPU memory with breakdown, smallest card size and minimal topology."""
    return estimate_dict(estimate_memory(workload))


@router.get("/api/models", tags=["fit"])
def list_models() -> dict[str, Any]:
    """Model presets usable as `model=`."""
    return {"models": presets_list()}
