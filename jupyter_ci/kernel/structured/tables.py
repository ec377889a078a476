"""A pandas DataFrame (or Series) as a bounded wire.charts.Table (schema: __init__.py).

Imported when a frame is first displayed (install.py), not by `%load_ext jupyter_ci`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from jupyter_ci.wire.charts import Table, TableSchema
from jupyter_ci.wire.codec import decode

log = logging.getLogger(__name__)

#: Rows and columns kept of a table, and the most bytes of JSON its rows may take.
MAX_ROWS = 1_000
MAX_COLUMNS = 100
MAX_BYTES = 256 * 1024


def frame_table(frame: Any) -> Table | None:
    """Return a DataFrame's first rows as a table, or None when it cannot be."""
    try:
        return _table(frame)
    except Exception:  # the table stays shown as HTML: never break a display
        log.debug("jupyter-ci: could not write a table's data", exc_info=True)
        return None


def series_table(series: Any) -> Table | None:
    """Return a Series as a one-column table."""
    try:
        frame = series.to_frame(name=series.name if series.name is not None else "value")
    except Exception:
        return None
    return frame_table(frame)


def _table(frame: Any) -> Table | None:
    rows, columns = frame.shape
    if not frame.columns.is_unique:
        return None  # rows of JSON objects would keep one of each name: not the table
    part = frame.iloc[:MAX_ROWS, :MAX_COLUMNS]
    if part.columns.nlevels > 1:  # table schema has flat field names
        part = part.set_axis([" / ".join(map(str, c)) for c in part.columns], axis=1)
    while True:
        text = part.to_json(orient="table", date_format="iso", default_handler=str)
        if len(text) <= MAX_BYTES or len(part) == 0:
            break
        part = part.iloc[: len(part) // 2]  # rows with long values: fewer of them
    if len(text) > MAX_BYTES:
        return None  # its schema alone is too big
    written = json.loads(text)
    # The schema is checked (a key pandas may add one day refuses the table, rather than
    # being dropped unseen); the rows are pandas' own JSON, kept as they are.
    return Table(schema=decode(TableSchema, written["schema"]), data=tuple(written["data"]),
                 total_rows=rows, total_columns=columns,
                 truncated=len(part) < rows or part.shape[1] < columns)
