"""Load the bundled offline sample (app/sample/) through the real parsers and the ingest path.

Each folder of app/sample is one recorded source for one provider, described by its SOURCE.txt:
- a skypilot-catalog copy (`vms.csv`, plus `gpu_host_vms.csv` for gcp) read by
  `scrapers.skypilot`;
- or a recorded feed response read by that provider's own scraper: SOURCE.txt names it
  (`scraper: runpod`) and lists the response files with the URL they came from
  (`page: gpu_types.json https://api.runpod.io/graphql`).

Every source is ingested with "now" set to the day it was recorded (`recorded:`, else the
`read:` date of a catalog copy), so first seen, last seen and every history point carry that
day, never the load time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.pipeline.catalog_sync import sync_gpu_catalog
from app.pipeline.ingest import ingest_records
from app.records import OfferRecord
from app.store.data_cache import bump_data_version
from app.store.models import Offer, ScrapeRun, utcnow
from scrapers.base import ParseResult, RawPage, ScraperConfig
from scrapers.facts import apply_facts, load_facts
from scrapers.skypilot import parse_catalog_csv, parse_gcp_catalog, provider_for_cloud

SAMPLE_SOURCE = "sample"

_RECORDED = re.compile(r"^recorded:\s*(\d{4}-\d{2}-\d{2})", re.MULTILINE)
_READ = re.compile(r"^read:\s*(\d{4}-\d{2}-\d{2})", re.MULTILINE)
_SCRAPER = re.compile(r"^scraper:\s*(\S+)", re.MULTILINE)
_PAGE = re.compile(r"^page:\s*(\S+)\s+(https?://\S+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class SampleFile:
    """One recorded source: a folder of app/sample."""

    cloud: str  # the folder name (a skypilot cloud name, or the provider id of a feed)
    source_note: str
    csv_text: str = ""  # skypilot-catalog vms.csv; empty for a recorded feed
    hosts_csv_text: str = ""  # gcp only: the host machine rows
    scraper: str | None = None  # the scraper whose parser reads a recorded feed
    pages: tuple[RawPage, ...] = ()

    @property
    def provider(self) -> str:
        return self.scraper or provider_for_cloud(self.cloud)

    @property
    def recorded(self) -> date:
        """The day the data was recorded: the capture or commit date, else the read date."""
        match = _RECORDED.search(self.source_note) or _READ.search(self.source_note)
        if match is None:
            raise ValueError(f"app/sample/{self.cloud}/SOURCE.txt has no recorded: or read: date")
        return date.fromisoformat(match.group(1))

    @property
    def recorded_at(self) -> datetime:
        return datetime.combine(self.recorded, datetime.min.time(), tzinfo=UTC)

    def parse(self) -> ParseResult:
        """The source's records, through the same parser a live scrape uses."""
        if self.scraper is not None:
            from scrapers.registry import SCRAPERS

            cls = SCRAPERS[self.scraper]
            return cls(ScraperConfig(base_url=cls.default_url)).parse(list(self.pages))
        if self.hosts_csv_text:
            return parse_gcp_catalog(self.csv_text, self.hosts_csv_text)
        return parse_catalog_csv(self.cloud, self.csv_text)


def _read(folder: Traversable, name: str) -> str:
    path = folder / name
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def _sample_file(folder: Traversable) -> SampleFile | None:
    note = _read(folder, "SOURCE.txt")
    scraper = _SCRAPER.search(note)
    if scraper is not None:
        pages = tuple(
            RawPage(url=url, body=_read(folder, name)) for name, url in _PAGE.findall(note)
        )
        return SampleFile(
            cloud=folder.name, source_note=note, scraper=scraper.group(1), pages=pages
        )
    csv_text = _read(folder, "vms.csv")
    if not csv_text:
        return None  # common/: reference data, not offers
    return SampleFile(
        cloud=folder.name,
        source_note=note,
        csv_text=csv_text,
        hosts_csv_text=_read(folder, "gpu_host_vms.csv"),
    )


@lru_cache(maxsize=1)
def _sample_files() -> tuple[SampleFile, ...]:
    root = resources.files("app") / "sample"
    folders = sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: p.name)
    return tuple(item for folder in folders if (item := _sample_file(folder)) is not None)


def sample_files() -> list[SampleFile]:
    """Every recorded source of app/sample, by folder name."""
    return list(_sample_files())


def sample_date() -> date | None:
    """The newest recorded date of the sample's sources."""
    dates = [item.recorded for item in _sample_files()]
    return max(dates) if dates else None


def sample_dates() -> tuple[date, date] | None:
    """The oldest and newest recorded dates of the sample's sources."""
    dates = [item.recorded for item in _sample_files()]
    return (min(dates), max(dates)) if dates else None


@dataclass(frozen=True)
class _Parsed:
    item: SampleFile
    records: tuple[OfferRecord, ...]
    warnings: tuple[str, ...]


@lru_cache(maxsize=1)
def _parsed() -> tuple[_Parsed, ...]:
    """Every source parsed with provider facts applied; parsed once per process (records are
    immutable in use: ingest reads them)."""
    out = []
    for item in _sample_files():
        parsed = item.parse()
        facts = {p: load_facts(p) for p in {r.provider for r in parsed.records}}
        records = tuple(apply_facts(r, facts[r.provider]) for r in parsed.records)
        out.append(_Parsed(item, records, tuple(parsed.warnings)))
    return tuple(out)


def sample_records() -> list[OfferRecord]:
    """Every sample offer as the loader ingests it (parsed, facts applied); e.g. for bench."""
    return [record for parsed in _parsed() for record in parsed.records]


@dataclass(frozen=True)
class SampleLoadResult:
    offers: int
    providers: int
    warnings: list[str]


def database_is_empty(session: Session) -> bool:
    return (session.scalar(select(func.count()).select_from(Offer)) or 0) == 0


def load_sample(session: Session) -> SampleLoadResult:
    """Ingest every sample source as source "sample", dated when it was recorded; caller commits."""
    sync_gpu_catalog(session)
    run = ScrapeRun(source=SAMPLE_SOURCE, started_at=utcnow(), status="running")
    session.add(run)
    total, warnings = 0, []
    providers: set[str] = set()
    for parsed in _parsed():
        item = parsed.item
        stats = ingest_records(
            session, source=SAMPLE_SOURCE, records=parsed.records, now=item.recorded_at
        )
        total += stats.seen
        providers.update(r.provider for r in parsed.records)
        warnings += [f"{item.cloud}: {w}" for w in (*parsed.warnings, *stats.warnings)]
    bump_data_version(session)  # the data changed now, whatever day it was recorded
    run.status = "ok"
    run.finished_at = utcnow()
    run.offers_seen = run.offers_added = total
    run.warnings = "\n".join(warnings[:50]) or None
    return SampleLoadResult(offers=total, providers=len(providers), warnings=warnings)
