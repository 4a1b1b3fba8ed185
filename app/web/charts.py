"""Inline SVG charts rendered on the server: pure functions from data to escaped markup.

Prices are step lines: a recorded price holds until the next observation, and the last one
until `end` (the offer's last sighting, or now). Long series are drawn downsampled (one point
per time bucket with its low-high range shaded), so a chart stays a few tens of kilobytes however
long the history. Colours come from CSS classes (static/app.css), so the markup needs no inline
styles.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from markupsafe import Markup, escape

from app.store.models import utcnow


@dataclass(frozen=True)
class Series:
    """One line: a legend name, a CSS class, and (time, value) points in time order; `ranges`
    optionally shades each time bucket's (start, end, low, high) behind it."""

    name: str
    css: str
    points: Sequence[tuple[datetime, float]]
    ranges: Sequence[tuple[datetime, datetime, float, float]] = ()


# A series longer than this is drawn downsampled (`downsample`); markers (one <circle> with a
# tooltip per point) are drawn only while the chart holds at most MAX_MARKERS points.
MAX_POINTS = 300
DOWNSAMPLE_BUCKETS = 150
MAX_MARKERS = 200


def downsample(series: Series, buckets: int = DOWNSAMPLE_BUCKETS) -> Series:
    """`series` with at most `buckets` points: per time bucket the value in force at its end
    (prices are steps) and the bucket's low-high range; short series come back unchanged."""
    points = series.points
    if len(points) <= MAX_POINTS:
        return series
    t0, t1 = points[0][0], points[-1][0]
    width = max((t1 - t0) / buckets, timedelta(seconds=1)) * (1 + 1e-6)
    out: list[tuple[datetime, float]] = []
    ranges: list[tuple[datetime, datetime, float, float]] = []
    current: int | None = None
    low = high = last = 0.0
    for when, value in points:
        index = int((when - t0) / width)
        if index != current:
            if current is not None:
                start = t0 + width * current
                out.append((start, last))
                ranges.append((start, start + width, low, high))
            current, low, high = index, value, value
        low, high, last = min(low, value), max(high, value), value
    assert current is not None
    start = t0 + width * current
    out.append((start, last))
    ranges.append((start, start + width, low, high))
    return Series(series.name, series.css, out, ranges)


@dataclass(frozen=True)
class Band:
    """A shaded time span (e.g. out of stock) with a CSS class and a legend label."""

    start: datetime
    end: datetime
    css: str
    label: str


@dataclass(frozen=True)
class Frame:
    """The plot area inside the SVG, in pixels."""

    width: float = 720
    height: float = 260
    left: float = 64
    right: float = 16
    top: float = 16
    bottom: float = 56

    @property
    def plot_w(self) -> float:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> float:
        return self.height - self.top - self.bottom


def nice_ticks(low: float, high: float, count: int = 4) -> list[float]:
    """Round tick values covering [low, high] (1, 2, 2.5 or 5 times a power of ten)."""
    if high <= low:
        high = low + 1
    raw = (high - low) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    start = math.floor(low / step) * step
    ticks = [round(start, 10)]
    while ticks[-1] < high - step * 1e-9:  # the last tick is at or above `high`
        ticks.append(round(start + len(ticks) * step, 10))
    return ticks


def _fmt_value(value: float) -> str:
    if value == 0:
        return "$0"
    return f"${value:,.3f}" if value < 0.1 else f"${value:,.2f}"


def _fmt_time(value: datetime, span: timedelta) -> str:
    if span <= timedelta(days=2):
        return value.strftime("%d %b %H:%M")
    return value.strftime("%d %b %Y")


def _step_path(
    points: Sequence[tuple[datetime, float]],
    end: datetime,
    x: Callable[[datetime], float],
    y: Callable[[float], float],
) -> str:
    parts = []
    for i, (when, value) in enumerate(points):
        px, py = x(when), y(value)
        parts.append(f"M{px:.1f},{py:.1f}" if i == 0 else f"H{px:.1f}V{py:.1f}")
    parts.append(f"H{x(max(end, points[-1][0])):.1f}")
    return "".join(parts)


