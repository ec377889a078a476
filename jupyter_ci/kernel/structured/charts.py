"""Read a matplotlib Figure's data from its Axes into a wire.charts.Chart (schema: __init__.py).

Imported when a figure is first displayed (install.py), not by `%load_ext jupyter_ci`.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from jupyter_ci.kernel.structured.boxes import FoundBox, find_boxes
from jupyter_ci.wire.charts import (
    AxesKind,
    Axis,
    BarSeries,
    Box,
    BoxAndWhiskerSeries,
    Chart,
    ChartAxes,
    ChartValue,
    HistogramSeries,
    LineSeries,
    PieSeries,
    ScatterSeries,
    Series,
)

log = logging.getLogger(__name__)

VERSION = 1
#: Axes of a figure, series of one Axes, and points (or bars) of one series kept.
MAX_AXES = 16
MAX_SERIES = 20
MAX_POINTS = 500
#: Points of a whole figure: many series share it (but each keeps at least MIN_POINTS).
MAX_FIGURE_POINTS = 5_000
MIN_POINTS = 20

#: Turns a value in an axis' data coordinates into JSON (a number, a date, a category).
Convert = Callable[[float], ChartValue]


def figure_chart(fig: Any) -> Chart | None:
    """Return the chart of a Figure, or None when it shows no data we can read."""
    try:
        return _figure(fig)
    except Exception:  # a figure we cannot read still shows its PNG: never break a display
        log.debug("jupyter-ci: could not read a figure's data", exc_info=True)
        return None


def _figure(fig: Any) -> Chart | None:
    all_axes = list(fig.axes)
    kept = all_axes[:MAX_AXES]
    count = sum(min(len(_artists(ax)[0]), MAX_SERIES) for ax in kept)
    limit = max(MIN_POINTS, min(MAX_POINTS, MAX_FIGURE_POINTS // max(count, 1)))
    axes = [entry for entry in (_axes(ax, limit) for ax in kept) if entry is not None]
    if not axes:
        return None
    title = fig.get_suptitle() if hasattr(fig, "get_suptitle") else ""
    cut = len(all_axes) > MAX_AXES
    return Chart(version=VERSION, title=str(title or ""), axes=tuple(axes),
                 axes_count=len(all_axes) if cut else None, truncated=cut)


def _artists(ax: Any) -> tuple[list[tuple[str, Any]], set[str]]:
    """Return the Axes' readable artists as (type, artist), and the kinds of the rest."""
    from matplotlib.collections import PathCollection
    from matplotlib.container import BarContainer
    from matplotlib.patches import Wedge

    boxes, in_boxes = find_boxes(ax)
    found: list[tuple[str, Any]] = [("line", line) for line in ax.get_lines()
                                    if line.get_visible() and id(line) not in in_boxes]
    other: set[str] = set()
    for collection in ax.collections:
        if isinstance(collection, PathCollection):
            found.append(("scatter", collection))
        else:
            other.add(type(collection).__name__)
    in_bars: set[int] = set()
    for container in ax.containers:
        if isinstance(container, BarContainer):
            found.append(("bar", container))
            in_bars.update(id(patch) for patch in container.patches)
    wedges = [patch for patch in ax.patches if isinstance(patch, Wedge)]
    if wedges:
        found.append(("pie", wedges))
    if boxes:
        found.append(("box_and_whisker", boxes))
    other.update(type(patch).__name__ for patch in ax.patches if id(patch) not in in_bars
                 and id(patch) not in in_boxes and not isinstance(patch, Wedge))
    other.update(type(image).__name__ for image in ax.images)
    return found, other


def _axes(ax: Any, limit: int) -> ChartAxes | None:
    artists, other = _artists(ax)
    title = ax.get_title() or ax.get_title("left") or ax.get_title("right")
    if not artists and not title:
        return None  # a colorbar, an inset with nothing of its own
    x, y = _axis(ax, ax.xaxis), _axis(ax, ax.yaxis)
    convert = (_converter(ax.xaxis), _converter(ax.yaxis))
    series = tuple(_series(kind, artist, ax, convert, limit)
                   for kind, artist in artists[:MAX_SERIES])
    kinds: set[AxesKind] = {entry.type for entry in series}
    return ChartAxes(
        type=kinds.pop() if len(kinds) == 1 else ("mixed" if kinds else "empty"),
        title=str(title), x=x, y=y, series=series, series_count=len(artists),
        truncated=len(artists) > MAX_SERIES,
        projection=None if ax.name == "rectilinear" else str(ax.name),
        not_read=tuple(sorted(other)))


