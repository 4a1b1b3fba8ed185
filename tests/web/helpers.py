"""Shared helpers for the web tests: adding offers through the real ingest path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, sessionmaker

from app.pipeline.ingest import ingest_records
from app.records import OfferRecord
from app.store.models import utcnow

TEST_PROVIDER = "testcloud"


def record(**overrides: Any) -> OfferRecord:
    """A valid on-demand 8x H100 SXM record of the test provider, with overrides."""
    values: dict[str, Any] = {
        "provider": TEST_PROVIDER,
        "instance_type": "test.8xh100",
        "region": "us-east-1",
        "gpu_model": "h100-sxm",
        "gpu_raw_name": "H100 SXM5 80GB",
        "gpu_count": 8,
        "vram_gib_per_gpu": 79.6,
        "price_per_hour": 20.0,
        "interconnect": "nvswitch",
        "billing": "second",
        "availability": "in_stock",
    }
    values.update(overrides)
    return OfferRecord(**values)


def ingest(
    factory: sessionmaker[Session],
    records: list[OfferRecord],
    *,
    now: datetime | None = None,
    source: str = TEST_PROVIDER,
) -> None:
    """Ingest `records` as one scrape of their provider(s) and commit."""
    with factory.begin() as session:
        ingest_records(session, source=source, records=records, now=now or utcnow())


def csrf_of(html: str) -> str:
    """The CSRF token embedded in a page's forms."""
    marker = 'name="csrf" value="'
    start = html.index(marker) + len(marker)
    return html[start : html.index('"', start)]


QLORA_8B = {"model": "llama-3.1-8b", "method": "qlora"}


@contextmanager
def statements(engine: Engine, keep: Callable[[str], bool] = lambda _: True) -> Iterator[list[str]]:
    """The statements `engine` sends inside the block (those `keep` accepts), as they go."""
    sent: list[str] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if keep(statement):
            sent.append(statement)

    event.listen(engine, "before_cursor_execute", before)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", before)
