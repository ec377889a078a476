"""A figure's data and a DataFrame's rows as displays carry them beside their PNG and HTML.

`Chart` is `application/vnd.jupyter-ci.chart+json` (kernel/structured/charts.py reads it
from a matplotlib Figure), `Table` is `application/vnd.dataresource+json` (tables.py, from a
pandas DataFrame or Series); kernel/structured/__init__.py gives both schemas in prose. A
client reads either back with `codec.decode(Chart, value, lenient=True)`.

Only the kernel's readers import this module, and only once a figure or frame is displayed:
`%load_ext jupyter_ci` does not load it. The client's `Result.chart` reads a chart with it.

A new field is one declaration here, left out of the JSON while empty (OMIT_IF), so older
readers see what they always saw. What E2B's chart objects carry is here under E2B's names:
its `x_unit`, `x_ticks`, `x_tick_labels` are an Axis' `unit`, `ticks`, `tick_labels` (under
`x` or `y`); its BoxAndWhiskerChart's elements are a BoxAndWhiskerSeries' `boxes` (`min`,
`first_quartile`, `median`, `third_quartile`, `max`, `outliers`); its pie elements' `radius`
is a PieSeries' `radius`, one per wedge.
"""

from __future__ import annotations

from dataclasses import field
from typing import ClassVar, Literal

from jupyter_ci.wire.codec import FLATTEN, OMIT_IF
from jupyter_ci.wire.frozen import frozen

#: A value in an axis' data coordinates: a number, an ISO 8601 date, a category's name, or
#: null (NaN, infinities, a date out of range).
ChartValue = int | float | str | None
#: What one Axes shows: its series' one type, "mixed" when they differ, "empty" with none.
#: A column's name as pandas writes it (a frame's column labels may be numbers).
FieldName = str | int | float | bool | None
AxesKind = Literal["line", "scatter", "bar", "histogram", "pie", "box_and_whisker", "mixed",
                   "empty"]


def _omit(empty: object) -> dict[str, object]:
    """Return the metadata of a field left out of the JSON while it is `empty`."""
    return {OMIT_IF: empty}


@frozen
class Axis:
    """One axis of an Axes: its label, scale and limits (and categories when named)."""

    label: str
    #: matplotlib's scale name: "linear", "log", "symlog", "logit", ...
    scale: str
    limits: tuple[ChartValue, ChartValue]
    #: "category": its ticks are named (a value at one is its name); "date": values are ISO
    #: 8601; absent: numbers.
    kind: Literal["category", "date"] | None = field(default=None, metadata=_omit(None))
    #: A category axis' tick labels, in order.
    categories: tuple[str, ...] | None = field(default=None, metadata=_omit(None))
    #: The unit its label names in parentheses or brackets ("Time (s)", "Mass [kg]"), as
    #: E2B reads it.
    unit: str | None = field(default=None, metadata=_omit(None))
    #: The major ticks shown (within `limits`): numbers (a category axis' too: its names are
    #: `tick_labels`), or ISO 8601 on a "date" axis.
    ticks: tuple[ChartValue, ...] = field(default=(), metadata=_omit(()))
    #: Each tick's label as drawn ("" for an unlabelled tick; matplotlib's mathtext as it is).
    tick_labels: tuple[str, ...] = field(default=(), metadata=_omit(()))


@frozen
class Points:
    """A line's or a scatter's points, evenly sampled (first and last kept) when cut."""

    label: str
    points: tuple[tuple[ChartValue, ChartValue], ...]
    #: The series' full number of points.
    count: int
    truncated: bool = field(default=False, metadata=_omit(False))


@frozen
class LineSeries(Points):
    """A line (Axes.plot)."""

    type: ClassVar[Literal["line"]] = "line"


@frozen
class ScatterSeries(Points):
    """A scatter (Axes.scatter)."""

    type: ClassVar[Literal["scatter"]] = "scatter"


@frozen(kw_only=True)
class BarSeries:
    """Bars: each one's label (its tick's name, or its centre) and height (its value)."""

    type: ClassVar[Literal["bar"]] = "bar"
    label: str
    orientation: Literal["horizontal"] | None = field(default=None, metadata=_omit(None))
    labels: tuple[ChartValue, ...]
    heights: tuple[ChartValue, ...]
    #: The full number of bars.
    count: int
    truncated: bool = field(default=False, metadata=_omit(False))