def _axis(ax: Any, axis: Any) -> Axis:
    """Describe one axis: label, scale, limits, unit, ticks, and its categories if named."""
    limits = ax.get_xlim() if axis is ax.xaxis else ax.get_ylim()
    convert = _converter(axis)
    kind = _kind(axis)
    label = str(axis.get_label_text())
    ticks, tick_labels = _shown_ticks(axis, limits)
    place = _number if kind == "category" else convert  # a category's name is its label
    return Axis(label=label, scale=str(axis.get_scale()),
                limits=(convert(limits[0]), convert(limits[1])),
                kind=None if kind == "number" else kind,
                categories=tuple(_ticks(axis).values())[:MAX_POINTS]
                if kind == "category" else None,
                unit=_unit(label), ticks=tuple(place(t) for t in ticks),
                tick_labels=tuple(tick_labels))


#: A unit in a label, as E2B reads it: "Time (s)" or "Mass [kg]".
_UNIT = re.compile(r"\s\((.*?)\)|\[(.*?)\]")


def _unit(label: str) -> str | None:
    """Return the unit an axis label names in parentheses or brackets, or None."""
    found = _UNIT.search(label)
    return None if found is None else str(found.group(1) or found.group(2))


def _shown_ticks(axis: Any, limits: tuple[float, float]) -> tuple[list[float], list[str]]:
    """Return the major ticks within the limits, and their labels as drawn."""
    low, high = sorted(float(limit) for limit in limits)
    slack = (high - low) * 1e-9
    labels = [label.get_text() for label in axis.get_majorticklabels()]
    shown = [(float(loc), str(text)) for loc, text in zip(axis.get_majorticklocs(), labels,
                                                          strict=False)
             if low - slack <= float(loc) <= high + slack][:MAX_POINTS]
    return [loc for loc, _ in shown], [text for _, text in shown]


def _kind(axis: Any) -> Literal["number", "category", "date"]:
    """Tell whether an axis shows numbers, dates or named categories."""
    from matplotlib import category, dates, ticker

    formatter = axis.get_major_formatter()
    if isinstance(formatter, category.StrCategoryFormatter | ticker.FixedFormatter):
        return "category"
    # set_xticks(ticks, labels) and bar(tick_label=...) (and pandas' bar plots) name the
    # ticks with a FuncFormatter over a FixedLocator.
    if isinstance(formatter, ticker.FuncFormatter) and isinstance(
            axis.get_major_locator(), ticker.FixedLocator):
        return "category"
    if isinstance(formatter, dates.DateFormatter | dates.AutoDateFormatter
                  | dates.ConciseDateFormatter) or _periods(formatter) is not None:
        return "date"
    return "number"


def _periods(formatter: Any) -> Any:
    """Return the frequency of pandas' time-series axis (values are Period ordinals), or None."""
    return getattr(formatter, "freq", None) if (
        type(formatter).__name__ == "TimeSeries_DateFormatter") else None


def _ticks(axis: Any) -> dict[float, str]:
    """Map each tick's position to its label (formatted now, whether or not drawn yet)."""
    labels = [label.get_text() for label in axis.get_majorticklabels()]
    return {round(float(loc), 9): text for loc, text in zip(axis.get_majorticklocs(), labels,
                                                           strict=False) if text}


def _converter(axis: Any) -> Convert:
    kind = _kind(axis)
    if kind == "date":
        freq = _periods(axis.get_major_formatter())
        return _date if freq is None else lambda value: _period(value, freq)
    if kind == "category":
        ticks = _ticks(axis)
        return lambda value: ticks.get(round(float(value), 9), _number(value))
    return _number


def _period(value: Any, freq: Any) -> str | None:
    """Write a pandas Period ordinal as its period ("2024-01-01", "2024-01", "2024Q1")."""
    from pandas import Period

    return str(Period(ordinal=round(value), freq=freq)) if math.isfinite(value) else None


def _number(value: Any) -> float | int | None:
    """Return a finite number as JSON has it (NaN and infinities are not JSON: null)."""
    # 12 significant digits: what a chart can show, less float noise (2.5400000000000005).
    number = float(f"{float(value):.12g}")
    if not math.isfinite(number):
        return None
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def _date(value: Any) -> str | None:
    """Write a matplotlib date number as ISO 8601 (the date alone at midnight)."""
    from matplotlib import dates

    if not math.isfinite(float(value)):
        return None
    to_datetime: Callable[[float], datetime] = dates.num2date
    moment = to_datetime(float(value))
    if (moment.hour, moment.minute, moment.second, moment.microsecond) == (0, 0, 0, 0):
        return str(moment.date().isoformat())
    return str(moment.replace(tzinfo=None).isoformat())


