"""The chart and table JSON as wire classes: what the kernel writes, a client reads back."""

from __future__ import annotations

import json

import matplotlib
import pandas as pd
import pytest

from jupyter_ci.kernel.structured import install
from jupyter_ci.wire.charts import BarSeries, Chart, HistogramSeries, LineSeries, PieSeries, Table
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
