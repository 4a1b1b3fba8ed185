"""Pure helpers: query-string editing and SVG chart rendering."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

from app.web import urls
from app.web.charts import (
    Band,
    Series,
    availability_bands,
    downsample,
    nice_ticks,
    time_chart,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_toggle_replace_and_canonical_query() -> None:
    args = [("gpu", "h100-sxm"), ("offset", "50"), ("min_vram", "")]
    assert urls.qs(args) == "gpu=h100-sxm&offset=50"
    added = urls.toggle(args, "gpu", "a100-80gb-sxm")
    assert urls.values(added, "gpu") == ["h100-sxm", "a100-80gb-sxm"]
    assert "offset" not in dict(added)  # a changed filter starts on page one
    assert urls.values(urls.toggle(added, "gpu", "h100-sxm"), "gpu") == ["a100-80gb-sxm"]
    assert urls.replace(args, "sort", "price")[-1] == ("sort", "price")
    assert urls.first(urls.replace(args, "offset", "100"), "offset") == "100"
    assert urls.url("/", []) == "/" and urls.url("/", [("q", "a&b")]) == "/?q=a%26b"


def test_nice_ticks_cover_the_range() -> None:
    for high in (0.07, 1.0, 3.3, 26.4, 980.0):
        ticks = nice_ticks(0.0, high)
        assert ticks[0] == 0 and ticks[-1] >= high and len(ticks) <= 6
        steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:], strict=False)}
        assert len(steps) == 1


def test_time_chart_steps_stay_inside_the_plot_and_escape_names() -> None:
    points = [(T0, 2.0), (T0 + timedelta(days=1), 3.0), (T0 + timedelta(days=2), 1.5)]
    svg = str(
        time_chart(
            [Series("<evil>", "s0", points)],
            bands=[Band(T0 + timedelta(hours=6), T0 + timedelta(hours=12), "out", "out of stock")],
            title="A & B",
            end=T0 + timedelta(days=3),
        )
    )
    root = ET.fromstring(svg)  # well-formed XML
    assert root.get("role") == "img"
    assert "&lt;evil&gt;" in svg and "<evil>" not in svg and "A &amp; B" in svg
    d = re.search(r'<path class="line s0" d="([^"]+)"', svg)
    assert d is not None
    numbers = [float(n) for n in re.findall(r"[\d.]+", d.group(1))]
    assert all(0 <= n <= 720 for n in numbers)
    assert d.group(1).count("V") == 2 and d.group(1).endswith("H704.0")  # holds until `end`


def test_time_chart_single_point_and_empty() -> None:
    one = str(time_chart([Series("on-demand", "s0", [(T0, 1.0)])], title="t", end=T0))
    assert "<path" in one and re.search(r'd="M[\d.]+,[\d.]+H[\d.]+"', one)
    assert "No price history" in str(time_chart([Series("x", "s0", [])], title="t"))


def test_availability_bands_last_until_next_point() -> None:
    points = [
        (T0, "in_stock"),
        (T0 + timedelta(hours=1), "out"),
        (T0 + timedelta(hours=3), "limited"),
    ]
    bands = availability_bands(points, T0 + timedelta(hours=4))
    assert [(b.css, b.start.hour, b.end.hour) for b in bands] == [("out", 1, 3), ("limited", 3, 4)]


def test_long_series_are_downsampled_to_buckets_with_their_ranges() -> None:
    # 20,000 observations, one every 3 minutes, a saw-tooth between 1 and 2.
    points = [(T0 + timedelta(minutes=3 * i), 1.0 + (i % 100) / 99) for i in range(20_000)]
    small = downsample(Series("p", "s0", points), buckets=100)
    assert len(small.points) == len(small.ranges) <= 100
    for (start, stop, low, high), (when, value) in zip(small.ranges, small.points, strict=True):
        inside = [v for t, v in points if start <= t < stop]
        assert inside and (low, high) == (min(inside), max(inside))
        assert when == start and value == inside[-1]  # the price in force at the bucket's end
    svg = str(time_chart([Series("p", "s0", points)], title="t", end=points[-1][0]))
    ET.fromstring(svg)
    assert len(svg) < 40_000 and "<circle" not in svg and 'class="range s0"' in svg
    # A short series is drawn as it is, with a marker per observation.
    few = points[:50]
    assert downsample(Series("p", "s0", few)).points == few
    assert str(time_chart([Series("p", "s0", few)], title="t")).count("<circle") == 50


def test_export_time_text_matches_isoformat() -> None:
    from app.queries.output import iso_utc

    for when in (T0, T0 + timedelta(microseconds=120), T0 + timedelta(days=400, seconds=59)):
        text = when.strftime("%Y-%m-%dT%H:%M:%S.%f")
        assert iso_utc(text) == when.isoformat()
