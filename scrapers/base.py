"""The one interface every provider scraper implements.

A scraper fetches raw pages (I/O, async httpx) and parses them (a pure function) into
`OfferRecord`s. Parsing never raises for one bad item: it collects a warning and skips it, but
a response that is not the expected shape at all raises `FeedFormatError`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

import httpx

from app.records import OfferRecord


class FeedFormatError(ValueError):
    """The response is not in the provider's documented shape (truncated, wrong types, ...)."""


class MissingApiKey(RuntimeError):
    """The provider needs a key and none is configured; the run is recorded as skipped."""


@dataclass(frozen=True)
class RawPage:
    """One fetched response body, kept as text so parsing stays pure and testable."""

    url: str
    body: str


@dataclass
class ParseResult:
    records: list[OfferRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Why the result is incomplete though usable (a secondary feed failed): the run is
    # recorded as partial with these reasons, and the records are still ingested.
    degraded: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ScraperConfig:
    """What a scraper needs from settings: where to fetch from and with which credentials."""

    base_url: str
    api_key: str = ""
    api_secret: str = ""
    extra_urls: dict[str, str] = field(default_factory=dict)


class Scraper(ABC):
    """Fetch pages for one provider and parse them into normalized offers."""

    name: ClassVar[str]  # registry id, e.g. "vastai"
    display_name: ClassVar[str]
    kind: ClassVar[str]  # "marketplace" (30 min default interval) or "list" (6 h)
    needs_key: ClassVar[bool] = False
    default_url: ClassVar[str]  # overridable per provider via settings
    extra_default_urls: ClassVar[dict[str, str]] = {}  # secondary feeds, e.g. AWS spot prices

    @classmethod
    def provider_id(cls) -> str:
        """The provider id its offers carry (the registry id unless a subclass says otherwise)."""
        return cls.name

    def __init__(self, config: ScraperConfig) -> None:
        self.config = config
        # Secondary feeds that failed during fetch (see ParseResult.degraded).
        self.degraded: list[str] = []

    def degrade(self, reason: str) -> None:
        """Record that an optional feed failed; the primary offers still count."""
        self.degraded.append(reason)

    @abstractmethod
    async def fetch(self, client: httpx.AsyncClient) -> list[RawPage]:
        """Fetch every page of the feed (follow pagination); raise on HTTP errors."""

    @abstractmethod
    def parse(self, pages: list[RawPage]) -> ParseResult:
        """Turn raw pages into records; pure, no I/O."""
