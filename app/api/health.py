"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text

from app.core.deps import SessionDep

router = APIRouter()


@router.get("/healthz", tags=["health"])
def healthz(session: SessionDep) -> dict[str, str]:
    """200 when the app can reach its database."""
    session.execute(text("SELECT 1"))
    return {"status": "ok"}
