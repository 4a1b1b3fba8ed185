"""The offer page: availability over time next to price, the provider link, the recorded date."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.pipeline.ingest import ingest_records
from app.records import Availability, OfferRecord
from app.store.models import Offer
from app.web.charts import availability_chart

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def test_availability_chart_draws_states_and_counts() -> None:
    svg = str(
        availability_chart(
            [
                (T0, "in_stock", 12),
                (T0 + timedelta(hours=6), "limited", 2),
                (T0 + timedelta(hours=12), "out", 0),
            ],
            title="Availability of <x>",
            end=T0 + timedelta(hours=18),
        )
    )
    assert svg.startswith("<svg") and "&lt;x&gt;" in svg and "<x>" not in svg
    assert 'aria-labelledby="avail-title avail-desc"' in svg
    for state in ("in_stock", "limited", "out"):
        assert f'class="avail {state}"' in svg
    assert 'class="line s-count"' in svg and "12 available" in svg
    assert "available count from 0 to 12" in svg
    assert "No availability" in str(availability_chart([], title="t"))
    unknown = str(availability_chart([(T0, "unknown", None)], title="t", end=T0))
    assert "does not say whether" in unknown and "s-count" not in unknown


def _record(availability: Availability, count: int | None) -> OfferRecord:
    return OfferRecord(
        provider="cloudrift",
        instance_type="rtx49-7c-kn.1",
        region="us-east-nc-nr-1",
        gpu_model="rtx-4090",
        gpu_raw_name="RTX 4090",
        gpu_count=1,
        vram_gib_per_gpu=24,
        price_per_hour=0.39,
        availability=availability,
        availability_count=count,
        provider_url="https://www.cloudrift.ai/pricing",
    )


def test_offer_page_charts_live_availability_and_links_out(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    with session_factory.begin() as session:
        for hours, (state, count) in enumerate(
            [(Availability.IN_STOCK, 5), (Availability.LIMITED, 1), (Availability.OUT, 0)]
        ):
            ingest_records(
                session,
                source="cloudrift",
                records=[_record(state, count)],
                now=T0 + timedelta(hours=hours),
            )
        offer_id = session.scalar(select(Offer.id))
    html = client.get(f"/offers/{offer_id}").text
    assert "Availability history" in html
    assert html.count('class="avail ') == 3 and "s-count" in html
    rent = '<a class="rent" href="https://www.cloudrift.ai/pricing" rel="noopener noreferrer'
    assert rent in html
    assert "Recorded sample data" not in html
    body = client.get(f"/api/offers/{offer_id}").json()
    assert body["provider_url"] == "https://www.cloudrift.ai/pricing"
    assert [p["availability_count"] for p in body["history"]] == [5, 1, 0]


def test_sample_offer_page_says_when_it_was_recorded(
    client: TestClient, sample_loaded: int
) -> None:
    offer = client.get("/api/offers", params={"provider": "runpod", "limit": 1}).json()["offers"][0]
    html = client.get(offer["url"]).text
    assert "these prices were recorded on" in html and "2026-08-25" in html
    assert offer["last_seen"].startswith("2026-08-25")
