"""What a session's runs leave: the API's result object, the history, the notebook."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nbformat import v4

from jupyter_ci.agent.types import CodeResult

if TYPE_CHECKING:
    from jupyter_ci.server.sessions import Session

# nbformat is unannotated: these say what its constructors return.
_NEW_CELL: dict[str, Callable[..., dict[str, Any]]] = {
    "code": v4.new_code_cell, "markdown": v4.new_markdown_cell}
_new_notebook: Callable[..., dict[str, Any]] = v4.new_notebook
#: Statuses of an execute as the API reports them (the executor's "died" is "dead" here).
API_STATUS = {"ok": "ok", "error": "error", "timeout": "timeout", "interrupted": "error",
              "died": "dead"}


def execute_result(result: CodeResult, files: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the API's object for one run."""
    return {"status": API_STATUS[result.status], "outputs": list(result.outputs),
            "execution_count": result.execution_count,
            "duration_ms": round(result.duration_s * 1000, 1), "files": files}


def code_cell(code: str, result: CodeResult) -> dict[str, Any]:
    """Record one execute in the history: the fields of its code cell."""
    # Made a v4 cell only on export: nbformat validates each cell it makes (about 1 ms, and
    # more per output), a cost no execute should pay on the event loop. The outputs are v4
    # already (OutputList, the one mapping of IOPub messages).
    return {"cell_type": "code", "source": code, "execution_count": result.execution_count,
            "outputs": list(result.outputs)}


def markdown_cell(text: str) -> dict[str, Any]:
    """Record a piece of an ask in the history: the fields of its Markdown cell."""
    return {"cell_type": "markdown", "source": text}


def notebook(session: Session) -> dict[str, Any]:
    """Return the session's history as an nbformat v4 notebook (validated cell by cell)."""
    cells = [_NEW_CELL[entry["cell_type"]](**{k: v for k, v in entry.items()
                                              if k != "cell_type"})
             for entry in list(session.history)]
    kernelspec = {"name": session.kernel_name, "display_name": session.kernel_name,
                  "language": "python"}
    return _new_notebook(cells=cells, metadata={"kernelspec": kernelspec,
                                                 "jupyter_ci": {"session": session.id}})
