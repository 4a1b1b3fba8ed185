"""Every scraper by registry id; the scheduler, CLI and freshness page read this table."""

from __future__ import annotations

from scrapers.aws import AwsScraper
from scrapers.azure import AzureScraper
from scrapers.base import Scraper
from scrapers.gcp import GcpScraper
from scrapers.lambdalabs import LambdalabsScraper
from scrapers.oci import OciScraper
from scrapers.runpod import RunpodScraper
from scrapers.skypilot import skypilot_scrapers
from scrapers.tensordock import TensordockScraper
from scrapers.vastai import VastaiScraper
from scrapers.verda import VerdaScraper

_DIRECT: tuple[type[Scraper], ...] = (
    AwsScraper,
    AzureScraper,
    GcpScraper,
    LambdalabsScraper,
    OciScraper,
    RunpodScraper,
    TensordockScraper,
    VastaiScraper,
    VerdaScraper,
)

# skypilot-<cloud> fallbacks (scrapers/skypilot.py) cover clouds without a direct scraper.
SCRAPERS: dict[str, type[Scraper]] = {
    **{cls.name: cls for cls in _DIRECT},
    **skypilot_scrapers(),
}


def get_scraper_class(name: str) -> type[Scraper]:
    """The scraper class for a registry id; KeyError listing the known ids otherwise."""
    try:
        return SCRAPERS[name.strip().lower()]
    except KeyError:
        known = ", ".join(sorted(SCRAPERS))
        raise KeyError(f"unknown provider {name!r}; known providers: {known}") from None
