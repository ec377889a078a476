"""Structured results: a display carries its data as JSON beside its picture.

Installed in every kernel that `%load_ext jupyter_ci` loads, and in every REST session's
kernel (install.install). All of it is data, never HTML or script; frontends that know
neither type show the PNG or the HTML table as before.

Both are declared once as wire classes (jupyter_ci/wire/charts.py: `Chart`, `Table`), which
a client can read them back into with `wire.codec.decode`.

`application/vnd.jupyter-ci.chart+json`, beside the PNG of a matplotlib Figure::

    {"version": 1, "title": str,                      # the figure's suptitle, or ""
     "axes": [{"type": "line" | "scatter" | "bar" | "histogram" | "pie" | "box_and_whisker"
                       | "mixed" | "empty",
               "title": str,
               "x": Axis, "y": Axis,
               "series": [Series, ...], "series_count": int, "truncated"?: true,
               "projection"?: str,                   # "polar", "3d" (absent: rectilinear)
               "not_read"?: [str, ...]}, ...],       # artists not read, by class name
     "axes_count"?: int, "truncated"?: true}         # when Axes were left out
    Axis   = {"label": str, "scale": "linear" | "log" | "symlog" | "logit" | ...,
              "limits": [lo, hi], "kind"?: "category" | "date",
              "categories"?: [str, ...],             # the tick labels of named ticks
              "unit"?: str,                          # "s" of "Time (s)", "kg" of "Mass [kg]"
              "ticks"?: [number | date, ...],        # the major ticks within the limits
              "tick_labels"?: [str, ...]}            # each tick's label as drawn
    Series = {"type": "line" | "scatter", "label": str,
              "points": [[x, y], ...], "count": int, "truncated"?: true}
           | {"type": "bar", "label": str, "orientation"?: "horizontal",
              "labels": [str | number, ...], "heights": [number, ...], "count": int, ...}
           | {"type": "histogram", "label": str, "edges": [n + 1 numbers],
              "heights": [n numbers], "count": int, ...}
           | {"type": "pie", "label": "", "labels": [str, ...], "fractions": [0..1, ...],
              "radius": [number, ...], "count": int, ...}   # radius: each wedge's
           | {"type": "box_and_whisker", "label": "", "orientation"?: "horizontal",
              "boxes": [{"label": str | number, "min": n, "first_quartile": n, "median": n,
                         "third_quartile": n, "max": n, "outliers": [n, ...],
                         "outlier_count"?: int}, ...], "count": int, ...}

An axis is a "category" one when its ticks are named (string data, `set_xticks(ticks,
labels)`, `bar(tick_label=...)`, pandas' bar plots): a value at a named tick is its name. On a
"date" axis (matplotlib's dates, pandas' periods) values are ISO 8601 strings. Other values
are numbers (12 significant digits); NaN and infinities are null. Ticks are numbers on a
category axis too (their names are its `tick_labels`). A box's `min` and `max` are its
whiskers' ends (boxes.py finds matplotlib's and pandas' box plots by their artists).
E2B's chart fields go by the same names (`x_unit` is `x.unit`, see wire/charts.py).

Bounds (charts.py): 16 Axes, 20 series per Axes, 500 points per series and 5000 per figure
(each series keeps at least 20); lines and scatters are sampled evenly (first and last
kept); bars, boxes, a box's outliers and an axis' ticks are cut after the first. `count`
is always the full number, `truncated` says a list was cut.

`application/vnd.dataresource+json`, beside a pandas DataFrame's (or Series') HTML: what
`DataFrame.to_json(orient="table")` writes (Frictionless table schema), plus totals::

    {"schema": {"fields": [{"name": str, "type": str, ...}, ...],
                "primaryKey"?: [str, ...], "pandas_version": str},
     "data": [{field: value, ...}, ...],
     "total_rows": int, "total_columns": int, "truncated"?: true}

Bounds (tables.py): the first 1000 rows and 100 columns, and fewer rows when their JSON passes
256 KiB. Column MultiIndex levels are joined with " / "; a frame with duplicate column names
(which rows of JSON objects cannot hold) gets no table.

`Image.show()` of Pillow displays the image (image/png) as an output of the running cell.
"""