def _label(artist: Any) -> str:
    """Return an artist's legend label ("" for matplotlib's hidden ones, like "_child0")."""
    label = artist.get_label()
    return "" if not isinstance(label, str) or label.startswith("_") else label


def _series(kind: str, artist: Any, ax: Any, convert: tuple[Convert, Convert],
            limit: int) -> Series:
    if kind == "bar":
        return _bars(artist, ax, convert, limit)
    if kind == "pie":
        return _pie(artist, limit)
    if kind == "box_and_whisker":
        return _boxes(artist, convert, limit)
    line = kind == "line"
    points, count = _points(artist.get_xydata() if line else artist.get_offsets(), convert,
                            limit)
    return (LineSeries if line else ScatterSeries)(
        label=_label(artist), points=points, count=count, truncated=count > limit)


def _points(xy: Any, convert: tuple[Convert, Convert], limit: int
            ) -> tuple[tuple[tuple[ChartValue, ChartValue], ...], int]:
    """Return up to `limit` points, evenly sampled (first and last kept), and their count."""
    import numpy as np

    data: Any = np.ma.filled(np.ma.asarray(xy, dtype=float), np.nan).reshape(-1, 2)
    count = len(data)
    if count > limit:
        data = data[np.unique(np.linspace(0, count - 1, limit).round().astype(int))]
    return tuple((convert[0](x), convert[1](y)) for x, y in data), count


def _bars(container: Any, ax: Any, convert: tuple[Convert, Convert],
          limit: int) -> BarSeries | HistogramSeries:
    """Read a BarContainer: each bar's label (its tick, or its centre) and value."""
    horizontal = getattr(container, "orientation", None) == "horizontal"
    patches = list(container.patches)
    values = getattr(container, "datavalues", None)
    if values is None or len(values) != len(patches):
        values = [p.get_width() if horizontal else p.get_height() for p in patches]
    place = convert[1] if horizontal else convert[0]
    label, count, cut = _label(container), len(patches), len(patches) > limit
    heights = tuple(_number(v) for v in values[:limit])
    if not horizontal and _kind(ax.xaxis) != "category" and _adjacent(patches):
        edges = [p.get_x() for p in patches] + [patches[-1].get_x() + patches[-1].get_width()]
        return HistogramSeries(label=label, edges=tuple(place(e) for e in edges[:limit + 1]),
                               heights=heights, count=count, truncated=cut)
    centres = [p.get_y() + p.get_height() / 2 if horizontal else
               p.get_x() + p.get_width() / 2 for p in patches[:limit]]
    return BarSeries(label=label, orientation="horizontal" if horizontal else None,
                     labels=tuple(place(c) for c in centres), heights=heights, count=count,
                     truncated=cut)


def _adjacent(patches: list[Any]) -> bool:
    """Tell whether bars touch edge to edge, as a histogram's bins do."""
    if len(patches) < 2:
        return False
    width = max(abs(p.get_width()) for p in patches) or 1.0
    return all(math.isclose(a.get_x() + a.get_width(), b.get_x(), abs_tol=width * 1e-6)
               for a, b in itertools.pairwise(patches))


def _pie(wedges: list[Any], limit: int) -> PieSeries:
    """Read a pie's wedges: each one's label and share of the whole."""
    # float(): matplotlib before 3.11 keeps the angles as float32, which round() keeps too.
    shares = [float(w.theta2 - w.theta1) / 360 for w in wedges]
    return PieSeries(label="", labels=tuple(_label(w) for w in wedges[:limit]),
                     fractions=tuple(_number(round(s, 6)) for s in shares[:limit]),
                     count=len(wedges), truncated=len(wedges) > limit,
                     radius=tuple(_number(w.r) for w in wedges[:limit]))


def _boxes(found: list[FoundBox], convert: tuple[Convert, Convert],
           limit: int) -> BoxAndWhiskerSeries:
    """Write the boxes of an Axes: each one's label, whiskers, quartiles and outliers."""
    horizontal = found[0].horizontal
    place, value = (convert[1], convert[0]) if horizontal else convert
    boxes = tuple(Box(label=place(box.position), min=value(box.whislo),
                      first_quartile=value(box.q1), median=value(box.median),
                      third_quartile=value(box.q3), max=value(box.whishi),
                      outliers=tuple(value(v) for v in box.fliers[:limit]),
                      outlier_count=len(box.fliers) if len(box.fliers) > limit else None)
                  for box in found[:limit])
    return BoxAndWhiskerSeries(label="", orientation="horizontal" if horizontal else None,
                               boxes=boxes, count=len(found), truncated=len(found) > limit)
