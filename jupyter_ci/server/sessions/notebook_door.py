"""Agents' cells in the user's own notebooks, through the server's shared documents.

Reading, inserting, editing and running cells go through Jupyter's collaboration model
(shared_doc.py), so no page need be open: the notebook's kernel is the one Jupyter's sessions
give it (started, with the notebook's own kernelspec, when none runs, as opening it would),
its outputs are written into the cell as they come, and an open page shows it all live and
can stop the run with its interrupt button. Changes need the user's consent
(notebook_consent.py); before an agent's code runs, its kernel is marked as having run
model-written code, so no page renders that kernel's outputs as trusted until it restarts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from jupyter_core.utils import ensure_async

from jupyter_ci.server.sessions import shared_doc
from jupyter_ci.server.sessions.executor import KernelControl, KernelExecutor
from jupyter_ci.server.sessions.notebook_clients import NotebookClients
from jupyter_ci.server.sessions.notebook_consent import Consent
from jupyter_ci.server.sessions.notebook_run import (
    ANNOUNCE_S,
    MarkedClient,
    NoKernel,
    NotShown,
    kernel_of,
    quiet_request,
    reply_to,
    send,
)
from jupyter_ci.server.sessions.results import execute_result
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.names import METADATA_KEY
from jupyter_ci.wire.nbformat import NbOutput
from jupyter_ci.wire.notebooks import NotebookCell, NotebookCellChanged, NotebookCells


@dataclass
class NotebookDoor:
    """The server's parts the door uses, and the consent it asks."""

    server_app: Any
    consent: Consent
    #: Marks a kernel as having run model-written code (server/broker/model_code.py).
    mark_model_code: Callable[[str], None]

    async def _doc(self, path: str) -> tuple[str, Any]:
        """Return the notebook's server path and its live shared document."""
        ydoc_app = shared_doc.collaboration(self.server_app)
        if ydoc_app is None:
            raise shared_doc.needs_collaboration("Changing a notebook with no page open")
        real = await shared_doc.notebook_path(self.server_app.contents_manager, path)
        return real, await shared_doc.shared_notebook(ydoc_app, real)

    async def read(self, path: str) -> NotebookCells:
        """Return the notebook's cells: live from the shared document, else from the file."""
        if shared_doc.collaboration(self.server_app) is None:
            real = await shared_doc.notebook_path(self.server_app.contents_manager, path)
            model = await ensure_async(self.server_app.contents_manager.get(real))
            cells = model["content"]["cells"]
            return NotebookCells(real, tuple(_cell(c) for c in cells), False)
        real, doc = await self._doc(path)
        return NotebookCells(real, tuple(_cell(c) for c in shared_doc.cells_of(doc)), True)

    async def insert(self, path: str, source: str, index: int | None, cell_type: str
                     ) -> NotebookCellChanged:
        """Insert an agent's cell; return where it is."""
        real, doc = await self._doc(path)
        self.consent.check(real)
        at, cell_id = shared_doc.insert_cell(doc, index, cell_type, source)
        return NotebookCellChanged(real, at, cell_id)

    async def edit(self, path: str, cell: int | str, source: str) -> NotebookCellChanged:
        """Replace a cell's source with an agent's; return where it is."""
        real, doc = await self._doc(path)
        self.consent.check(real)
        index = shared_doc.cell_index(doc, cell)
        shared_doc.edit_cell(doc, index, source)
        return NotebookCellChanged(real, index, str(doc.ycells[index]["id"]))

    async def run(self, path: str, code: str | None, cell: int | str | None, timeout: float
                  ) -> dict[str, object]:
        """Run new code as a cell at the end, or a cell as it is; return the run's result."""
        real, doc = await self._doc(path)
        self.consent.check(real)
        cell_id = None if cell is None else _code_cell(doc, cell, real)
        kernel_id = await self._kernel(real, doc)
        async with NotebookClients.of(self.server_app.kernel_manager).use(kernel_id) as client:
            await _idle(client, real)
            # Found again by id: the user may have moved cells while the kernel was busy.
            if cell_id is None:
                index, cell_id = shared_doc.insert_cell(doc, None, "code", code or "")
            else:
                index = shared_doc.cell_index(doc, cell_id)
            shared_doc.mark(doc, index, ran_by=shared_doc.AGENT)
            source = str(doc.ycells[index]["source"])
            self.mark_model_code(kernel_id)  # before its first line runs
            result = await self._execute(client, kernel_id, doc, cell_id, source, timeout)
        where = shared_doc.cell_index(doc, cell_id) if _has(doc, cell_id) else index
        return {**encode(execute_result(result)), "path": real, "cell_id": cell_id,
                "index": where, "kernel_id": kernel_id}

    async def _execute(self, client: Any, kernel_id: str, doc: Any, cell_id: str, source: str,
                       timeout: float) -> Any:
        """Run one cell's source in its kernel, its outputs written into the cell live."""
        manager = self.server_app.kernel_manager

        async def interrupt() -> None:
            await ensure_async(manager.interrupt_kernel(kernel_id))

        async def is_alive() -> bool:
            return kernel_id in manager and bool(await ensure_async(
                manager.get_kernel(kernel_id).is_alive()))

        running = shared_doc.CellRun(doc, cell_id)
        running.start()
        marked = MarkedClient(client, {"cellId": cell_id, "jupyter_ci_agent": shared_doc.AGENT})
        result = await KernelExecutor(marked, KernelControl(interrupt, is_alive)).run(
            source, timeout, on_output=running.on_output)
        running.end(list(result.outputs), result.execution_count)
        return result

    async def _kernel(self, path: str, doc: Any) -> str:
        """Return the notebook's kernel; start one, as opening the notebook would, if none."""
        try:
            return await kernel_of(self.server_app.session_manager, path)
        except NoKernel:
            pass
        specs = self.server_app.kernel_spec_manager
        wanted = _kernelspec_name(doc)
        names = await ensure_async(specs.find_kernel_specs())
        name = wanted if wanted in names else self.server_app.kernel_manager.default_kernel_name
        model = await ensure_async(self.server_app.session_manager.create_session(
            path=path, name=path.rsplit("/", 1)[-1], type="notebook", kernel_name=name))
        return str(model["kernel"]["id"])


