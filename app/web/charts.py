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


@dataclass(frozen=True)
class BarPart:
    """One stacked segment of the memory bar: a label, a CSS class and GiB."""

    label: str
    css: str
    gib: float


def memory_parts(breakdown: dict[str, float]) -> list[BarPart]:
    """The estimate's per-GPU breakdown (MemoryBreakdown.as_dict) as bar segments.

    What is never alive at the peak (`peak_overlap_gib`) is taken off the activations and
    logits first, then off the gradients, so the segments add up to the per-GPU total.
    """
    overlap = breakdown.get("peak_overlap_gib", 0.0)
    transient = breakdown["activations_gib"] + breakdown["logits_gib"]
    taken = min(overlap, transient)
    gradients = max(0.0, breakdown["gradients_gib"] - (overlap - taken))
    parts = [
        BarPart(
            "weights", "mem-weights", breakdown["weights_gib"] + breakdown["quant_constants_gib"]
        ),
        BarPart("gradients", "mem-grads", gradients),
        BarPart("optimizer states", "mem-optim", breakdown["optimizer_gib"]),
        BarPart("adapters", "mem-adapter", breakdown["adapter_gib"]),
        BarPart("activations + logits at the peak", "mem-acts", transient - taken),
        BarPart("context, buffers, fragmentation", "mem-overhead", breakdown["overhead_gib"]),
    ]
    return [p for p in parts if p.gib > 0.005]


