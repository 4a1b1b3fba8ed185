"""The bundled sample: real offers, broad enough, and normalized with few unknowns."""

from __future__ import annotations

from collections import Counter

from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.gpus.catalog import UNKNOWN
from app.pipeline.sample_loader import sample_date, sample_files
from app.store.models import Offer
from scrapers.skypilot import parse_catalog_csv


def test_every_sample_row_is_canonical_or_explicitly_unknown() -> None:
    rows = 0
    unknown: Counter[str] = Counter()
    for item in sample_files():
        parsed = parse_catalog_csv(item.cloud, item.csv_text)
        assert parsed.warnings == [], f"{item.cloud}: rows were skipped: {parsed.warnings[:3]}"
        rows += len(parsed.records)
        unknown.update(
            f"{item.cloud}:{r.gpu_raw_name}" for r in parsed.records if r.gpu_model == UNKNOWN
        )
    print("unknown raw names:", dict(unknown))
    assert rows == 837  # every GPU row of the recorded copies (see app/sample/README.md)
    assert sum(unknown.values()) < 0.02 * rows, f"too many unknown GPU names: {unknown}"


def test_sample_has_a_date_and_source_notes() -> None:
    assert sample_date() is not None
    for item in sample_files():
        assert "commit:" in item.source_note, item.cloud


def test_loaded_sample_is_broad(sample_loaded: int, session_factory: sessionmaker[Session]) -> None:
    with session_factory() as session:
        active = session.scalar(select(func.count()).select_from(Offer).where(Offer.active))
        providers = session.scalar(select(func.count(func.distinct(Offer.provider_id))))
    assert sample_loaded == active
    assert active is not None and active >= 500
    assert providers is not None and providers >= 6


def test_api_serves_the_sample(sample_loaded: int, client: TestClient) -> None:
    body = client.get("/api/offers", params={"limit": 1000}).json()
    assert body["total"] == sample_loaded
    providers = {o["provider"] for o in body["offers"]}
    assert len(providers) >= 6
    first = body["offers"][0]
    for key in (
        "provider",
        "instance_type",
        "region",
        "gpu_model",
        "gpu_raw_name",
        "gpu_count",
        "vram_gib_per_gpu",
        "price_per_hour",
        "spot_price_per_hour",
    ):
        assert key in first
    assert client.get("/healthz").status_code == 200
