"""What a session's runs leave: the API's result object, the history, the notebook."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from nbformat import v4

from jupyter_ci.agent.outputs import binary_size, cap_output, cut_note, json_size, output_size
from jupyter_ci.agent.types import CodeResult, RunStatus
from jupyter_ci.wire.names import METADATA_KEY
from jupyter_ci.wire.nbformat import CodeCell, DisplayData, HistoryCell, MarkdownCell, Notebook
from jupyter_ci.wire.rest import Execution, FileEntry
from jupyter_ci.wire.rest import RunStatus as ApiStatus

# nbformat is unannotated: these say what its constructors return.
_NEW_CELL: dict[str, Callable[..., dict[str, object]]] = {
    "code": v4.new_code_cell, "markdown": v4.new_markdown_cell}
_new_notebook: Callable[..., Notebook] = v4.new_notebook
#: Statuses of an execute as the API reports them (the executor's "died" is "dead" here).
API_STATUS: dict[RunStatus, ApiStatus] = {
    "ok": "ok", "error": "error", "timeout": "timeout", "interrupted": "error", "died": "dead"}


def execute_result(result: CodeResult) -> Execution:
    """Return the API's result of one run (its files are those `result` says it wrote)."""
    return Execution(API_STATUS[result.status], tuple(result.outputs), result.execution_count,
                     result.duration_s * 1000,
                     tuple(FileEntry(f.path, f.size, f.mime) for f in result.files),
                     result.files_cut)


def code_cell(code: str, result: CodeResult) -> CodeCell:
    """Record one execute in the history: the fields of its code cell."""
    # Made a v4 cell only on export: nbformat validates each cell it makes (about 1 ms, and
    # more per output), a cost no execute should pay on the event loop. The outputs are v4
    # already (OutputList, the one mapping of IOPub messages).
    return {"cell_type": "code", "source": code, "execution_count": result.execution_count,
            "outputs": list(result.outputs)}


def markdown_cell(text: str) -> MarkdownCell:
    """Record a piece of an ask in the history: the fields of its Markdown cell."""
    return {"cell_type": "markdown", "source": text}


@dataclass
class History:
    """The cells a session keeps for its notebook: each output capped, and all of them."""

    #: Bytes one output may keep (c.JupyterCI.session_history_output_bytes; 0: any).
    output_limit: int = 1024 * 1024
    #: Bytes the whole history may keep (c.JupyterCI.session_history_bytes; 0: any).
    limit: int = 32 * 1024 * 1024
    cells: list[HistoryCell] = field(default_factory=list)
    #: Bytes kept now, sources and outputs (as output_size counts them).
    size: int = 0
    #: The first cell that may still have outputs to drop.
    oldest: int = 0
    #: Bytes dropped so far from a cell (by index), as the note that is its first output says.
    dropped: dict[int, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.cells)

    def __iter__(self) -> Iterator[HistoryCell]:
        return iter(list(self.cells))

    def append(self, cell: HistoryCell) -> None:
        """Keep a cell, its outputs cut to the per-output cap; drop the oldest past the total."""
        if cell["cell_type"] == "code" and cell["outputs"]:
            keeps = (f"the session's notebook keeps at most {binary_size(self.output_limit)} "
                     "per output (c.JupyterCI.session_history_output_bytes)")
            cell = {**cell, "outputs": [cap_output(out, self.output_limit, keeps)
                                        for out in cell["outputs"]]}
        self.cells.append(cell)
        self.size += json_size(cell)
        if self.limit > 0:
            self._drop_oldest()

    def clear(self) -> None:
        """Forget every cell (the kernel restarted)."""
        self.cells, self.size, self.oldest, self.dropped = [], 0, 0, {}

    def _drop_oldest(self) -> None:
        """Drop outputs, oldest first, until the history fits; sources always stay."""
        while self.size > self.limit and self.oldest < len(self.cells):
            index, cell = self.oldest, self.cells[self.oldest]
            if cell["cell_type"] != "code":  # nothing to drop: a Markdown cell stays whole
                self.oldest += 1
                continue
            outputs = cell["outputs"]
            earlier = outputs[:1] if index in self.dropped else []
            end, freed = len(earlier), 0
            while end < len(outputs) and self.size - freed > self.limit:
                freed += output_size(outputs[end])
                end += 1
            if end == len(outputs):
                self.oldest += 1
            if end == len(earlier):
                continue
            self.dropped[index] = self.dropped.get(index, 0) + freed
            note = self._note(self.dropped[index])
            # A new cell, not a change to the old one: an export may be reading it.
            self.cells[index] = {**cell, "outputs": [note, *outputs[end:]]}
            self.size += output_size(note) - sum(map(output_size, earlier)) - freed

    def _note(self, dropped: int) -> DisplayData:
        """Stand for outputs dropped to keep the history within its limit."""
        keeps = (f"the session's notebook keeps at most {binary_size(self.limit)} "
                 "(c.JupyterCI.session_history_bytes); the oldest outputs go first")
        return {"output_type": "display_data", "data": {"text/plain": cut_note(dropped, keeps)},
                "metadata": {}}


def notebook(history: History, kernel_name: str, session_id: str, language: str = "python"
             ) -> Notebook:
    """Return a session's history as an nbformat v4 notebook (each cell's fields validated)."""
    cells = []
    for entry in list(history):
        # The outputs join after nbformat's check: they are v4 already (OutputList maps each
        # IOPub message once), and jsonschema's check of a MiB of text held the GIL, and so
        # the server's loop, for ~0.2 s of a 100 MB export, in one piece.
        cell = _NEW_CELL[entry["cell_type"]](**{k: v for k, v in entry.items()
                                                if k not in ("cell_type", "outputs")})
        if entry["cell_type"] == "code":
            cell["outputs"] = entry["outputs"]
        cells.append(cell)
    kernelspec = {"name": kernel_name, "display_name": kernel_name, "language": language}
    return _new_notebook(cells=cells, metadata={"kernelspec": kernelspec,
                                                 METADATA_KEY: {"session": session_id}})


#: Bytes of an exported notebook written to the connection at a time.
EXPORT_SLICE = 256 * 1024


def notebook_pieces(history: History, kernel_name: str, session_id: str,
                    language: str = "python") -> list[bytes]:
    """Return the notebook's JSON in pieces, a cell each (for a worker thread).

    Encoding JSON holds the GIL for a whole call: one call over 100 MB of history would
    stall the server's event loop as surely as running it there.
    """
    whole = notebook(history, kernel_name, session_id, language)
    rest = json.dumps({k: v for k, v in whole.items() if k != "cells"})  # never empty
    pieces = [b'{"cells": [']
    for index, cell in enumerate(whole["cells"]):
        text = (", " if index else "").encode() + json.dumps(cell).encode()
        # Sent a slice at a time, so the loop does little between other requests' turns.
        pieces += [text[at:at + EXPORT_SLICE] for at in range(0, len(text), EXPORT_SLICE)]
    return [*pieces, f"], {rest[1:]}".encode()]
