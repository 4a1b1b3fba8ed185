"""Group repeats: one listing sold in many regions is one row with its regions."""

from __future__ import annotations

import re
from collections import Counter

from fastapi.testclient import TestClient

AWS = {"provider": "aws", "limit": 1000}


def test_plain_api_stays_one_row_per_offer(client: TestClient, sample_loaded: int) -> None:
    body = client.get("/api/offers", params=AWS).json()
    assert "group" not in body and all("regions" not in o for o in body["offers"])
    per_listing = Counter((o["instance_type"], o["spot"]) for o in body["offers"])
    assert per_listing[("g4dn.xlarge", False)] > 5  # sold in many regions


def test_group_listing_returns_one_entry_with_its_regions(
    client: TestClient, sample_loaded: int
) -> None:
    plain = client.get("/api/offers", params=AWS).json()
    grouped = client.get("/api/offers", params={**AWS, "group": "listing"}).json()
    assert grouped["group"] == "listing"
    assert grouped["total"] == plain["total"]  # paging stays per offer
    entries = [
        o for o in grouped["offers"] if (o["instance_type"], o["spot"]) == ("g4dn.xlarge", False)
    ]
    assert len(entries) == 1
    entry = entries[0]
    regions = [r["region"] for r in entry["regions"]]
    expected = sorted(
        (o["price_per_hour"], o["region"])
        for o in plain["offers"]
        if (o["instance_type"], o["spot"]) == ("g4dn.xlarge", False)
    )
    assert regions == [region for _, region in expected]  # cheapest first
    assert entry["region_count"] == len(regions) > 5
    prices = [r["price_per_hour"] for r in entry["regions"]]
    assert prices == sorted(prices)
    assert all(r["url"] == f"/offers/{r['id']}" for r in entry["regions"])
    # Every offer of the page is an entry or one of an entry's regions; none is lost.
    covered = {r["id"] for o in grouped["offers"] for r in o["regions"]}
    assert {o["id"] for o in plain["offers"]} <= covered
    assert len(grouped["offers"]) < len(plain["offers"])


def test_no_grouping_when_filtering_by_region(client: TestClient, sample_loaded: int) -> None:
    params = {**AWS, "group": "listing", "continent": "Europe"}
    body = client.get("/api/offers", params=params).json()
    assert body["group"] is None and all("regions" not in o for o in body["offers"])
    html = client.get("/", params={"provider": "aws", "region": "us-east-1"}).text
    assert "listing-regions" not in html and "Show every region" not in html


def test_page_groups_by_default_and_can_show_every_region(
    client: TestClient, sample_loaded: int
) -> None:
    html = client.get("/", params={"provider": "aws", "gpu": "t4"}).text
    assert '<details class="listing-regions">' in html
    assert re.search(r"<summary>\d+ regions", html)
    assert 'href="/?provider=aws&amp;gpu=t4&amp;group=offer"' in html
    assert 'href="/api/offers?provider=aws&amp;gpu=t4&amp;group=listing"' in html
    flat = client.get("/", params={"provider": "aws", "gpu": "t4", "group": "offer"}).text
    assert "listing-regions" not in flat and "Group a listing" in flat
    assert flat.count('<tr class="offer') > html.count('<tr class="offer')
    # The JSON twin of the flat page is plain.
    assert (
        client.get("/api/offers", params={"provider": "aws", "group": "offer"}).status_code == 200
    )


def test_rows_link_to_the_provider(client: TestClient, sample_loaded: int) -> None:
    html = client.get("/", params={"provider": "aws", "gpu": "t4"}).text
    links = re.findall(r'<a class="rent" href="([^"]+)" rel="([^"]+)"', html)
    assert links
    for href, rel in links:
        assert href.startswith("https://aws.amazon.com/") and rel == "noopener noreferrer nofollow"
