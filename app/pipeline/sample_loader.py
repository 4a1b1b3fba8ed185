"""Load the bundled offline sample (recorded skypilot-catalog CSVs) through the ingest path."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from importlib import resources

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.pipeline.catalog_sync import sync_gpu_catalog
from app.pipeline.ingest import ingest_records
from app.store.models import Offer, ScrapeRun, utcnow
from scrapers.facts import apply_facts, load_facts
from scrapers.skypilot import parse_catalog_csv

SAMPLE_SOURCE = "sample"


@dataclass(frozen=True)
class SampleFile:
    cloud: str
    csv_text: str
    source_note: str


def sample_files() -> list[SampleFile]:
    """Every cloud folder of app/sample with its vms.csv and SOURCE.txt."""
    root = resources.files("app") / "sample"
    files = []
    for folder in sorted(root.iterdir(), key=lambda p: p.name):
        csv_path = folder / "vms.csv"
        if folder.is_dir() and csv_path.is_file():
            files.append(
                SampleFile(
                    cloud=folder.name,
                    csv_text=csv_path.read_text(encoding="utf-8"),
                    source_note=(folder / "SOURCE.txt").read_text(encoding="utf-8"),
                )
            )
    return files


def sample_date() -> date | None:
    """The date the sample was recorded (the newest `read:` date of its SOURCE notes)."""
    dates = []
    for item in sample_files():
        match = re.search(r"^read:\s*(\d{4}-\d{2}-\d{2})", item.source_note, re.MULTILINE)
        if match:
            dates.append(date.fromisoformat(match.group(1)))
    return max(dates) if dates else None


@dataclass(frozen=True)
class SampleLoadResult:
    offers: int
    providers: int
    warnings: list[str]


def database_is_empty(session: Session) -> bool:
    return (session.scalar(select(func.count()).select_from(Offer)) or 0) == 0


def load_sample(session: Session) -> SampleLoadResult:
    """Ingest every sample cloud as source "sample"; caller commits."""
    sync_gpu_catalog(session)
    now = utcnow()
    run = ScrapeRun(source=SAMPLE_SOURCE, started_at=now, status="running")
    session.add(run)
    total, providers, warnings = 0, 0, []
    for item in sample_files():
        parsed = parse_catalog_csv(item.cloud, item.csv_text)
        facts = {p: load_facts(p) for p in {r.provider for r in parsed.records}}
        records = [apply_facts(r, facts[r.provider]) for r in parsed.records]
        stats = ingest_records(session, source=SAMPLE_SOURCE, records=records, now=now)
        total += stats.seen
        providers += 1
        warnings += [f"{item.cloud}: {w}" for w in (*parsed.warnings, *stats.warnings)]
    run.status = "ok"
    run.finished_at = utcnow()
    run.offers_seen = run.offers_added = total
    run.warnings = "\n".join(warnings[:50]) or None
    return SampleLoadResult(offers=total, providers=providers, warnings=warnings)
