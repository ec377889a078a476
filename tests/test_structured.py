"""Structured results in a notebook kernel (`%load_ext jupyter_ci`): charts and tables as data."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.fakellm import FakeLLM, Turn
from tests.kernelrun import Execution, Kernel
from tests.nbrun import clean_env, openai_env

CHART = "application/vnd.jupyter-ci.chart+json"
TABLE = "application/vnd.dataresource+json"

FIGURE = """\
import matplotlib.pyplot as plt
fig, (line, bars, dots) = plt.subplots(1, 3)
fig.suptitle("Shop")
line.plot([1, 2, 3, 4], [10, 100, 1000, 10000], label="visits")
line.set(title="Growth", xlabel="week", ylabel="visits", yscale="log")
bars.bar(["north", "south", "east"], [17, 42, 23], label="sales")
bars.set_ylabel("units")
dots.scatter([0.5, 1.5, 2.5], [3, 1, 2]);
"""


@pytest.fixture(scope="module")
def kernel(session_fake: FakeLLM, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Kernel, list[str]]]:
    """A kernel with the extension loaded; what was imported then, and if charts are read."""
    started = Kernel(openai_env(session_fake), str(tmp_path_factory.mktemp("structured")))
    assert started.execute("%load_ext jupyter_ci").reply["content"]["status"] == "ok"
    loaded = started.execute(
        "import sys; print([m for m in ('matplotlib', 'pandas', 'PIL.ImageShow', "
        "'jupyter_ci.wire.charts', 'jupyter_ci.kernel.structured.charts') if m in "
        f"sys.modules], {CHART!r} in get_ipython().display_formatter.formatters)")
    yield started, stdout(loaded)
    started.close()


def stdout(run: Execution) -> list[str]:
    return [line for m in run.of_type("stream") for line in m["content"]["text"].splitlines()]


def displays(run: Execution) -> list[dict[str, Any]]:
    """Return the data of each display and result of a run, in order."""
    assert run.reply["content"]["status"] == "ok", run.reply["content"]
    return [m["content"]["data"] for m in run.of_type("display_data", "execute_result")]


def check_figure(chart: dict[str, Any]) -> None:
    """Assert the chart JSON of FIGURE says what was drawn."""
    assert chart["version"] == 1 and chart["title"] == "Shop"
    line, bars, dots = chart["axes"]
    assert (line["type"], line["title"]) == ("line", "Growth")
    assert line["x"]["label"] == "week" and line["x"]["scale"] == "linear"
    assert (line["y"]["label"], line["y"]["scale"]) == ("visits", "log")
    assert line["series"] == [{"type": "line", "label": "visits", "count": 4,
                               "points": [[1, 10], [2, 100], [3, 1000], [4, 10000]]}]
    assert bars["type"] == "bar" and bars["x"]["categories"] == ["north", "south", "east"]
    assert bars["series"][0]["labels"] == ["north", "south", "east"]
    assert bars["series"][0]["heights"] == [17, 42, 23]
    assert bars["series"][0]["label"] == "sales" and bars["y"]["label"] == "units"
    assert dots["type"] == "scatter"
    assert dots["series"][0]["points"] == [[0.5, 3], [1.5, 1], [2.5, 2]]


def test_loading_the_extension_hooks_charts_without_importing_their_libraries(
        kernel: tuple[Kernel, list[str]]) -> None:
    assert kernel[1] == ["[] True"]


def test_a_figure_comes_with_its_data_in_the_same_display_as_its_png(
        kernel: tuple[Kernel, list[str]]) -> None:
    [shown] = displays(kernel[0].execute(FIGURE))
    assert "image/png" in shown
    check_figure(shown[CHART])


def test_histograms_pies_pandas_plots_and_long_lines_are_read_and_bounded(
        kernel: tuple[Kernel, list[str]]) -> None:
    code = ("import matplotlib.pyplot as plt, numpy as np, pandas as pd\n"
            "fig, (h, p, long, named, days) = plt.subplots(1, 5)\n"
            "h.hist([1, 2, 2, 3, 3, 3], bins=[1, 2, 3, 4])\n"
            "p.pie([1, 3], labels=['tea', 'coffee'])\n"
            "long.plot(np.arange(100_000), np.arange(100_000) * 2.0)\n"
            "pd.Series([5, 7], index=['cats', 'dogs']).plot.bar(ax=named)\n"
            "pd.Series([1.5, 2], index=pd.date_range('2024-03-01', periods=2)).plot(ax=days);\n")
    [shown] = displays(kernel[0].execute(code))
    hist, pie, long, named, days = shown[CHART]["axes"]
    assert named["series"][0]["labels"] == ["cats", "dogs"]
    assert named["series"][0]["heights"] == [5, 7]
    assert days["x"]["kind"] == "date"
    assert days["series"][0]["points"] == [["2024-03-01", 1.5], ["2024-03-02", 2]]
    assert hist["series"][0] == {"type": "histogram", "label": "", "edges": [1, 2, 3, 4],
                                 "heights": [1, 2, 3], "count": 3}
    assert pie["series"][0]["labels"] == ["tea", "coffee"]
    assert pie["series"][0]["fractions"] == [0.25, 0.75]
    series = long["series"][0]
    assert series["count"] == 100_000 and series["truncated"] is True
    assert 20 <= len(series["points"]) <= 500
    assert series["points"][0] == [0, 0] and series["points"][-1] == [99_999, 199_998]


def test_a_dataframe_comes_with_its_rows_as_a_table(kernel: tuple[Kernel, list[str]]) -> None:
    code = ("import pandas as pd\n"
            "pd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3.5, None],\n"
            "              'day': pd.to_datetime(['2024-01-01', '2024-01-02'])})")
    [shown] = displays(kernel[0].execute(code))
    assert "text/html" in shown
    table = shown[TABLE]
    fields = {f["name"]: f["type"] for f in table["schema"]["fields"]}
    assert fields == {"index": "integer", "city": "string", "temp": "number",
                      "day": "datetime"}
    assert [(r["city"], r["temp"]) for r in table["data"]] == [("Oslo", 3.5), ("Lima", None)]
    assert table["data"][0]["day"].startswith("2024-01-01")
    assert table["total_rows"] == 2 and "truncated" not in table


def test_a_big_dataframe_keeps_its_first_rows_and_says_how_many_it_has(
        kernel: tuple[Kernel, list[str]]) -> None:
    code = ("import pandas as pd\n"
            "pd.DataFrame({'n': range(50_000), 'text': ['x' * 400] * 50_000})")
    [shown] = displays(kernel[0].execute(code))
    table = shown[TABLE]
    assert table["total_rows"] == 50_000 and table["truncated"] is True
    assert 0 < len(table["data"]) <= 1000 and table["data"][0]["n"] == 0
    assert len(json.dumps(table)) <= 256 * 1024


def test_image_show_displays_the_image_as_png(kernel: tuple[Kernel, list[str]]) -> None:
    run = kernel[0].execute("from PIL import Image\nImage.new('RGB', (8, 6), 'red').show()")
    [shown] = displays(run)
    image = Image.open(io.BytesIO(base64.b64decode(shown["image/png"])))
    assert image.size == (8, 6) and image.getpixel((0, 0)) == (255, 0, 0)


def test_the_model_reads_a_charts_numbers(kernel: tuple[Kernel, list[str]],
                                          session_fake: FakeLLM) -> None:
    session_fake.reset()
    session_fake.push(Turn("", tool_calls=[("run_python", {"code": FIGURE + "plt.show()"})]),
                      Turn("South sold most."))
    run = kernel[0].execute("%%ask\nWhich region sold most?")
    assert run.reply["content"]["status"] == "ok"
    told = json.dumps(session_fake.requests[1].messages)
    assert "south=42" in told and "north=17" in told and "east=23" in told
    assert "(4, 1e+04)" in told and "'visits' (log" in told


def test_a_figure_drawn_before_loading_is_read_too(tmp_path: Path) -> None:
    started = Kernel(clean_env(), str(tmp_path))
    try:
        started.execute(FIGURE)
        started.execute("%load_ext jupyter_ci")
        [shown] = displays(started.execute("fig"))
        check_figure(shown[CHART])
    finally:
        started.close()
