"""Copy the GPU catalog (app/data/gpus.yaml) into the gpu_models table."""

from __future__ import annotations

from dataclasses import asdict

from sqlalchemy.orm import Session

from app.gpus.catalog import load_catalog
from app.models import GpuModel


def sync_gpu_catalog(session: Session) -> int:
    """Insert or update every catalog entry; returns how many there are. Caller commits."""
    catalog = load_catalog()
    for spec in catalog.values():
        session.merge(GpuModel(**asdict(spec)))
    session.flush()
    return len(catalog)
