"""A notebook as Jupyter's collaboration model holds it on the server (jupyter-collaboration).

With jupyter-collaboration loaded (its server part, `jupyter_server_ydoc`), each notebook in
use has one shared document in the server: a pycrdt `YNotebook` that every JupyterLab page of
that notebook syncs with, and that the server saves to the file a second after it changes.
The notebook door writes an agent's cells there, so they need no open page: they are in the
file after the save, and a page that has the notebook open shows each change as it happens.

Cells are addressed by id (stable while others are inserted) or by index. What an agent
wrote or ran is marked in the cell's metadata (`jupyter_ci.external`, `jupyter_ci.ran_by`),
and its trust is withdrawn, so the page renders its outputs as it does a generated cell's.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from typing import Any

from jupyter_core.utils import ensure_async
from tornado import web

from jupyter_ci.agent.outputs import OutputEvent, OutputList
from jupyter_ci.server.sessions.errors import SessionError
from jupyter_ci.wire.names import METADATA_KEY
from jupyter_ci.wire.nbformat import NbOutput as Output

#: The name jupyter-collaboration's server extension is loaded under.
EXTENSION = "jupyter_server_ydoc"
#: Seconds between two writes of a run's outputs into its cell (a flood of prints is one
#: change per interval for every page, not one per print).
WRITE_S = 0.05
#: Who changed a cell, in its metadata: the MCP door (the only one today).
AGENT = "mcp"


class NoSuchNotebook(SessionError):
    """The path names no notebook of the server's contents."""

    status, reason = 404, "no_such_notebook"


class NoSuchCell(SessionError):
    """The notebook has no cell with that id or index."""

    status, reason = 404, "no_such_cell"


class NoCollaboration(SessionError):
    """jupyter-collaboration is not loaded in this server."""

    status, reason = 409, "collaboration_not_loaded"


def collaboration(server_app: Any) -> Any | None:
    """Return jupyter-collaboration's server extension, or None when it is not loaded or
    pages do not use it (`YDocExtension.disable_rtc`: their notebooks are not shared)."""
    manager = getattr(server_app, "extension_manager", None)
    apps = manager.extension_apps.get(EXTENSION, set()) if manager is not None else set()
    return next((app for app in apps if hasattr(app, "get_document") and
                 not getattr(app, "disable_rtc", False)), None)


def needs_collaboration(what: str) -> NoCollaboration:
    """Return the error for a door that needs the server's shared documents."""
    return NoCollaboration(
        f"{what} needs Jupyter's real-time collaboration in the server "
        "(jupyter-collaboration 5, with JupyterLab 4.6): pip install 'jupyter-ci[collaboration]' "
        "and restart the server; nothing changed.")


async def notebook_path(contents_manager: Any, path: str) -> str:
    """Return the server-relative path of the notebook at `path`; refuse anything else."""
    try:
        model = await ensure_async(contents_manager.get(path.strip("/"), content=False))
    except web.HTTPError as exc:  # missing, hidden, or outside the root: the manager says
        why = exc.log_message or exc.reason or exc.status_code
        raise NoSuchNotebook(f"There is no notebook {path!r} on this server ({why}); "
                             "list_notebooks lists the open ones.") from None
    if model.get("type") != "notebook":
        raise NoSuchNotebook(f"{path!r} is a {model.get('type')}, not a notebook.")
    return str(model["path"])


async def shared_notebook(ydoc_app: Any, path: str) -> Any:
    """Return the live shared document of the notebook (made from its file if none is open)."""
    doc = await ydoc_app.get_document(path=path, content_type="notebook", file_format="json",
                                      copy=False, create=True)
    if doc is None or not hasattr(doc, "ycells"):
        raise NoSuchNotebook(f"The server could not open {path!r} as a shared notebook.")
    return doc


def cell_index(doc: Any, cell: int | str) -> int:
    """Return the index of a cell given by id or index."""
    cells = doc.ycells
    if isinstance(cell, int):
        if -len(cells) <= cell < len(cells):
            return cell % len(cells)
        raise NoSuchCell(f"The notebook has {len(cells)} cells: there is no cell {cell}.")
    for index in range(len(cells)):
        if cells[index].get("id") == cell:
            return index
    raise NoSuchCell(f"The notebook has no cell with the id {cell!r} (read_notebook lists "
                     "each cell's id).")


