"""Copy the GPU catalog (app/data/gpus.yaml) into the gpu_models table."""

from __future__ import annotations

from dataclasses import asdict

from sqlalchemy.orm import Session

from app.gpus.catalog import load_catalog
from app.store.data_cache import bump_data_version
from app.store.models import GpuModel


def sync_gpu_catalog(session: Session) -> int:
    """Insert or update every catalog entry; returns how many there are. Caller commits."""
    catalog = load_catalog()
    for spec in catalog.values():
        session.merge(GpuModel(**asdict(spec)))
    # GPU facts feed the fit ranking and the vendor facet: cached results must not outlive them.
    bump_data_version(session)
    session.flush()
    return len(catalog)
