"""Workload ranking: fitting offers first by rank_key, the SQL prefilter drops no fitting offer."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app import queries
from app.fit import JobTerms, OfferFacts, Workload, assess_offer, estimate_memory, rank_key
from app.queries import OfferFilters, all_rows, assess, offer_facts, ranking, search_offers
from app.store.data_cache import bump_data_version
from tests.web.helpers import QLORA_8B


def ranked(client: TestClient, **params: Any) -> dict[str, Any]:
    """One page when `limit` is given, else every page (the sample has more than 1,000 offers)."""
    response = client.get("/api/offers", params={"limit": 1000, **params})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    while "limit" not in params and len(body["offers"]) < body["total"]:
        more = client.get(
            "/api/offers", params={"limit": 1000, "offset": len(body["offers"]), **params}
        )
        assert more.status_code == 200 and more.json()["offers"], more.text
        body["offers"] += more.json()["offers"]
    return body


def search_all(session: Session, workload: Workload, **filters: Any) -> list[Any]:
    """Every page of search_offers, 1,000 offers at a time."""
    offers: list[Any] = []
    while True:
        page = search_offers(
            session,
            filters=OfferFilters(limit=1000, offset=len(offers), **filters),
            workload=workload,
        )
        offers += page.offers
        if len(offers) >= page.total or not page.offers:
            return offers


def test_fitting_offers_come_first_cheapest_job_first(
    client: TestClient, sample_loaded: int
) -> None:
    body = ranked(client, **QLORA_8B)
    offers = body["offers"]
    assert body["total"] == sample_loaded  # non-fitting offers are kept...
    flags = [o["fits"] for o in offers]
    assert True in flags and False in flags
    first_miss = flags.index(False)
    assert all(flags[:first_miss]) and not any(flags[first_miss:])  # ...after the fitting ones
    assert body["fitting"] == first_miss
    tight = [o["tight"] for o in offers[:first_miss]]
    assert tight == sorted(tight)  # every row with margin before every tight one...
    for group in (False, True):  # ...and within each, cheapest job first
        costs = [o["est_total_cost"] for o in offers[:first_miss] if o["tight"] is group]
        known = [c for c in costs if c is not None]
        assert known == sorted(known)
        assert costs[: len(known)] == known  # offers with an unknown cost rank after priced ones
    for offer in offers[:first_miss]:
        assert offer["per_gpu_gib_needed"] <= offer["vram_gib_per_gpu"]
        assert offer["headroom_pct"] >= 0 and offer["explanation"]
        # Time (and so cost) is unknown only where the GPU's throughput is unknown.
        assert offer["est_hours"] is None or offer["est_hours"] > 0
    for offer in offers[first_miss:]:
        assert offer["reason"] and offer["explanation"].startswith("does not fit")
        assert offer["est_total_cost"] is None
    assert body["workload"]["model"] == "llama-3.1-8b"


def test_fits_only_hides_non_fitting(client: TestClient, sample_loaded: int) -> None:
    full = ranked(client, model="llama-3.1-70b", method="full", sharding="zero3")
    only = ranked(client, model="llama-3.1-70b", method="full", sharding="zero3", fits_only="true")
    assert only["total"] == full["fitting"] == len(only["offers"])
    assert all(o["fits"] for o in only["offers"])
    assert full["total"] > only["total"]


def test_prefilter_keeps_every_fitting_offer(session: Session, sample_loaded: int) -> None:
    # Brute force: assess every offer; the ranked page must find exactly the same fitting set.
    for workload in (
        Workload(model="llama-3.1-8b", method="qlora"),
        Workload(model="llama-3.1-8b", method="full"),
        Workload(model="llama-3.1-70b", method="lora", sharding="zero3"),
        Workload(params_b=30, method="full", sharding="zero2"),
    ):
        estimate = estimate_memory(workload)
        expected = {
            row.id
            for row in all_rows(session, filters=OfferFilters())
            if assess_offer(workload, estimate, offer_facts(row)).fits
        }
        found = search_all(session, workload, fits_only=True)
        assert {item.row.id for item in found} == expected, workload


def test_non_fitting_tail_paginates(client: TestClient, sample_loaded: int) -> None:
    # Pages across the fitting/non-fitting boundary and into the SQL-paginated rest.
    params = {"model": "llama-3.1-70b", "method": "full"}
    whole = [o["id"] for o in ranked(client, **params)["offers"]]
    paged: list[int] = []
    for offset in range(0, sample_loaded, 64):
        paged += [o["id"] for o in ranked(client, **params, limit=64, offset=offset)["offers"]]
    assert paged == whole and len(set(paged)) == sample_loaded


def test_other_sorts_keep_fitting_first(client: TestClient, sample_loaded: int) -> None:
    offers = ranked(client, **QLORA_8B, sort="price")["offers"]
    fitting = [o for o in offers if o["fits"]]
    assert offers[: len(fitting)] == fitting

    def price(o: dict[str, Any]) -> float:
        value = o["price_per_hour"] if o["price_per_hour"] is not None else o["spot_price_per_hour"]
        return float(value)

    for group in (False, True):  # margin first, then tight, each in price order
        prices = [price(o) for o in fitting if o["tight"] is group]
        assert prices == sorted(prices)
    assert [o["tight"] for o in fitting] == sorted(o["tight"] for o in fitting)
    by_cost = [
        (o["tight"], o["est_total_cost"])
        for o in ranked(client, **QLORA_8B, sort="cost")["offers"]
        if o["fits"] and o["est_total_cost"] is not None
    ]
    assert by_cost == sorted(by_cost)


def test_page_shows_fit_rows(client: TestClient, sample_loaded: int) -> None:
    html = client.get("/", params=QLORA_8B).text
    assert "Offers ranked for Llama 3.1 8B" in html
    assert "✓ fits" in html and "<meter" in html
    assert "sorted by total job cost" in html


def test_ranked_order_equals_full_assessment_order(session: Session, sample_loaded: int) -> None:
    # Ranking reuses one price-free assessment per machine shape; it must order offers exactly
    # as rank_key over a full assess_offer of each offer would, in both markets.
    workload = Workload(model="llama-3.1-8b", method="qlora")
    estimate = estimate_memory(workload)
    for market in ("any", "spot", "on_demand"):
        filters = OfferFilters(fits_only=True, market=market)
        terms = JobTerms(market=market)
        expected = sorted(
            (rank_key(fit), row.id)
            for row in all_rows(session, filters=filters)
            if (fit := assess_offer(workload, estimate, offer_facts(row), terms)).fits
        )
        found = search_all(session, workload, fits_only=True, market=market)
        assert [item.row.id for item in found] == [i for _, i in expected], market
        for item, (key, _) in zip(found, expected, strict=True):
            assert item.fit is not None and rank_key(item.fit) == key


WORKLOADS = (
    Workload(model="llama-3.1-8b", method="qlora"),
    Workload(model="llama-3.1-70b", method="full", sharding="zero3"),
    Workload(model="llama-3.1-70b", method="lora", sharding="zero3"),
)


def page_ids(session: Session, workload: Workload, **filters: Any) -> tuple[int, int, list[int]]:
    page = search_offers(session, filters=OfferFilters(**filters), workload=workload)
    return page.total, page.fitting or 0, [item.row.id for item in page.offers]


def test_sql_ranking_equals_in_memory_ranking(
    session: Session, sample_loaded: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The database sorts shapes joined as VALUES; the in-memory path sorts every candidate in
    # Python. Both must give the same pages, for every sort, market and page boundary.
    # Every sort and market is compared over a long first page and over one short page; the short
    # pages rotate so each page boundary shape meets several sorts and markets.
    pages = ((37, 111, False), (25, 50, True), (5, 0, False), (10, 3, True))
    combos = [
        (sort, market)
        for sort in ("cost", "time", "cost_per_m", "price", "price_per_gpu", "vram", "newest")
        for market in ("any", "spot", "on_demand")
    ]
    cases: list[dict[str, Any]] = []
    for i, (sort, market) in enumerate(combos):
        for limit, offset, only in ((500, 0, False), pages[i % len(pages)]):
            cases.append(
                {
                    "sort": sort,
                    "market": market,
                    "limit": limit,
                    "offset": offset,
                    "fits_only": only,
                }
            )
    # Deadline, budget and the job's terms change which plans fit and what they cost.
    extras: tuple[dict[str, Any], ...] = (
        {"max_hours": 6.0},
        {"max_cost": 30.0, "fits_only": True},
        {"max_hours": 20.0, "max_cost": 200.0},
        {"min_headroom_pct": 30.0, "setup_minutes": 45.0, "checkpoint_minutes": 10.0},
    )
    cases += [
        {"sort": sort, "limit": limit, "offset": offset, **extra}
        for i, sort in enumerate(("cost", "time", "price"))
        for j, extra in enumerate(extras)
        for limit, offset in (((1000, 0), (7, 12))[(i + j) % 2],)
    ]
    for workload in WORKLOADS:
        sql = [page_ids(session, workload, **case) for case in cases]
        with monkeypatch.context() as patch:
            patch.setattr(ranking, "MAX_SQL_SHAPES", 0)
            patch.setattr(ranking, "MAX_PG_SHAPES", 0)
            in_memory = [page_ids(session, workload, **case) for case in cases]
        for case, got, want in zip(cases, sql, in_memory, strict=True):
            assert got == want, (workload, case)
        assert any(ids for _, _, ids in sql)


def test_ranked_pages_tile_the_whole_list(session: Session, sample_loaded: int) -> None:
    # Pages that straddle fitting / near-miss / rest boundaries neither skip nor repeat offers.
    for workload in WORKLOADS:
        total, fitting, _ = page_ids(session, workload, limit=1000)
        whole = [item.row.id for item in search_all(session, workload)]
        assert total == sample_loaded == len(whole) == len(set(whole))
        paged: list[int] = []
        for offset in range(0, total, 131):
            paged += page_ids(session, workload, limit=131, offset=offset)[2]
        assert paged == whole, workload
        assert 0 < fitting < total


def test_fit_assessments_outlive_an_ingest(
    session_factory: sessionmaker[Session], sample_loaded: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A scrape invalidates the cached aggregates, but a shape's fit depends only on the
    # workload and the shape: the next request after an ingest re-assesses nothing it knows.
    queries.forget_fit_assessments()
    calls: list[OfferFacts] = []
    real = assess.assess_offer

    def counting(workload: Workload, estimate: Any, facts: OfferFacts, *args: Any) -> Any:
        calls.append(facts)
        return real(workload, estimate, facts, *args)

    monkeypatch.setattr(assess, "assess_offer", counting)
    workload = Workload(model="llama-3.1-8b", method="qlora")
    with session_factory() as session:
        before = page_ids(session, workload)
    assert calls
    calls.clear()
    with session_factory.begin() as session:
        bump_data_version(session)
    with session_factory() as session:
        assert page_ids(session, workload) == before
    assert calls == []
    with session_factory() as session:
        page_ids(session, Workload(model="llama-3.1-8b", method="lora"))
    assert calls  # another workload is assessed afresh
