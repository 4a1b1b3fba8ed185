"""The page's optional workload, parsed leniently from the query string (blank fields ignored)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.fit import Workload
from app.queries import workload_from_args


def optional_workload(request: Request) -> Workload | None:
    """FastAPI dependency: the request's workload, or None without model/params_b."""
    return workload_from_args(request.query_params.multi_items())


WorkloadDep = Annotated[Workload | None, Depends(optional_workload)]
