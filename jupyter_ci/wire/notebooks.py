"""The notebook door's bodies and replies: agents' cells in the user's own notebooks.

`/jupyter-ci/notebooks/...` (server/sessions/notebook_door.py) reads and changes the user's
notebooks through Jupyter's collaboration model (the server's shared documents), so no page
need be open. A cell is named by its id (stable while cells are inserted) or its index.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from jupyter_ci.wire.codec import OMIT_IF, SCHEMA
from jupyter_ci.wire.frozen import frozen
from jupyter_ci.wire.nbformat import NbOutput

_PATH = {"minLength": 1, "description": "The notebook's path, relative to Jupyter's root."}
_CELL = {"description": "A cell's id (as read_notebook gives it), or its index (0 is the "
         "first; -1 the last)."}
CellType = Literal["code", "markdown", "raw"]
#: Why agents may, or may not, change a notebook (NotebookConsent.why).
ConsentWhy = Literal["always", "never", "allowed", "opened", "not_opened", "not_allowed"]
#: What c.JupyterCI.agent_notebooks may be.
ConsentSetting = Literal["never", "allowed", "opened", "always"]


@frozen
class NotebookInsert:
    """POST /jupyter-ci/notebooks/cells: insert an agent's cell into a notebook."""

    path: str = field(metadata={SCHEMA: _PATH})
    source: str
    #: Where the cell goes (0: first); omitted: at the end.
    index: int | None = None
    cell_type: CellType = "code"


@frozen
class NotebookEdit:
    """PATCH /jupyter-ci/notebooks/cells: replace a cell's source with an agent's."""

    path: str = field(metadata={SCHEMA: _PATH})
    cell: int | str = field(metadata={SCHEMA: _CELL})
    source: str


@frozen
class NotebookRun:
    """POST /jupyter-ci/notebooks/run: run `code` as a new cell at the end, or a `cell`."""

    path: str = field(metadata={SCHEMA: _PATH})
    #: The code of a new code cell, appended to the notebook and run there.
    code: str | None = field(default=None, metadata={OMIT_IF: None})
    #: A cell of the notebook to run as it is (one of `code` and `cell`).
    cell: int | str | None = field(default=None, metadata={OMIT_IF: None, SCHEMA: _CELL})
    #: Seconds before the run is interrupted; 0 or null: none; omitted: c.JupyterCI.timeout.
    timeout: float | None = field(default=None, metadata={OMIT_IF: None})


@frozen
class NotebookOpened:
    """POST /jupyter-ci/notebooks/opened: the user opened this notebook in a page."""

    path: str = field(metadata={SCHEMA: _PATH})


@frozen
class NotebookConsentChange:
    """PUT /jupyter-ci/notebooks/consent: allow agents in one notebook for good, or not."""

    path: str = field(metadata={SCHEMA: _PATH})
    allow: bool


@frozen
class NotebookCell:
    """One cell as the notebook holds it now (unsaved changes of open pages included)."""

    id: str
    cell_type: str
    source: str
    #: Code cells only: their count and nbformat outputs.
    execution_count: int | None = None
    outputs: tuple[NbOutput, ...] = ()
    #: Who wrote the cell's code from outside the notebook ("mcp"), if anyone did.
    external: str | None = None
    #: Who ran the cell last, when it was not the notebook's user ("mcp").
    ran_by: str | None = None


@frozen
class NotebookCells:
    """GET /jupyter-ci/notebooks/cells: a notebook's cells."""

    path: str
    cells: tuple[NotebookCell, ...]
    #: True: read from the server's shared document (what open pages show, saved or not);
    #: false: from the file (the server has no real-time collaboration).
    live: bool


@frozen
class NotebookCellChanged:
    """The cell an insert or edit changed: where it is now."""

    path: str
    index: int
    id: str


@frozen
class NotebookConsent:
    """Whether agents may change a notebook (c.JupyterCI.agent_notebooks), and why."""

    path: str
    allowed: bool
    why: ConsentWhy
    setting: ConsentSetting


#: The bodies openapi.json names (scripts/gen_wire.py), with their own keywords.
NOTEBOOK_BODIES: dict[str, tuple[type, dict[str, object]]] = {
    "NotebookInsert": (NotebookInsert, {"additionalProperties": False}),
    "NotebookEdit": (NotebookEdit, {"additionalProperties": False}),
    "NotebookRun": (NotebookRun, {"additionalProperties": False, "oneOf": [
        {"required": ["code"]}, {"required": ["cell"]}],
        "description": "Exactly one of `code` and `cell` (else 400 `bad_field`)."}),
    "NotebookOpened": (NotebookOpened, {"additionalProperties": False}),
    "NotebookConsentChange": (NotebookConsentChange, {"additionalProperties": False}),
}
#: The replies openapi.json names.
NOTEBOOK_SCHEMAS: dict[str, type] = {
    "NotebookCells": NotebookCells, "NotebookCell": NotebookCell,
    "NotebookCellChanged": NotebookCellChanged, "NotebookConsent": NotebookConsent}
