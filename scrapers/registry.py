"""Every scraper by registry id; the scheduler, CLI and freshness page read this table."""

from __future__ import annotations

from scrapers.akash import AkashScraper
from scrapers.aws import AwsScraper
from scrapers.azure import AzureScraper
from scrapers.base import Scraper
from scrapers.clore import CloreScraper
from scrapers.cloudrift import CloudriftScraper
from scrapers.gcp import GcpScraper
from scrapers.lambdalabs import LambdalabsScraper
from scrapers.oci import OciScraper
from scrapers.runpod import RunpodScraper
from scrapers.skypilot import skypilot_scrapers
from scrapers.tensordock import TensordockScraper
from scrapers.vastai import VastaiScraper
from scrapers.verda import VerdaScraper
from scrapers.vultr import VultrScraper

_DIRECT: tuple[type[Scraper], ...] = (
    AkashScraper,
    AwsScraper,
    AzureScraper,
    CloreScraper,
    CloudriftScraper,
    GcpScraper,
    LambdalabsScraper,
    OciScraper,
    RunpodScraper,
    TensordockScraper,
    VastaiScraper,
    VerdaScraper,
    VultrScraper,
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