def memory_bar(
    parts: Sequence[BarPart],
    *,
    capacity_gib: float | None,
    capacity_label: str,
    title: str,
    width: float = 720,
) -> Markup:
    """An accessible SVG stacked bar of per-GPU memory against one card's usable VRAM."""
    total = sum(p.gib for p in parts)
    scale_max = max(total, capacity_gib or 0.0, 1.0) * 1.08
    left, right, bar_y, bar_h = 8.0, 8.0, 26.0, 28.0
    plot_w = width - left - right

    def x(gib: float) -> float:
        return left + gib / scale_max * plot_w

    verdict = ""
    if capacity_gib:
        verdict = (
            f"; fits {capacity_label} with {capacity_gib - total:.1f} GiB to spare"
            if total <= capacity_gib
            else f"; exceeds {capacity_label} by {total - capacity_gib:.1f} GiB"
        )
    desc = (
        f"{total:.1f} GiB per GPU: " + ", ".join(f"{p.label} {p.gib:.1f}" for p in parts) + verdict
    )
    columns = 2
    rows = math.ceil(len(parts) / columns)
    height = bar_y + bar_h + 14 + rows * 18 + 6
    out: list[str] = [
        f'<svg class="chart memory-bar" viewBox="0 0 {width:g} {height:g}" role="img" '
        f'aria-labelledby="mem-title mem-desc" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="mem-title">{escape(title)}</title>',
        f'<desc id="mem-desc">{escape(desc)}</desc>',
        f'<text class="axis" x="{left:g}" y="16">{escape(f"{total:.1f} GiB per GPU")}</text>',
    ]
    if capacity_gib:
        out.append(
            f'<text class="axis" x="{width - right:g}" y="16" text-anchor="end">'
            f"{escape(f'{capacity_label}: {capacity_gib:.1f} GiB usable (line)')}</text>"
        )
    at = 0.0
    for part in parts:
        x0, x1 = x(at), x(at + part.gib)
        out.append(
            f'<rect class="seg {escape(part.css)}" x="{x0:.1f}" y="{bar_y:g}" '
            f'width="{max(0.5, x1 - x0):.1f}" height="{bar_h:g}">'
            f"<title>{escape(part.label)}: {part.gib:.2f} GiB</title></rect>"
        )
        at += part.gib
    if capacity_gib:
        cx = x(capacity_gib)
        css = "capacity" if total <= capacity_gib else "capacity over"
        out.append(
            f'<line class="{css}" x1="{cx:.1f}" x2="{cx:.1f}" y1="{bar_y - 6:g}" '
            f'y2="{bar_y + bar_h + 6:g}"><title>{escape(capacity_label)}: '
            f"{capacity_gib:.1f} GiB</title></line>"
        )
    for i, part in enumerate(parts):
        lx = left + (i % columns) * (plot_w / columns)
        ly = bar_y + bar_h + 20 + (i // columns) * 18
        out.append(
            f'<rect class="key {escape(part.css)}" x="{lx:.1f}" y="{ly - 9:g}" '
            f'width="12" height="10"/>'
            f'<text class="legend" x="{lx + 16:.1f}" y="{ly:g}">'
            f"{escape(part.label)} {part.gib:.1f} GiB</text>"
        )
    out.append("</svg>")
    return Markup("".join(out))


# Availability states in lane order (top to bottom) with their legend labels.
AVAILABILITY_LANES = (
    ("in_stock", "in stock"),
    ("limited", "limited"),
    ("out", "out of stock"),
    ("unknown", "unknown"),
)


def availability_chart(
    points: Sequence[tuple[datetime, str, int | None]],
    *,
    title: str,
    end: datetime | None = None,
    frame: Frame = Frame(height=150, bottom=44),
) -> Markup:
    """An accessible SVG timeline of an offer's availability: one lane per state, each recorded
    state holding until the next observation, and the available count (where the feed gives
    one) as a step line over it."""
    end = end or utcnow()
    if not points:
        return Markup('<p class="chart-empty">No availability recorded yet.</p>')
    t0, t1 = points[0][0], max(end, points[-1][0])
    if t1 - t0 < timedelta(hours=1):
        t0, t1 = t0 - timedelta(minutes=30), t1 + timedelta(minutes=30)
    span = t1 - t0
    lane_h = frame.plot_h / len(AVAILABILITY_LANES)
    lanes = {state: i for i, (state, _) in enumerate(AVAILABILITY_LANES)}
    labels = dict(AVAILABILITY_LANES)

    def x(when: datetime) -> float:
        return frame.left + (when - t0) / span * frame.plot_w

    counts = [(t, float(c)) for t, _, c in points if c is not None]
    known = [state for _, state, _ in points if state != "unknown"]
    out: list[str] = [
        f'<svg class="chart availability" viewBox="0 0 {frame.width:g} {frame.height:g}" '
        f'role="img" aria-labelledby="avail-title avail-desc" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="avail-title">{escape(title)}</title>',
        f'<desc id="avail-desc">{escape(_describe_availability(points, counts))}</desc>',
    ]
    for state, label in AVAILABILITY_LANES:
        ly = frame.top + lanes[state] * lane_h
        out.append(
            f'<line class="grid" x1="{frame.left:g}" x2="{frame.width - frame.right:g}" '
            f'y1="{ly + lane_h:.1f}" y2="{ly + lane_h:.1f}"/>'
            f'<text class="axis" x="{frame.left - 6:g}" y="{ly + lane_h / 2 + 4:.1f}" '
            f'text-anchor="end">{escape(label)}</text>'
        )
    for i, (when, state, count) in enumerate(points):
        until = points[i + 1][0] if i + 1 < len(points) else t1
        lane = lanes.get(state, lanes["unknown"])
        bx0, bx1 = x(when), x(until)
        note = f"{labels.get(state, state)}" + (f", {count} available" if count is not None else "")
        out.append(
            f'<rect class="avail {escape(state if state in lanes else "unknown")}" '
            f'x="{bx0:.1f}" y="{frame.top + lane * lane_h + 2:.1f}" '
            f'width="{max(1.0, bx1 - bx0):.1f}" height="{lane_h - 4:.1f}">'
            f"<title>{escape(note)} from {escape(when.strftime('%Y-%m-%d %H:%M'))} UTC"
            f"</title></rect>"
        )
    if counts:
        top = max(c for _, c in counts) or 1.0

        def y(value: float) -> float:
            return frame.top + frame.plot_h * (1 - value / top)

        out.append(
            f'<path class="line s-count" d="{_step_path(counts, t1, x, y)}">'
            f"<title>available count (max {top:g})</title></path>"
        )
    for i in range(5):
        when = t0 + span * (i / 4)
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        out.append(
            f'<text class="axis" x="{x(when):.1f}" y="{frame.top + frame.plot_h + 16:g}" '
            f'text-anchor="{anchor}">{escape(_fmt_time(when, span))}</text>'
        )
    if not known:
        out.append(
            f'<text class="legend" x="{frame.left + 4:g}" y="{frame.height - 8:g}">'
            "The feed does not say whether this offer is available.</text>"
        )
    out.append("</svg>")
    return Markup("".join(out))


def _describe_availability(
    points: Sequence[tuple[datetime, str, int | None]], counts: Sequence[tuple[datetime, float]]
) -> str:
    labels = dict(AVAILABILITY_LANES)
    states = sorted({labels.get(s, s) for _, s, _ in points})
    latest = points[-1]
    text = (
        f"{len(points)} observation(s); states seen: {', '.join(states)}; "
        f"latest: {labels.get(latest[1], latest[1])}"
    )
    if counts:
        text += f"; available count from {min(c for _, c in counts):g} to "
        text += f"{max(c for _, c in counts):g}"
    return text