def time_chart(
    series: Sequence[Series],
    *,
    title: str,
    bands: Sequence[Band] = (),
    end: datetime | None = None,
    frame: Frame = Frame(),
    unit: str = "per hour",
) -> Markup:
    """An accessible SVG step chart of `series` over time, with shaded `bands`."""
    drawn = [downsample(s) for s in series if s.points]
    end = end or utcnow()
    if not drawn:
        return Markup('<p class="chart-empty">No price history recorded yet.</p>')
    times = [t for s in drawn for t, _ in s.points] + [b.start for b in bands]
    t0, t1 = min(times), max([*times, end])
    if t1 - t0 < timedelta(hours=1):
        t0, t1 = t0 - timedelta(minutes=30), t1 + timedelta(minutes=30)
    span = t1 - t0
    values = [v for s in drawn for _, v in s.points] + [r[3] for s in drawn for r in s.ranges]
    ticks = nice_ticks(0.0, max(values) * 1.1 or 1.0)
    y_max = ticks[-1]

    def x(when: datetime) -> float:
        return frame.left + (when - t0) / span * frame.plot_w

    def y(value: float) -> float:
        return frame.top + frame.plot_h * (1 - value / y_max)

    out: list[str] = [
        f'<svg class="chart" viewBox="0 0 {frame.width:g} {frame.height:g}" role="img" '
        f'aria-labelledby="chart-title chart-desc" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="chart-title">{escape(title)}</title>',
        f'<desc id="chart-desc">{escape(_describe(drawn, unit))}</desc>',
    ]
    for band in bands:
        bx0, bx1 = x(max(band.start, t0)), x(min(band.end, t1))
        out.append(
            f'<rect class="band {escape(band.css)}" x="{bx0:.1f}" y="{frame.top:g}" '
            f'width="{max(1.0, bx1 - bx0):.1f}" height="{frame.plot_h:g}">'
            f"<title>{escape(band.label)}</title></rect>"
        )
    for tick in ticks:
        ty = y(tick)
        out.append(
            f'<line class="grid" x1="{frame.left:g}" x2="{frame.width - frame.right:g}" '
            f'y1="{ty:.1f}" y2="{ty:.1f}"/>'
            f'<text class="axis" x="{frame.left - 6:g}" y="{ty + 4:.1f}" '
            f'text-anchor="end">{escape(_fmt_value(tick))}</text>'
        )
    for i in range(5):
        when = t0 + span * (i / 4)
        tx = x(when)
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        out.append(
            f'<text class="axis" x="{tx:.1f}" y="{frame.top + frame.plot_h + 16:g}" '
            f'text-anchor="{anchor}">{escape(_fmt_time(when, span))}</text>'
        )
    for s in drawn:
        if s.ranges:
            out.append(
                f'<path class="range {escape(s.css)}" d="{_range_path(s.ranges, x, y)}">'
                f"<title>{escape(s.name)}: range within each period</title></path>"
            )
    # Markers mark observations: none on bucketed series, none when they would crowd the plot.
    markers = sum(len(s.points) for s in drawn if not s.ranges) <= MAX_MARKERS
    for s in drawn:
        out.append(
            f'<path class="line {escape(s.css)}" d="{_step_path(s.points, end, x, y)}">'
            f"<title>{escape(s.name)}</title></path>"
        )
        for when, value in s.points if markers and not s.ranges else ():
            out.append(
                f'<circle class="dot {escape(s.css)}" cx="{x(when):.1f}" cy="{y(value):.1f}" r="3">'
                f"<title>{escape(s.name)}: {escape(_fmt_value(value))} "
                f"({escape(when.strftime('%Y-%m-%d %H:%M'))} UTC)</title></circle>"
            )
    legend_y = frame.height - 12
    lx = frame.left
    for s in drawn:
        out.append(
            f'<rect class="key {escape(s.css)}" x="{lx:.1f}" y="{legend_y - 9:g}" '
            f'width="14" height="4"/>'
            f'<text class="legend" x="{lx + 18:.1f}" y="{legend_y - 4:g}">{escape(s.name)}</text>'
        )
        lx += 30 + 7 * len(s.name)
    for css, text in sorted({(b.css, b.label) for b in bands}):
        out.append(
            f'<rect class="band {escape(css)}" x="{lx:.1f}" y="{legend_y - 12:g}" '
            f'width="14" height="10"/>'
            f'<text class="legend" x="{lx + 18:.1f}" y="{legend_y - 4:g}">{escape(text)}</text>'
        )
        lx += 30 + 7 * len(text)
    out.append("</svg>")
    return Markup("".join(out))


def _range_path(
    ranges: Sequence[tuple[datetime, datetime, float, float]],
    x: Callable[[datetime], float],
    y: Callable[[float], float],
) -> str:
    """One closed box per bucket, low to high (a path, not hundreds of <rect> elements)."""
    parts = []
    for start, stop, low, high in ranges:
        x0, x1 = x(start), x(stop)
        parts.append(f"M{x0:.1f},{y(high):.1f}H{x1:.1f}V{y(low):.1f}H{x0:.1f}Z")
    return "".join(parts)


def _describe(series: Sequence[Series], unit: str) -> str:
    parts = []
    for s in series:
        values = [v for _, v in s.points]
        low = min([*values, *(r[2] for r in s.ranges)])
        high = max([*values, *(r[3] for r in s.ranges)])
        what = f"{len(values)} period(s)" if s.ranges else f"{len(values)} observation(s)"
        parts.append(
            f"{s.name}: {what}, from {_fmt_value(low)} to "
            f"{_fmt_value(high)} {unit}, latest {_fmt_value(values[-1])}"
        )
    return "; ".join(parts)


def availability_bands(points: Sequence[tuple[datetime, str]], end: datetime) -> list[Band]:
    """Spans where an offer was out of stock or limited (each lasts until the next point)."""
    bands = []
    for i, (when, availability) in enumerate(points):
        until = points[i + 1][0] if i + 1 < len(points) else end
        if availability == "out":
            bands.append(Band(when, until, "out", "out of stock"))
        elif availability == "limited":
            bands.append(Band(when, until, "limited", "limited availability"))
    return bands