async def _idle(client: Any, path: str) -> None:
    """Wait until the kernel has run what it was given before (the user's own cells)."""
    # A timeout counted from the send would otherwise interrupt the user's running cell.
    reply = await reply_to(client, send(client, quiet_request("0"), {}), ANNOUNCE_S)
    if reply is None:
        raise NotShown(f"The kernel of {path} is still busy after {ANNOUNCE_S:g} s (running "
                       "the user's cells?); nothing ran: try again once it is idle.")


def _code_cell(doc: Any, cell: int | str, path: str) -> str:
    """Return the id of a code cell given by id or index; refuse any other cell."""
    ycell = doc.ycells[shared_doc.cell_index(doc, cell)]
    if ycell.get("cell_type") != "code":
        raise shared_doc.NoSuchCell(f"Cell {cell!r} of {path} is a {ycell.get('cell_type')} "
                                    "cell: only code cells run.")
    return str(ycell["id"])


def _kernelspec_name(doc: Any) -> str | None:
    """Return the kernelspec the notebook's metadata names, if any."""
    from pycrdt import Map

    meta = doc.ydoc.get("meta", type=Map).to_py()
    spec = ((meta or {}).get("metadata") or {}).get("kernelspec") or {}
    name = spec.get("name") if isinstance(spec, dict) else None
    return name if isinstance(name, str) and name else None


def _has(doc: Any, cell_id: str) -> bool:
    try:
        shared_doc.cell_index(doc, cell_id)
    except shared_doc.NoSuchCell:
        return False
    return True


def _cell(cell: dict[str, Any]) -> NotebookCell:
    """Read one nbformat cell (anyone's notebook: leniently) into the door's reply."""
    source, count = cell.get("source", ""), cell.get("execution_count")
    marks = (cell.get("metadata") or {}).get(METADATA_KEY) or {}
    marks = marks if isinstance(marks, dict) else {}
    external, ran_by = marks.get("external"), marks.get("ran_by")
    return NotebookCell(
        str(cell.get("id") or ""), str(cell.get("cell_type", "code")),
        "".join(source) if isinstance(source, list) else str(source),
        count if isinstance(count, int) and not isinstance(count, bool) else None,
        # Written as they are (an nbformat output's shape is Jupyter's; wire/nbformat.py).
        tuple(cast("NbOutput", o) for o in cell.get("outputs", []) if isinstance(o, dict)),
        external if isinstance(external, str) else None,
        ran_by if isinstance(ran_by, str) else None)
