"""Registry meta-tests and invariants shared by every provider's parsed fixtures."""

from __future__ import annotations

import importlib
import math
from pathlib import Path

import pytest

from app.gpus.catalog import UNKNOWN, load_catalog
from app.gpus.normalize import normalize_gpu_name
from app.records import OfferRecord
from scrapers.base import Scraper, ScraperConfig
from scrapers.facts import apply_facts, load_facts
from scrapers.registry import SCRAPERS, get_scraper_class

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS.parent / "fixtures"
# skypilot-<cloud> fallbacks share one parser, tested over the recorded catalog by the sample
# and scrape-runner tests; they need no per-cloud fixtures folder here.
DIRECT = sorted(name for name in SCRAPERS if not name.startswith("skypilot-"))
EXPECTED = {
    "akash", "aws", "azure", "clore", "cloudrift", "gcp", "lambdalabs", "oci", "runpod",
    "tensordock", "vastai", "verda", "vultr",
}  # fmt: skip
# Feeds that need no key (issue 14: at least four beyond the original set).
KEYLESS_NEW = {"akash", "clore", "cloudrift", "vultr"}


def parsed(name: str) -> tuple[type[Scraper], list[OfferRecord]]:
    cls = SCRAPERS[name]
    module = importlib.import_module(f"tests.scrapers.test_{name}")
    scraper = cls(ScraperConfig(base_url=cls.default_url))
    return cls, scraper.parse(module.fixture_pages()).records


def test_every_expected_provider_is_registered() -> None:
    assert set(DIRECT) == EXPECTED
    assert any(name.startswith("skypilot-") for name in SCRAPERS)


def test_unknown_name_lists_known_ids() -> None:
    assert get_scraper_class(" AWS ") is SCRAPERS["aws"]
    with pytest.raises(KeyError, match="known providers: akash, aws"):
        get_scraper_class("nosuch")


@pytest.mark.parametrize("name", sorted(SCRAPERS))
def test_every_provider_has_a_display_name_a_page_and_a_billing_fact(name: str) -> None:
    facts = load_facts(SCRAPERS[name].provider_id())
    assert facts.data.display_name, name
    assert facts.data.urls is not None and facts.url_for("x").startswith("https://"), name
    assert facts.data.billing is not None, f"{name}: billing fact or explicit unknown missing"


@pytest.mark.parametrize("name", sorted(SCRAPERS))
def test_class_attributes(name: str) -> None:
    cls = SCRAPERS[name]
    assert cls.name == name
    assert cls.kind in ("marketplace", "list")
    assert cls.display_name and cls.default_url.startswith("https://")


@pytest.mark.parametrize("name", DIRECT)
def test_has_fixtures_and_test_module(name: str) -> None:
    folder = FIXTURES / name
    assert folder.is_dir() and any(p.name.startswith("malformed") for p in folder.iterdir())
    assert (TESTS / f"test_{name}.py").is_file()
    module = importlib.import_module(f"tests.scrapers.test_{name}")
    assert callable(getattr(module, "fixture_pages", None))


@pytest.mark.parametrize("name", DIRECT)
def test_parsed_fixture_invariants(name: str) -> None:
    cls, records = parsed(name)
    assert records, "fixtures must produce records"
    slugs = set(load_catalog()) | {UNKNOWN}
    keys = [r.key for r in records]
    assert len(keys) == len(set(keys)), "keys must be unique"
    facts = load_facts(name)
    assert cls.provider_id() == cls.name  # the providers page maps feeds to table rows by it
    for r in records:
        assert r.provider == cls.name
        assert r.gpu_model in slugs
        memory = r.vram_gib_per_gpu if r.gpu_count >= 1 else None
        assert normalize_gpu_name(r.gpu_raw_name, memory_gib=memory) in slugs
        price = r.spot_price_per_hour if r.spot else r.price_per_hour
        assert price is not None and price > 0
        if r.price_per_hour is not None:
            per_gpu = r.price_per_gpu_hour
            assert per_gpu is not None
            assert math.isclose(per_gpu * r.gpu_count, r.price_per_hour, rel_tol=1e-9)
            if r.spot_price_per_hour is not None:
                assert r.spot_price_per_hour <= r.price_per_hour
        if r.vram_gib_per_gpu is not None:
            assert r.vram_gib_per_gpu <= 300
        enriched = apply_facts(r, facts)
        assert enriched.key == r.key and enriched.price_per_hour == r.price_per_hour


@pytest.mark.parametrize("name", DIRECT)
def test_has_real_recorded_fixtures_with_sources(name: str) -> None:
    """Every direct scraper is tested on responses someone else recorded, each file sourced."""
    real = FIXTURES / name / "real"
    files = sorted(p.name for p in real.iterdir() if p.name != "SOURCE.md")
    assert files, f"{name}: no real recorded fixtures"
    source = (real / "SOURCE.md").read_text(encoding="utf-8")
    for file in files:
        assert f"## {file}" in source or file in source, f"{name}/real/{file} has no SOURCE note"
    assert any(w in source for w in ("repository:", "search-index id", "https://")), name
    module = importlib.import_module(f"tests.scrapers.test_{name}")
    assert any(n.startswith("test_real_") for n in dir(module)), f"{name}: no test_real_* test"


@pytest.mark.parametrize("name", sorted(KEYLESS_NEW))
def test_new_public_feeds_need_no_key(name: str) -> None:
    assert not SCRAPERS[name].needs_key
