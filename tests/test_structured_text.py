"""What the model reads of a chart's data: its numbers, in a few bounded lines."""

from __future__ import annotations

from typing import Any

from jupyter_ci.agent.chart_text import CHART_MIME, MAX_CHARS, chart_text
from jupyter_ci.agent.feedback import format_result, tool_result
from jupyter_ci.agent.types import CodeResult

BARS = {"version": 1, "title": "Shop", "axes": [{
    "type": "bar", "title": "Sales", "series_count": 1,
    "x": {"label": "region", "scale": "linear", "limits": [-0.5, 2.5], "kind": "category",
          "categories": ["north", "south", "east"]},
    "y": {"label": "units", "scale": "log", "limits": [1, 50]},
    "series": [{"type": "bar", "label": "2024", "labels": ["north", "south", "east"],
                "heights": [17, 42.25, 23], "count": 3}]}]}


def figure_output(chart: Any) -> dict[str, Any]:
    return {"output_type": "display_data", "metadata": {},
            "data": {"text/plain": "<Figure size 640x480 with 1 Axes>", "image/png": "iVBOR",
                     CHART_MIME: chart}}


def test_a_chart_output_tells_the_model_its_numbers() -> None:
    text = format_result(CodeResult("ok", [figure_output(BARS)]), 30, 20_000)
    assert text.splitlines() == [
        "[image/png image shown to the user]",
        "[Chart data: Shop]",
        "Axes 1: bar chart 'Sales'; x: 'region' (categories: north, south, east); "
        "y: 'units' (log, 1 to 50)",
        "- bar '2024' (3 bars): north=17, south=42.25, east=23"]


def test_a_charts_text_is_redacted_like_the_rest() -> None:
    secret = {**BARS, "title": "key sk-live-123"}
    result = tool_result(CodeResult("ok", [figure_output(secret)]), 30, 20_000,
                         redact=lambda text: text.replace("sk-live-123", "[redacted]"))
    assert "sk-live-123" not in result.text and "[redacted]" in result.text


def test_a_big_chart_is_told_in_a_bounded_text() -> None:
    points = [[i, i * 2.5] for i in range(10_000)]
    series = [{"type": "line", "label": "s" * 500, "points": points, "count": 10_000}] * 50
    axes = [{"type": "line", "title": "t" * 500, "x": {}, "y": {}, "series": series,
             "series_count": 80}] * 30
    text = chart_text({"version": 1, "axes": axes, "truncated": True})
    assert len(text) <= MAX_CHARS
    assert "(0, 0), (1, 2.5), (2, 5), (3, 7.5), …, (9997, 2.499e+04)" in text
    assert "y from 0 to 2.5e+04" in text and "… and 74 more series" in text
    assert text.endswith("more lines of chart data not shown]")
    short = chart_text({"axes": [{"type": "pie"}] * 8})
    assert short.endswith("Axes 6: pie chart; x: ?; y: ?\n[… 2 more Axes not described]")


def test_a_chart_of_any_shape_is_told_without_failing() -> None:
    odd: list[Any] = [
        "x", None, {"axes": "no"}, {"axes": [None, {"series": "no", "x": 5}]},
        {"axes": [{"series": [{"points": [[1], "a", None, [None, "b"]]}, None,
                              {"type": "histogram", "edges": [], "heights": "no"},
                              {"type": "pie", "labels": [1, {}], "fractions": ["x"]},
                              {"heights": [True], "labels": None}]}]}]
    texts = [chart_text(chart) for chart in odd]
    assert texts[:2] == ["[chart data unreadable]"] * 2
    assert all(text.startswith(("[Chart data", "[chart data")) for text in texts)


def test_a_box_plot_is_told_as_each_boxs_five_numbers_and_outliers() -> None:
    boxes = {"version": 1, "title": "", "axes": [{
        "type": "box_and_whisker", "title": "Scores", "series_count": 1,
        "x": {"label": "Class", "scale": "linear", "limits": [0.5, 2.5], "kind": "category",
              "categories": ["A", "B"], "ticks": [1, 2], "tick_labels": ["A", "B"]},
        "y": {"label": "Score (pts)", "scale": "linear", "limits": [70, 100], "unit": "pts"},
        "series": [{"type": "box_and_whisker", "label": "", "count": 2, "boxes": [
            {"label": "A", "min": 78, "first_quartile": 85, "median": 88,
             "third_quartile": 90, "max": 92, "outliers": []},
            {"label": "B", "min": 84, "first_quartile": 84.75, "median": 88,
             "third_quartile": 90.5, "max": 95, "outliers": [76]}]}]}]}
    assert chart_text(boxes).splitlines()[2] == (
        "- box_and_whisker (2 boxes): A=78/85/88/90/92; B=84/84.75/88/90.5/95 outliers 76 "
        "(min/q1/median/q3/max)")
