"""The offer record rejects what no sane feed can produce."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from app.records import OfferRecord

BASE: dict[str, object] = {
    "provider": "vastai",
    "instance_type": "vast-1-1x-rtx-4090",
    "region": "Texas, US",
    "gpu_model": "rtx-4090",
    "gpu_raw_name": "RTX 4090",
    "gpu_count": 1,
    "price_per_hour": 0.35,
}


def make(**changes: object) -> OfferRecord:
    return OfferRecord.model_validate({**BASE, **changes})


@pytest.mark.parametrize(
    "changes",
    [
        {"price_per_hour": -1.0},
        {"price_per_hour": 0.0},
        {"price_per_hour": math.nan},
        {"price_per_hour": math.inf},
        {"price_per_hour": 1e9},
        {"price_per_hour": None},
        {"spot": True, "spot_price_per_hour": None},
        {"gpu_count": 0},
        {"instance_type": "x" * 10_000},
        {"region": "   "},
        {"currency": "dollars"},
        {"vram_gib_per_gpu": -3},
        {"unexpected_field": 1},
        {"price_per_hour": True},
        {"spot": True, "spot_price_per_hour": True, "price_per_hour": None},
        {"gpu_raw_name": "H100\x00"},
        {"instance_type": "a\x1bb"},
        {"region": "us-east-\ud800"},
        {"gpu_model": "h100\uffff"},
    ],
)
def test_rejects_bad_values(changes: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        make(**changes)


def test_per_gpu_price_and_key() -> None:
    record = make(gpu_count=4, price_per_hour=2.0, currency="usd")
    assert record.price_per_gpu_hour == 0.5
    assert record.currency == "USD"
    assert record.key == ("vastai", "vast-1-1x-rtx-4090", "Texas, US", False)


def test_spot_only_listing() -> None:
    record = make(spot=True, price_per_hour=None, spot_price_per_hour=0.2)
    assert record.price_per_gpu_hour is None
