"""GET /api/offers and /offers.csv: shape, filters, facets, sorting, pagination, limits, twins."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.core.settings import Settings
from app.main import create_app
from app.queries import OfferFilters, count_offers, facets
from app.store.models import GpuModel, Offer
from tests.web.helpers import QLORA_8B

REQUIRED_FIELDS = {
    "id",
    "provider",
    "instance_type",
    "region",
    "gpu_model",
    "gpu_name",
    "gpu_raw_name",
    "gpu_count",
    "vram_gib_per_gpu",
    "vram_gib_total",
    "price_per_hour",
    "price_per_gpu_hour",
    "spot_price_per_hour",
    "interconnect",
    "network",
    "billing",
    "availability",
    "last_seen",
    "active",
}


def get_all(client: TestClient, **params: Any) -> list[dict[str, Any]]:
    """Every offer for `params`, fetched page by page."""
    out: list[dict[str, Any]] = []
    offset = 0
    while True:
        body = client.get("/api/offers", params={**params, "limit": 1000, "offset": offset}).json()
        out += body["offers"]
        offset += 1000
        if offset >= body["total"]:
            return out


def active_count(session: Session, *where: Any) -> int:
    stmt = select(func.count()).select_from(Offer).where(Offer.active.is_(True), *where)
    return int(session.scalar(stmt) or 0)


def test_default_page_shape(client: TestClient, sample_loaded: int, session: Session) -> None:
    body = client.get("/api/offers").json()
    assert body["total"] == active_count(session) == sample_loaded
    assert body["limit"] == 50 and len(body["offers"]) == 50
    for offer in body["offers"]:
        assert REQUIRED_FIELDS <= offer.keys()
        assert offer["active"] is True
        assert offer["gpu_model"]  # a slug or "unknown", never null
    # gpu_model falls back to "unknown" for unmapped GPUs, with the raw name kept.
    unknown = get_all(client, gpu="unknown")
    assert unknown and all(o["gpu_model"] == "unknown" and o["gpu_raw_name"] for o in unknown)


@pytest.mark.parametrize("value", ["0", "1001", "-5", "abc", "1e9"])
def test_limit_out_of_range_is_422_naming_limit(client: TestClient, value: str) -> None:
    response = client.get("/api/offers", params={"limit": value})
    assert response.status_code == 422
    assert [d["field"] for d in response.json()["detail"]] == ["limit"]


def test_limit_bounds_accepted(client: TestClient, sample_loaded: int) -> None:
    assert len(client.get("/api/offers?limit=1").json()["offers"]) == 1
    assert len(client.get("/api/offers?limit=1000").json()["offers"]) == min(1000, sample_loaded)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"min_vram": "nan"}, "min_vram"),
        ({"interconnect": "warp"}, "interconnect"),
        ({"sort": "random"}, "sort"),
        ({"offset": "-1"}, "offset"),
        ({"method": "dreaming", "model": "llama-3.1-8b"}, "method"),
        ({"model": "no-such-model"}, "model"),
        ({"params_b": "-3"}, "params_b"),
        ({"model": "llama-3.1-8b", "seq_len": "0"}, "seq_len"),
    ],
)
def test_bad_values_name_the_field(client: TestClient, params: dict[str, str], field: str) -> None:
    for path in ("/api/offers", "/offers.csv"):
        response = client.get(path, params=params)
        assert response.status_code == 422, (path, params)
        # List parameters are named with the bad item's index, e.g. "interconnect.0".
        assert field in [d["field"].split(".")[0] for d in response.json()["detail"]]


def test_filters_narrow_results(client: TestClient, sample_loaded: int, session: Session) -> None:
    lam = get_all(client, provider="lambdalabs")
    assert len(lam) == active_count(session, Offer.provider_id == "lambdalabs") > 0
    assert {o["provider"] for o in lam} == {"lambdalabs"}

    two = get_all(client, gpu=["h100-sxm", "a100-80gb-sxm"])
    assert {o["gpu_model"] for o in two} == {"h100-sxm", "a100-80gb-sxm"}
    assert len(two) == active_count(
        session, Offer.gpu_model_slug.in_(["h100-sxm", "a100-80gb-sxm"])
    )

    both = get_all(client, provider="lambdalabs", gpu="h100-sxm")
    assert 0 < len(both) < len(lam)

    big = get_all(client, min_vram=80)
    assert big and all(o["vram_gib_per_gpu"] >= 80 for o in big)
    assert len(big) == active_count(session, Offer.vram_gib_per_gpu >= 80)

    total = get_all(client, min_vram_total=300)
    assert total and all(o["vram_gib_total"] >= 300 for o in total)

    linked = get_all(client, nvlink="true")
    assert linked and {o["interconnect"] for o in linked} <= {"nvlink", "nvswitch"}

    cheap = get_all(client, max_price_per_gpu_hour=1.0)
    assert cheap and all(
        (o["price_per_hour"] or o["spot_price_per_hour"]) / o["gpu_count"] <= 1.0 + 1e-9
        for o in cheap
    )
    capped = get_all(client, max_price_per_hour=2.5, market="on_demand")
    assert capped and all(o["price_per_hour"] <= 2.5 for o in capped)

    spot = get_all(client, market="spot")
    assert spot and all(o["spot_price_per_hour"] is not None for o in spot)
    assert len(spot) == active_count(session, Offer.spot_price_per_hour.is_not(None))

    europe = get_all(client, continent="Europe")
    assert europe and {o["continent"] for o in europe} == {"Europe"}

    billed = get_all(client, billing=["second", "minute"])
    assert billed and {o["billing"] for o in billed} <= {"second", "minute"}

    nvidia = get_all(client, vendor="nvidia")
    nvidia_slugs = select(GpuModel.slug).where(GpuModel.vendor == "nvidia")
    assert len(nvidia) == active_count(session, Offer.gpu_model_slug.in_(nvidia_slugs))

    eights = get_all(client, gpu_count=8)
    assert eights and {o["gpu_count"] for o in eights} == {8}


def test_search_text_escapes_like_wildcards(client: TestClient, sample_loaded: int) -> None:
    assert client.get("/api/offers", params={"q": "%"}).json()["total"] == 0
    found = get_all(client, q="h100")
    assert found and all("h100" in (o["instance_type"] + o["gpu_raw_name"]).lower() for o in found)


def test_inactive_offers_hidden_unless_asked(
    client: TestClient, sample_loaded: int, session_factory: sessionmaker[Session]
) -> None:
    with session_factory.begin() as session:
        session.execute(update(Offer).where(Offer.provider_id == "lambdalabs").values(active=False))
    current = get_all(client)
    assert "lambdalabs" not in {o["provider"] for o in current}
    everything = client.get("/api/offers", params={"include_inactive": "true"}).json()
    assert everything["total"] == sample_loaded
    assert everything["total"] > len(current)


def test_facet_counts_match_filtered_counts(session: Session, sample_loaded: int) -> None:
    base = OfferFilters(provider=["lambdalabs", "vastai"], min_vram=40)
    by_key = {f.key: f for f in facets(session, filters=base)}
    # A facet leaves out its own filter, so each value's count is what choosing it alone gives.
    for value in by_key["provider"].values:
        alone = base.model_copy(update={"provider": [value.value]})
        assert value.count == count_offers(session, filters=alone), value
    assert {v.value for v in by_key["provider"].values if v.selected} == {"lambdalabs", "vastai"}
    # Other facets count within the whole current filter, and partition it.
    total = count_offers(session, filters=base)
    for key in ("gpu", "interconnect", "billing", "gpu_count"):
        values = by_key[key].values
        assert sum(v.count for v in values) == total, key
        for value in values[:3]:
            raw: Any = [float(value.value)] if key == "gpu_count" else [value.value]
            narrowed = base.model_copy(update={key: raw})
            assert value.count == count_offers(session, filters=narrowed), (key, value)


def test_sorting(client: TestClient, sample_loaded: int) -> None:
    def price(o: dict[str, Any]) -> float:
        value = o["price_per_hour"] if o["price_per_hour"] is not None else o["spot_price_per_hour"]
        return float(value)

    by_gpu_hour = get_all(client)  # the default sort
    keys = [price(o) / o["gpu_count"] for o in by_gpu_hour]
    assert keys == sorted(keys)

    by_price = [price(o) for o in get_all(client, sort="price")]
    assert by_price == sorted(by_price)

    by_vram = [o["vram_gib_total"] for o in get_all(client, sort="vram")]
    known = [v for v in by_vram if v is not None]
    assert known == sorted(known, reverse=True)
    assert by_vram[: len(known)] == known  # unknown VRAM last

    newest = [o["first_seen"] for o in get_all(client, sort="newest")]
    assert newest == sorted(newest, reverse=True)


def test_pagination_covers_everything_once(client: TestClient, sample_loaded: int) -> None:
    ids: list[int] = []
    for offset in range(0, sample_loaded, 97):
        body = client.get("/api/offers", params={"limit": 97, "offset": offset}).json()
        assert body["offset"] == offset
        ids += [o["id"] for o in body["offers"]]
    assert len(ids) == len(set(ids)) == sample_loaded
    past_end = client.get("/api/offers", params={"offset": sample_loaded + 10}).json()
    assert past_end["offers"] == [] and past_end["total"] == sample_loaded


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"sort": "price"},
        {"sort": "vram"},
        {"sort": "newest"},
        {"market": "spot"},
        {"market": "spot", "sort": "price"},
        {"sort": "vram", "include_inactive": "true"},
        {"sort": "newest", "provider": "vastai"},
    ],
)
def test_keyset_pages_walk_the_same_rows_as_offset_pages(
    client: TestClient,
    sample_loaded: int,
    session_factory: sessionmaker[Session],
    params: dict[str, str],
) -> None:
    with session_factory.begin() as session:  # some gone offers for include_inactive
        session.execute(update(Offer).where(Offer.id % 7 == 0).values(active=False))
    by_offset = [o["id"] for o in get_all(client, **params)]
    limit = max(2, min(97, len(by_offset) // 4))  # several pages, ties across their edges
    ids: list[int] = []
    after: str | None = None
    while True:
        page = {**params, "limit": limit, **({"after": after} if after else {})}
        body = client.get("/api/offers", params=page).json()
        assert body["offset"] == len(ids)  # the cursor carries its position
        ids += [o["id"] for o in body["offers"]]
        after = body["next_after"]
        if after is None:
            break
    assert ids == by_offset and len(by_offset) == body["total"] > 2 * limit


def test_bad_or_foreign_cursor_is_422_naming_after(client: TestClient, sample_loaded: int) -> None:
    after = client.get("/api/offers", params={"sort": "price"}).json()["next_after"]
    for params in (
        {"after": "not-a-cursor"},
        {"after": after, "sort": "vram"},  # made for another order
        {"after": after, "sort": "price", "market": "spot"},  # another market's prices
        {"after": after, "sort": "price", **QLORA_8B},  # ranked tables page by offset
    ):
        response = client.get("/api/offers", params=params)
        assert response.status_code == 422, params
        assert [d["field"] for d in response.json()["detail"]] == ["after"]


def test_csv_twin_matches_json(client: TestClient, sample_loaded: int) -> None:
    params = {"provider": "lambdalabs", "sort": "price", "limit": 200}
    data = client.get("/api/offers", params=params).json()["offers"]
    response = client.get("/offers.csv", params=params)
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert [int(r["id"]) for r in rows] == [o["id"] for o in data]
    for row, offer in zip(rows, data, strict=True):
        assert row["instance_type"] == offer["instance_type"]
        assert float(row["price_per_hour"]) == pytest.approx(offer["price_per_hour"])
        assert row["gpu_model"] == offer["gpu_model"]
    # With a workload the CSV carries the fit columns too.
    fit_params = {**QLORA_8B, "limit": 20}
    fit_json = client.get("/api/offers", params=fit_params).json()["offers"]
    fit_rows = list(csv.DictReader(io.StringIO(client.get("/offers.csv", params=fit_params).text)))
    assert [int(r["id"]) for r in fit_rows] == [o["id"] for o in fit_json]
    assert [r["fits"] for r in fit_rows] == [str(o["fits"]) for o in fit_json]


def test_alternate_link_headers(client: TestClient, sample_loaded: int) -> None:
    link = client.get("/api/offers?provider=vastai").headers["link"]
    assert '</offers.csv?provider=vastai>; rel="alternate"; type="text/csv"' in link
    assert '</?provider=vastai>; rel="alternate"; type="text/html"' in link
    page_link = client.get("/?provider=vastai").headers["link"]
    assert '</api/offers?provider=vastai>; rel="alternate"; type="application/json"' in page_link


def test_caption_comes_from_the_filter_table(client: TestClient, sample_loaded: int) -> None:
    body = client.get("/api/offers", params={"provider": "vastai", "min_vram": 40}).json()
    assert body["caption"] == "showing offers where provider is Vast.ai; VRAM per GPU ≥ 40 GiB"
    assert client.get("/api/offers").json()["caption"] == "showing all current offers"


def test_blank_filter_values_mean_no_filter(client: TestClient, sample_loaded: int) -> None:
    # Empty form fields arrive as "key="; they must not narrow, nor fail validation.
    body = client.get("/api/offers?q=&min_vram=&gpu=&market=&sort=").json()
    assert body["total"] == sample_loaded and body["sort"] == "price_per_gpu"


def test_unfiltered_facets_from_one_scan_match_counts(session: Session, sample_loaded: int) -> None:
    by_key = {f.key: f for f in facets(session, filters=OfferFilters())}
    assert sum(v.count for v in by_key["provider"].values) == sample_loaded
    nvidia = {v.value: v.count for v in by_key["vendor"].values}["nvidia"]
    nvidia_slugs = select(GpuModel.slug).where(GpuModel.vendor == "nvidia")
    assert nvidia == active_count(session, Offer.gpu_model_slug.in_(nvidia_slugs))
    market = {v.value: v.count for v in by_key["market"].values}
    assert market["any"] == sample_loaded
    assert market["spot"] == active_count(session, Offer.spot_price_per_hour.is_not(None))
    assert market["on_demand"] == active_count(session, Offer.price_per_hour.is_not(None))
    for value in by_key["billing"].values:
        narrowed = OfferFilters.model_validate({"billing": [value.value]})
        assert value.count == count_offers(session, filters=narrowed)


@pytest.mark.parametrize(
    "params",
    [
        {"provider": ["vastai", "lambdalabs"], "sort": "price"},
        {},
        QLORA_8B,
        {**QLORA_8B, "sort": "price", "fits_only": "true"},
        {"model": "llama-3.1-70b", "method": "full", "sort": "vram"},
    ],
)
def test_export_streams_the_whole_view_in_its_order(
    client: TestClient, sample_loaded: int, params: dict[str, Any]
) -> None:
    view = get_all(client, **params)
    csv_response = client.get("/export/offers.csv", params={**params, "limit": 5, "offset": 7})
    assert csv_response.status_code == 200
    disposition = csv_response.headers["content-disposition"]
    assert disposition.startswith('attachment; filename="gpufit-offers-')
    assert disposition.endswith('.csv"')
    assert csv_response.headers["x-total-count"] == str(len(view))
    rows = list(csv.DictReader(io.StringIO(csv_response.text)))
    assert [int(r["id"]) for r in rows] == [o["id"] for o in view]  # no page: all, in order
    # Cell for cell what the page's CSV twin says about the same rows.
    twin = client.get("/offers.csv", params={**params, "limit": 40}).text.splitlines()
    assert csv_response.text.splitlines()[: len(twin)] == twin
    lines = client.get("/export/offers.jsonl", params=params).text.splitlines()
    objects = [json.loads(line) for line in lines]
    assert objects == view  # the same objects as /api/offers, every one
    if "model" in params:
        assert [r["fits"] for r in rows] == [str(o["fits"]) for o in view]


def test_export_refuses_views_over_the_row_limit(
    settings: Settings, session_factory: sessionmaker[Session], sample_loaded: int
) -> None:
    app = create_app(settings.model_copy(update={"export_max_rows": 100}), scheduler=False)
    with TestClient(app) as limited:
        response = limited.get("/export/offers.csv")
        assert response.status_code == 422 and "narrow the filters" in response.json()["detail"]
        small = limited.get("/export/offers.jsonl", params={"provider": "paperspace"})
        assert small.status_code == 200 and 0 < len(small.text.splitlines()) <= 100


def test_responses_are_gzipped(client: TestClient, sample_loaded: int) -> None:
    for path in ("/", "/api/offers", "/offers.csv", "/export/offers.csv", "/gpus/h100-sxm"):
        response = client.get(path, headers={"accept-encoding": "gzip"})
        assert response.headers.get("content-encoding") == "gzip", path
        assert response.headers.get("vary") == "Accept-Encoding", path
    plain = client.get("/", headers={"accept-encoding": "identity"})
    assert "content-encoding" not in plain.headers
