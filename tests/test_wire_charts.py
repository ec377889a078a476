"""The chart and table JSON as wire classes: what the kernel writes, a client reads back."""

from __future__ import annotations

import datetime
import json
from typing import Any

import matplotlib
import pandas as pd
import pytest

from jupyter_ci.kernel.structured import install
from jupyter_ci.wire.charts import (
    BarSeries,
    BoxAndWhiskerSeries,
    Chart,
    HistogramSeries,
    LineSeries,
    PieSeries,
    Table,
)
from jupyter_ci.wire.codec import WireError, decode, encode

matplotlib.use("Agg")
from matplotlib import pyplot as plt


def figure() -> object:
    fig, (line, bars, hist, pie) = plt.subplots(1, 4)
    fig.suptitle("Shop")
    line.plot([1, 2, 3], [10, 100, 1000], label="visits")
    line.set(yscale="log")
    bars.barh(["north", "south"], [17, 42])
    hist.hist([1, 2, 2, 3], bins=[1, 2, 3, 4])
    pie.pie([1, 3], labels=["tea", "coffee"])
    return fig


def test_a_charts_json_reads_back_as_its_wire_classes_and_writes_the_same_bytes() -> None:
    fig = figure()
    written = install.figure_chart(fig)
    plt.close("all")
    assert written is not None
    chart = decode(Chart, json.loads(json.dumps(written)))
    line, bars, hist, pie = (axes.series[0] for axes in chart.axes)
    assert isinstance(line, LineSeries) and line.points == ((1, 10), (2, 100), (3, 1000))
    assert chart.axes[0].y.scale == "log" and chart.title == "Shop"
    assert isinstance(bars, BarSeries) and bars.orientation == "horizontal"
    assert bars.labels == ("north", "south") and bars.heights == (17, 42)
    assert isinstance(hist, HistogramSeries) and hist.edges == (1, 2, 3, 4)
    assert isinstance(pie, PieSeries) and pie.fractions == (0.25, 0.75)
    assert json.dumps(encode(chart)) == json.dumps(written)
    # Left out while empty, as the kernel always wrote them.
    data = json.loads(json.dumps(written))
    assert "truncated" not in data and "kind" not in data["axes"][0]["x"]


def test_a_tables_json_reads_back_with_pandas_own_field_keys() -> None:
    frame = pd.DataFrame({"c": pd.Categorical(["x", "y"]), 3: [1.5, None]})
    written = install.frame_table(frame)
    assert written is not None
    table = decode(Table, json.loads(json.dumps(written)))
    assert [f.name for f in table.schema.fields] == ["index", "c", 3]
    assert table.schema.fields[1].more == {"constraints": {"enum": ["x", "y"]}, "ordered": False}
    assert table.data[1] == {"index": 1, "c": "y", "3": None} and table.total_rows == 2
    assert json.dumps(encode(table)) == json.dumps(written)


def test_a_chart_with_a_field_no_reader_knows_is_refused_naming_it() -> None:
    fig = figure()
    written = json.loads(json.dumps(install.figure_chart(fig)))
    plt.close("all")
    written["axes"][1]["series"][0]["colour"] = "red"
    with pytest.raises(WireError, match=r"axes\[1\]\.series\[0\]\.colour: unknown field"):
        decode(Chart, written)
    assert decode(Chart, written, lenient=True).axes[1].series[0] == decode(
        Chart, json.loads(json.dumps(install.figure_chart(figure())))).axes[1].series[0]
    plt.close("all")


#: E2B's own box-and-whisker case (python/tests/charts/test_box_and_whiskers.py).
SCORES = {"Class A": [85, 90, 78, 92, 88], "Class B": [95, 89, 76, 91, 84, 87],
          "Class C": [75, 82, 88, 79, 86]}