@frozen
class HistogramSeries:
    """Touching bars: n bins between n + 1 edges."""

    type: ClassVar[Literal["histogram"]] = "histogram"
    label: str
    edges: tuple[ChartValue, ...]
    heights: tuple[ChartValue, ...]
    #: The full number of bins.
    count: int
    truncated: bool = field(default=False, metadata=_omit(False))


@frozen
class PieSeries:
    """A pie: each wedge's label and share of the whole (0 to 1)."""

    type: ClassVar[Literal["pie"]] = "pie"
    label: str
    labels: tuple[str, ...]
    fractions: tuple[ChartValue, ...]
    #: The full number of wedges.
    count: int
    truncated: bool = field(default=False, metadata=_omit(False))
    #: Each wedge's radius (1 unless the pie was given one; a donut's rings differ).
    radius: tuple[ChartValue, ...] = field(default=(), metadata=_omit(()))


@frozen
class Box:
    """One box of a box-and-whisker plot, in the value axis' data (E2B's names)."""

    #: Its tick's name, or its position.
    label: ChartValue
    #: The ends of the whiskers.
    min: ChartValue
    first_quartile: ChartValue
    median: ChartValue
    third_quartile: ChartValue
    max: ChartValue
    #: The points drawn beyond the whiskers (fliers).
    outliers: tuple[ChartValue, ...] = ()
    #: The full number of outliers, when they were cut.
    outlier_count: int | None = field(default=None, metadata=_omit(None))


@frozen(kw_only=True)
class BoxAndWhiskerSeries:
    """The boxes of an Axes' box-and-whisker plots (Axes.boxplot, pandas'), by position."""

    type: ClassVar[Literal["box_and_whisker"]] = "box_and_whisker"
    label: str
    #: "horizontal": the boxes lie along y and their values run along x.
    orientation: Literal["horizontal"] | None = field(default=None, metadata=_omit(None))
    boxes: tuple[Box, ...]
    #: The full number of boxes.
    count: int
    truncated: bool = field(default=False, metadata=_omit(False))


Series = (LineSeries | ScatterSeries | BarSeries | HistogramSeries | PieSeries
          | BoxAndWhiskerSeries)


@frozen
class ChartAxes:
    """One Axes of a figure: what it shows, its two axes and its series."""

    type: AxesKind
    title: str
    x: Axis
    y: Axis
    series: tuple[Series, ...]
    #: The Axes' full number of series.
    series_count: int
    truncated: bool = field(default=False, metadata=_omit(False))
    #: "polar", "3d" (absent: rectilinear).
    projection: str | None = field(default=None, metadata=_omit(None))
    #: The artists not read, by class name.
    not_read: tuple[str, ...] = field(default=(), metadata=_omit(()))


@frozen
class Chart:
    """A matplotlib Figure's data (application/vnd.jupyter-ci.chart+json)."""

    version: int
    #: The figure's suptitle, or "".
    title: str
    axes: tuple[ChartAxes, ...]
    #: The figure's full number of Axes, when some were left out.
    axes_count: int | None = field(default=None, metadata=_omit(None))
    truncated: bool = field(default=False, metadata=_omit(False))


@frozen
class TableField:
    """A column as pandas' table schema describes it; `more` holds pandas' other keys."""

    name: FieldName
    type: str
    #: What pandas adds for some types (constraints, ordered, tz, freq, extDtype).
    more: dict[str, object] = field(default_factory=dict, metadata={FLATTEN: True})


@frozen
class TableSchema:
    """The Frictionless table schema pandas writes (`DataFrame.to_json(orient="table")`)."""

    fields: tuple[TableField, ...]
    #: The index' columns, when its values are unique.
    primaryKey: tuple[FieldName, ...] | None = field(default=None, metadata=_omit(None))
    pandas_version: str | None = field(default=None, metadata=_omit(None))


@frozen
class Table:
    """A DataFrame's first rows (application/vnd.dataresource+json), and its full size."""

    schema: TableSchema
    #: One object per row: each field's value as pandas writes it to JSON.
    data: tuple[dict[str, object], ...]
    total_rows: int
    total_columns: int
    truncated: bool = field(default=False, metadata=_omit(False))