def insert_cell(doc: Any, index: int | None, cell_type: str, source: str) -> tuple[int, str]:
    """Insert an agent's cell (at the end when `index` is None); return its index and id."""
    cells = doc.ycells
    at = len(cells) if index is None else max(0, min(index, len(cells)))
    cell: dict[str, Any] = {"cell_type": cell_type, "source": source, "id": uuid.uuid4().hex,
                            "metadata": {METADATA_KEY: {"external": AGENT}}}
    if cell_type == "code":
        cell.update(outputs=[], execution_count=None)
    with doc.ydoc.transaction():
        cells.insert(at, doc.create_ycell(cell))
    return at, str(cell["id"])


def edit_cell(doc: Any, index: int, source: str) -> None:
    """Replace a cell's source with an agent's, marking the cell as the agent's code."""
    with doc.ydoc.transaction():
        doc.set_cell(index, source=source)
        mark(doc, index, external=AGENT)


def mark(doc: Any, index: int, **marks: str) -> None:
    """Add jupyter-ci marks to a cell's metadata and take away its trust."""
    metadata = doc.ycells[index]["metadata"]
    current = metadata.get(METADATA_KEY)
    record = current.to_py() if hasattr(current, "to_py") else copy.deepcopy(current or {})
    metadata[METADATA_KEY] = {**(record if isinstance(record, dict) else {}), **marks}
    if "trusted" in metadata:
        del metadata["trusted"]


def cells_of(doc: Any) -> list[dict[str, Any]]:
    """Return the notebook's cells as nbformat dicts, each with its id (which the shared
    document gives every cell, even where the notebook's format has none)."""
    return [{**doc.get_cell(i), "id": doc.ycells[i].get("id")} for i in range(len(doc.ycells))]


def _youtput(output: Output) -> Any:
    """Make a shared-document output (a stream's text is shared text, as JupyterLab's)."""
    from pycrdt import Map, Text

    value: dict[str, Any] = copy.deepcopy(dict(output))
    if value.get("output_type") == "stream":
        text = value.get("text", "")
        value["text"] = Text(text if isinstance(text, str) else "".join(text))
    return Map(value)


class CellRun:
    """One run's state in its cell of the shared notebook: running, outputs, count, idle.

    Outputs are written as they come, at most once every WRITE_S, as the change from what
    the cell shows (a growing print rewrites only its last output). A cell the user deletes
    mid-run is left alone: the run goes on, unseen.
    """

    def __init__(self, doc: Any, cell_id: str) -> None:
        self.doc, self.cell_id = doc, cell_id
        self.written: list[Output] = []
        self.source: OutputList | None = None
        self._scheduled: asyncio.TimerHandle | None = None

    def _ycell(self) -> Any | None:
        try:
            return self.doc.ycells[cell_index(self.doc, self.cell_id)]
        except NoSuchCell:
            return None

    def start(self) -> None:
        """Show the cell as running, its earlier outputs cleared (as a run in the page does)."""
        ycell = self._ycell()
        if ycell is not None:
            with self.doc.ydoc.transaction():
                ycell["outputs"].clear()
                ycell["execution_count"] = None
                ycell["execution_state"] = "running"
        self.written = []

    def on_output(self, event: OutputEvent) -> None:
        """Take a change of the run's outputs; write it soon."""
        self.source = event.source
        if self._scheduled is None:
            self._scheduled = asyncio.get_running_loop().call_later(WRITE_S, self.flush)

    def flush(self) -> None:
        """Write the outputs as they stand, changing only what differs from the cell's."""
        self._scheduled = None
        outputs = self.source.merged() if self.source is not None else []
        ycell = self._ycell()
        if ycell is None:
            return
        same = 0
        while same < min(len(outputs), len(self.written)) and \
                outputs[same] == self.written[same]:
            same += 1
        youtputs = ycell["outputs"]
        with self.doc.ydoc.transaction():
            if same < len(youtputs):
                del youtputs[same:]
            youtputs.extend([_youtput(o) for o in outputs[same:]])
        self.written = copy.deepcopy(outputs)

    def end(self, outputs: list[Output], execution_count: int | None) -> None:
        """Write the run's final outputs and count; show the cell idle."""
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
        self.source = OutputList()
        self.source.outputs = list(outputs)
        self.flush()
        ycell = self._ycell()
        if ycell is not None:
            with self.doc.ydoc.transaction():
                ycell["execution_count"] = execution_count
                ycell["execution_state"] = "idle"
