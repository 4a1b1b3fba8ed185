"""Scraper-test fixtures: instant retries (waits are recorded, not slept) and fixture loading."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import scrapers.http as http

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def fixture_text(provider: str, name: str) -> str:
    """The text of tests/fixtures/<provider>/<name>."""
    return (FIXTURES / provider / name).read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Every backoff wait requested during the test, without actually sleeping."""
    waits: list[float] = []

    async def no_sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(http, "sleep", no_sleep)
    yield waits