def boxes_of(**options: Any) -> tuple[Chart, Any]:
    """Draw SCORES as box plots; return the chart read back, and its JSON."""
    fig, ax = plt.subplots()
    ax.set(title="Exam Scores Distribution", xlabel="Class", ylabel="Score")
    ax.boxplot(list(SCORES.values()), tick_labels=list(SCORES), **options)
    written = json.loads(json.dumps(install.figure_chart(fig)))
    plt.close("all")
    return decode(Chart, written), written


def test_box_plots_read_as_e2bs_boxes_whatever_their_style() -> None:
    chart, written = boxes_of(patch_artist=True)
    [axes] = chart.axes
    [series] = axes.series
    assert axes.type == "box_and_whisker" and isinstance(series, BoxAndWhiskerSeries)
    boxes = series.boxes
    assert [b.label for b in boxes] == ["Class A", "Class B", "Class C"]
    assert [b.outliers for b in boxes] == [(), (76,), ()]
    assert [b.min for b in boxes] == [78, 84, 75]
    assert [b.first_quartile for b in boxes] == [85, 84.75, 79]
    assert [b.median for b in boxes] == [88, 88, 82]
    assert [b.third_quartile for b in boxes] == [90, 90.5, 86]
    assert [b.max for b in boxes] == [92, 95, 88]
    assert axes.not_read == () and axes.x.unit is None and axes.y.unit is None
    assert written["axes"][0]["series"][0]["boxes"][1] == {
        "label": "Class B", "min": 84, "first_quartile": 84.75, "median": 88,
        "third_quartile": 90.5, "max": 95, "outliers": [76]}
    # Lines instead of patches, notches, means (as markers or lines), sideways: the same.
    for options in ({}, {"notch": True, "showmeans": True, "meanline": True},
                    {"showmeans": True, "orientation": "horizontal"}):
        [other] = boxes_of(**options)[0].axes[0].series
        assert isinstance(other, BoxAndWhiskerSeries) and other.boxes == boxes, options
        assert other.orientation == options.get("orientation")
    # Short whiskers: the points beyond them are outliers, on both sides.
    [short] = boxes_of(whis=0.2)[0].axes[0].series
    assert isinstance(short, BoxAndWhiskerSeries)
    assert [b.outliers for b in short.boxes] == [(78, 92), (76, 95), (75, 88)]


def test_an_outline_without_whiskers_stays_a_line() -> None:
    fig, ax = plt.subplots()
    ax.plot([0, 1, 1, 0, 0], [0, 0, 1, 1, 0])
    ax.plot([0, 1], [0.5, 0.5])
    chart = decode(Chart, json.loads(json.dumps(install.figure_chart(fig))))
    plt.close("all")
    assert chart.axes[0].type == "line" and len(chart.axes[0].series) == 2


def test_axes_say_their_units_and_ticks_and_a_pie_each_wedges_radius() -> None:
    fig, (line, pie) = plt.subplots(1, 2)
    line.plot([datetime.date(2024, 1, 1) + datetime.timedelta(days=i) for i in range(60)],
              [i / 10 for i in range(60)])
    line.set(xlabel="Day (UTC)", ylabel="Mass [kg]", ylim=(0, 6))
    pie.pie([1, 3], radius=1.2)
    pie.pie([2, 2], radius=0.6)
    written = json.loads(json.dumps(install.figure_chart(fig)))
    plt.close("all")
    chart = decode(Chart, written)
    x, y = chart.axes[0].x, chart.axes[0].y
    assert (x.unit, y.unit) == ("UTC", "kg")
    assert x.ticks and all(isinstance(t, str) and datetime.date.fromisoformat(t)
                           for t in x.ticks)
    assert len(x.tick_labels) == len(x.ticks)
    assert y.ticks == (0, 1, 2, 3, 4, 5, 6) and y.tick_labels[:2] == ("0", "1")
    [wedges] = chart.axes[1].series
    assert isinstance(wedges, PieSeries) and wedges.radius == (1.2, 1.2, 0.6, 0.6)
    # A pie's axes have no ticks: their keys stay out, as before.
    assert set(written["axes"][1]["x"]) == {"label", "scale", "limits"}
