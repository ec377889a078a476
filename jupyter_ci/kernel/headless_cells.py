"""The code cells of the notebook a headless runner executes, for the edit tool."""

from __future__ import annotations

import json
from pathlib import Path

from jupyter_ci.agent.approval import NotebookCell
from jupyter_ci.kernel.protocol import Raw, as_object
from jupyter_ci.kernel.record import MAX_NOTEBOOK_BYTES, notebook_candidates
from jupyter_ci.wire.names import METADATA_KEY

#: Cells the edit tool may name, at most.
MAX_CELLS = 100


def headless_cells(ask_source: str, cwd: Path) -> list[NotebookCell]:
    """Return the user's code cells of the notebook holding this ask cell, from disk.

    Headless runners send only each cell's source: the notebook is found as a reused answer
    is (record.notebook_candidates), the one with a cell of exactly this source. Edits
    proposed there are listed in the answer, never applied (no one reviews them).
    """
    for path in notebook_candidates(cwd):
        cells = _cells(path)
        if any(_source(cell) == ask_source for cell in cells):
            return [NotebookCell(str(cell.get("id", "")), _source(cell)) for cell in cells
                    if _is_users(cell)][:MAX_CELLS]
    return []


def _cells(path: Path) -> list[Raw]:
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return []
        found = json.loads(path.read_bytes()).get("cells", [])
    except (OSError, ValueError, AttributeError):
        return []  # an unreadable notebook is simply not this one
    return [cell for cell in found if isinstance(cell, dict)] if isinstance(found, list) else []


def _source(cell: Raw) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _is_users(cell: Raw) -> bool:
    """A code cell with an id the user wrote: not an ask, not a step an ask generated."""
    record = as_object(cell.get("metadata")).get(METADATA_KEY)
    generated = isinstance(record, dict) and "step" in record
    ask = _source(cell).lstrip().startswith(("%%ask", "%ask"))
    return (cell.get("cell_type") == "code" and isinstance(cell.get("id"), str)
            and not generated and not ask)
