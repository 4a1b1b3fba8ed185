"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Request
from sqlalchemy import text

from app.core.deps import SessionDep

router = APIRouter()


@router.get("/healthz", tags=["health"])
def healthz(request: Request, session: SessionDep) -> dict[str, str]:
    """200 when the app can reach its database; `start_up_warm` says whether this process is
    still warming the current data version in the background (`running`), finished (`done`) or
    does not (`off`): first requests are slower while it runs."""
    session.execute(text("SELECT 1"))
    warming = getattr(request.app.state, "start_up_warm", None)
    state = "off" if warming is None else "running" if warming.is_alive() else "done"
    return {"status": "ok", "start_up_warm": state}
