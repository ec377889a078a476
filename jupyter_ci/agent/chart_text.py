"""Render a chart's JSON (kernel/structured) as a few lines of text the model reads.

The model then learns a chart's numbers instead of guessing them from pixels. The JSON comes
from the kernel, where model-written code could have put anything under this MIME type: each
axis and series is read leniently as wire/charts.py declares it (one that does not read is
told as "?" or left out), the rest as a Mapping, and every part of the text is bounded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jupyter_ci.wire.charts import BoxAndWhiskerSeries, ChartValue, Series

#: The MIME type of a matplotlib figure's data (schema: jupyter_ci/kernel/structured).
CHART_MIME = "application/vnd.jupyter-ci.chart+json"
#: Axes, series per Axes, points (or bars) per series told to the model.
MAX_AXES = 6
MAX_SERIES = 6
MAX_POINTS = 8
MAX_BARS = 12
MAX_LABEL = 60
MAX_CHARS = 3_000


def chart_text(chart: object) -> str:
    """Describe a chart JSON in a few bounded lines; an unreadable one gets a short note."""
    if not isinstance(chart, dict):
        return "[chart data unreadable]"
    title = _label(chart.get("title"))
    lines = [f"[Chart data{': ' + title if title else ''}]"]
    axes = _list(chart.get("axes"))
    for number, ax in enumerate(axes[:MAX_AXES], 1):
        if isinstance(ax, dict):
            lines.extend(_axes(number, ax))
    if len(axes) > MAX_AXES:
        lines.append(f"[… {len(axes) - MAX_AXES} more Axes not described]")
    if chart.get("truncated"):
        lines.append("[the chart data left some Axes out]")
    return _bounded(lines)


def _bounded(lines: list[str]) -> str:
    """Join whole lines up to MAX_CHARS, with a note of what was left out."""
    kept: list[str] = []
    size = 0
    for line in lines:
        size += len(line) + 1
        if size > MAX_CHARS - 80:  # room for the note
            kept.append(f"[… {len(lines) - len(kept)} more lines of chart data not shown]")
            break
        kept.append(line)
    return "\n".join(kept)


def _axes(number: int, ax: Mapping[str, object]) -> list[str]:
    kind = _label(ax.get("type")) or "unknown"
    title = _label(ax.get("title"))
    head = f"Axes {number}: {kind} chart{f' {title!r}' if title else ''}"
    parts = [head, *(f"{name}: {_axis(ax.get(name))}" for name in ("x", "y"))]
    lines = ["; ".join(parts)]
    series = _list(ax.get("series"))
    read = (_read_series(s) for s in series[:MAX_SERIES] if isinstance(s, dict))
    lines.extend(f"- {_series(s)}" for s in read if s is not None)
    total = ax.get("series_count")
    hidden = (total if isinstance(total, int) else len(series)) - min(len(series), MAX_SERIES)
    if hidden > 0:
        lines.append(f"- … and {hidden} more series")
    return lines


def _axis(value: object) -> str:
    """Describe an axis as wire.charts.Axis declares it; "?" when it does not read as one."""
    from jupyter_ci.wire.charts import Axis
    from jupyter_ci.wire.codec import WireError, decode

    try:
        axis = decode(Axis, value, lenient=True)
    except WireError:
        return "?"
    label = _label(axis.label)
    scale = _label(axis.scale) or "linear"
    low, high = axis.limits
    span = f", {_value(low)} to {_value(high)}"
    if axis.categories:
        scale, span = "categories:", f" {_few(axis.categories)}"
    return f"{label!r} ({scale}{span})" if label else f"({scale}{span})"


def _read_series(value: object) -> Series | None:
    """Read a series as wire.charts declares it (None when it does not read as one)."""
    from jupyter_ci.wire.charts import Series
    from jupyter_ci.wire.codec import WireError, decode

    try:
        found: Series = decode(Series, value, lenient=True)
    except WireError:
        return None
    return found


def _series(series: Series) -> str:
    from jupyter_ci.wire.charts import BoxAndWhiskerSeries, HistogramSeries, PieSeries, Points

    label = _label(series.label)
    name = f"{series.type} {label!r}" if label else series.type
    cut = " (sampled)" if series.truncated else ""
    if isinstance(series, HistogramSeries):
        edges, heights = series.edges, series.heights
        span = f" from {_value(edges[0])} to {_value(edges[-1])}" if edges else ""
        return f"{name} ({len(heights)} bins{span}): counts {_few(heights)}{cut}"
    if isinstance(series, BoxAndWhiskerSeries):
        return f"{name} ({series.count} boxes{cut}): " + _boxes(series)
    if isinstance(series, PieSeries):
        pairs = zip(series.labels, series.fractions, strict=False)
        return f"{name}: " + _bars([(n, f"{_value(v, 100)}%") for n, v in pairs])
    if not isinstance(series, Points):
        bars = zip(series.labels, series.heights, strict=False)
        return f"{name} ({series.count} bars{cut}): " + _bars([(n, _value(v)) for n, v in bars])
    return f"{name} ({series.count} points{cut}): {_points(series.points)}"


def _points(points: Sequence[tuple[ChartValue, ChartValue]]) -> str:
    """Show a few points (head and tail of many) and the range of y."""
    if len(points) <= MAX_POINTS:
        shown = [_point(p) for p in points]
    else:
        half = MAX_POINTS // 2
        shown = [*map(_point, points[:half]), "…", *map(_point, points[-(half - 1):])]
    ys = [y for _, y in points if isinstance(y, int | float) and math.isfinite(y)]
    span = f"; y from {_value(min(ys))} to {_value(max(ys))}" if len(points) > 2 and ys else ""
    return ", ".join(shown) + span


def _boxes(series: BoxAndWhiskerSeries) -> str:
    """Tell each box's five numbers (whiskers, quartiles, median) and its outliers."""
    told = []
    for box in series.boxes[:MAX_BARS]:
        numbers = "/".join(_value(v) for v in (box.min, box.first_quartile, box.median,
                                               box.third_quartile, box.max))
        outliers = f" outliers {_few(box.outliers)}" if box.outliers else ""
        told.append(f"{_value(box.label)}={numbers}{outliers}")
    more = len(series.boxes) - MAX_BARS
    return "; ".join(told + ([f"… {more} more"] if more > 0 else [])) + (
        " (min/q1/median/q3/max)" if told else "")


def _point(point: tuple[ChartValue, ChartValue]) -> str:
    return f"({_value(point[0])}, {_value(point[1])})"


def _bars(pairs: list[tuple[object, str]]) -> str:
    shown = [f"{_value(name)}={value}" for name, value in pairs[:MAX_BARS]]
    if len(pairs) > MAX_BARS:
        shown.append(f"… {len(pairs) - MAX_BARS} more")
    return ", ".join(shown)


def _few(values: Sequence[object]) -> str:
    shown = [_value(v) for v in values[:MAX_BARS]]
    return ", ".join(shown + ([f"… {len(values) - MAX_BARS} more"]
                              if len(values) > MAX_BARS else []))


def _value(value: object, scale: float = 1) -> str:
    """Write a number in 4 significant digits, a label as it is (bounded)."""
    if isinstance(value, bool) or value is None:
        return "null" if value is None else str(value)
    if isinstance(value, int | float):
        return f"{value * scale:.4g}"
    return _label(value)


def _label(value: object) -> str:
    text = value if isinstance(value, str) else ""
    return text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 1] + "…"


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []
