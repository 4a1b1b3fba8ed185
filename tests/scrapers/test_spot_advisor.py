"""AWS Spot Instance Advisor side feed: recorded dumps (2021, 2025), damaged and broken bodies."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from scrapers.base import FeedFormatError, RawPage
from scrapers.http import FetchError, make_client
from scrapers.spot_advisor import DEFAULT_URL, SpotAdvisorFeed, SpotAdvisorRecord
from tests.scrapers.conftest import fixture_text

URL = "https://advisor.test/spot-advisor-data.json"
FOLDER = "aws_spot_advisor"


def parse(name: str) -> tuple[list[SpotAdvisorRecord], list[str]]:
    result = SpotAdvisorFeed(URL).parse(RawPage(url=URL, body=fixture_text(FOLDER, name)))
    return result.records, result.warnings


def by_key(records: list[SpotAdvisorRecord]) -> dict[tuple[str, str, str], SpotAdvisorRecord]:
    return {(r.region, r.instance_type, r.os): r for r in records}


def test_2025_recording_gpu_rows_with_bands_and_savings() -> None:
    records, warnings = parse("spot-advisor-2025-06.json")
    assert warnings == []
    rows = by_key(records)
    # Values as recorded (us-east-1, Linux), band labels and `max` resolved from `ranges`.
    assert rows[("us-east-1", "p5.48xlarge", "Linux")] == SpotAdvisorRecord(
        region="us-east-1", instance_type="p5.48xlarge", os="Linux",
        band_index=4, band_label=">20%", band_max_pct=100, savings_pct=52,
    )  # fmt: skip
    assert rows[("us-east-1", "p5en.48xlarge", "Linux")].band_label == "<5%"
    assert rows[("us-east-1", "p4d.24xlarge", "Linux")].band_label == "10-15%"
    assert rows[("us-east-1", "p4d.24xlarge", "Linux")].band_max_pct == 16
    assert rows[("us-east-1", "g6e.xlarge", "Linux")].band_label == "5-10%"
    assert rows[("us-east-1", "g5.12xlarge", "Windows")].band_label == "<5%"
    # CPU types in the same blocks are not kept; every kept row is a GPU family.
    assert not any(r.instance_type.startswith(("m7i.", "c7i.")) for r in records)
    assert {r.region for r in records} == {"us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1"}
    assert {r.os for r in records} == {"Linux", "Windows"}
    assert len(records) == len(rows) == 355


def test_every_row_of_the_recording_is_kept_exactly_once() -> None:
    """Cross-check the parser against the raw JSON: each GPU pair maps to one record."""
    raw = json.loads(fixture_text(FOLDER, "spot-advisor-2025-06.json"))
    labels = {band["index"]: band["label"] for band in raw["ranges"]}
    expected = {
        (region, itype, os_name): (labels[row["r"]], row["s"])
        for region, systems in raw["spot_advisor"].items()
        for os_name, rows in systems.items()
        for itype, row in rows.items()
        if itype[0] in "pg"
    }
    records, _ = parse("spot-advisor-2025-06.json")
    assert {k: (r.band_label, r.savings_pct) for k, r in by_key(records).items()} == expected


def test_2021_recording_other_key_order_same_result_shape() -> None:
    records, warnings = parse("spot-advisor-2021-02.json")
    assert warnings == []
    rows = by_key(records)
    assert rows[("us-east-1", "p4d.24xlarge", "Linux")].band_label == "<5%"
    assert rows[("us-east-1", "p3.2xlarge", "Linux")].band_label == ">20%"
    assert rows[("us-east-1", "g3s.xlarge", "Linux")].savings_pct == 70
    assert "m5.large" not in {r.instance_type for r in records}
    assert len(records) == 81


def test_partial_feed_keeps_good_rows_and_names_each_bad_one() -> None:
    records, warnings = parse("partial.json")
    rows = by_key(records)
    assert ("us-east-1", "p5.48xlarge", "Linux") not in rows  # band 9 does not exist
    assert ("us-east-1", "g6.xlarge", "Linux") not in rows  # no band
    assert ("us-east-1", "p4d.24xlarge", "Linux") not in rows  # not an object
    assert rows[("us-east-1", "g5.xlarge", "Linux")].savings_pct is None  # "n/a" savings
    assert rows[("us-east-1", "g5.xlarge", "Linux")].band_label == ">20%"
    assert not any(r.region == "us-west-2" for r in records)
    assert not any(r.region == "eu-west-1" and r.os == "Windows" for r in records)
    assert rows[("eu-west-1", "p4d.24xlarge", "Linux")].band_label == ">20%"  # the rest stays
    assert sorted(warnings) == sorted(
        [
            "skipped p4d.24xlarge in us-east-1 (Linux): not an object",
            "skipped p5.48xlarge in us-east-1 (Linux): unknown interruption band '9'",
            "skipped g6.xlarge in us-east-1 (Linux): unknown interruption band 'None'",
            "g5.xlarge in us-east-1 (Linux): savings 'n/a' is not a percentage; left empty",
            "skipped region 'us-west-2': not an object",
        ]
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (fixture_text(FOLDER, "malformed.json"), "not valid JSON"),
        ("<html>Access Denied</html>", "not valid JSON"),
        ("[]", "top level is not an object"),
        ('{"ranges": [], "spot_advisor": {}}', "'ranges' is missing"),
        ('{"ranges": [{"index": 0, "label": "<5%"}], "spot_advisor": {}}', "bad band"),
        (
            '{"ranges": [{"index": 0, "label": "<5%", "max": 5}, '
            '{"index": 0, "label": "x", "max": 9}], "spot_advisor": {"a": {}}}',
            "listed twice",
        ),
        ('{"ranges": [{"index": 0, "label": "<5%", "max": 5}]}', "'spot_advisor' is missing"),
    ],
)
def test_bodies_not_in_the_feed_shape_raise(body: str, message: str) -> None:
    with pytest.raises(FeedFormatError, match=message):
        SpotAdvisorFeed(URL).parse(RawPage(url=URL, body=body))


def test_hostile_keys_are_bounded_and_skipped() -> None:
    body = json.dumps(
        {
            "ranges": [{"index": 0, "label": "<5%", "dots": 0, "max": 5}],
            "spot_advisor": {
                "us-east-1": {"Linux": {"p5." + "x" * 500: {"s": 50, "r": 0}}},
                "<script>": {"Linux": {"g5.xlarge": {"s": 50, "r": 0}}},
            },
        }
    )
    result = SpotAdvisorFeed(URL).parse(RawPage(url=URL, body=body))
    assert result.records == []
    assert len(result.warnings) == 2
    assert all(len(w) <= 300 for w in result.warnings)


@respx.mock
async def test_fetch_uses_the_configured_url_and_shared_retries() -> None:
    route = respx.get(URL).mock(
        side_effect=[
            httpx.Response(503),
            httpx.Response(200, text=fixture_text(FOLDER, "spot-advisor-2025-06.json")),
        ]
    )
    async with make_client(timeout=5) as client:
        page = await SpotAdvisorFeed(URL).fetch(client)
    assert route.call_count == 2
    assert len(SpotAdvisorFeed(URL).parse(page).records) == 355


@respx.mock
async def test_fetch_error_is_raised_not_swallowed() -> None:
    respx.get(URL).mock(return_value=httpx.Response(403, text="AccessDenied"))
    async with make_client(timeout=5) as client:
        with pytest.raises(FetchError, match="HTTP 403"):
            await SpotAdvisorFeed(URL).fetch(client)


def test_default_url_is_the_public_feed() -> None:
    assert SpotAdvisorFeed().url == DEFAULT_URL
    assert DEFAULT_URL == "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"
