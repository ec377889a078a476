"""The kernel's side of the kernel <-> JupyterLab protocol (docs/protocol.md, version 2).

The twin of labextension/src/protocol.ts: the names both sides use, and what a cell's
execute_request carries, read once per ask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from IPython.core.interactiveshell import InteractiveShell

from jupyter_ci.agent.approval import NotebookCell
from jupyter_ci.wire.names import FRONTEND_KEY, METADATA_KEY, PROTOCOL_VERSION


@dataclass(frozen=True)
class RequestInfo:
    """What the frontend sent with this cell's execute_request."""

    cell_id: str | None
    record: dict[str, Any] | None
    frontend: dict[str, Any] | None
    #: The cell's source as the runner sent it (headless runners send only this).
    source: str | None = None
    #: Whether the frontend can answer a question on stdin during this request.
    allow_stdin: bool = False

    @property
    def has_frontend(self) -> bool:
        """Tell whether the jupyter-ci labextension sent this request."""
        return self.frontend is not None and self.frontend.get("protocol") == PROTOCOL_VERSION


@dataclass(frozen=True)
class AskInfo:
    """Who is asking what: one ask's identity."""

    ask_id: str
    prompt: str
    model: str
    cell_id: str | None = None
    replace_ask_id: str | None = None
    #: The %%ask cell's own count; its execute_reply reports the last generated cell's.
    execution_count: int | None = None
    #: The notebook's path as the frontend named it: a reloaded page finds its ask by it.
    notebook: str | None = None


def message(ask_id: str, event: dict[str, Any]) -> dict[str, Any]:
    """Put an event's JSON form in the comm's envelope: the ask it belongs to, the version."""
    return {**event, "ask_id": ask_id, "protocol": PROTOCOL_VERSION}


def ask_start(info: AskInfo, event: dict[str, Any]) -> dict[str, Any]:
    """The comm's opening message: the ask's start, and where the browser shows it."""
    return message(info.ask_id, {
        **event, "cell_id": info.cell_id, "replace_ask_id": info.replace_ask_id,
        "execution_count": info.execution_count})


def ask_state(info: AskInfo, comm_id: str, live: bool, log: list[str],
              events: list[dict[str, Any]]) -> dict[str, Any]:
    """Where an ask stands, for a page that missed its start (reloaded, or a second tab)."""
    return message(info.ask_id, {
        "type": "ask_state", "cell_id": info.cell_id, "notebook": info.notebook,
        "comm_id": comm_id, "live": live, "log": log,
        "messages": [ask_start(info, event) if event["type"] == "ask_start"
                     else message(info.ask_id, event) for event in events]})


@dataclass(frozen=True)
class Reused:
    """A re-run that reused its recorded answer, as the panel is told (`ask_reused`)."""

    ask_id: str
    cell_id: str | None
    prompt: str
    model: str
    answer: str
    steps: int
    pin: str

    def to_json(self) -> dict[str, Any]:
        """Return the comm message."""
        return message(self.ask_id, {
            "type": "ask_reused", "cell_id": self.cell_id, "prompt": self.prompt,
            "model": self.model, "answer": self.answer, "steps": self.steps, "pin": self.pin})


def request_info(parent: dict[str, Any]) -> RequestInfo:
    """Read the cell id, ask record, frontend announcement and source of a request."""
    meta = parent.get("metadata") or {}
    content = parent.get("content") or {}
    record, frontend, source = meta.get(METADATA_KEY), meta.get(FRONTEND_KEY), content.get("code")
    return RequestInfo(
        cell_id=meta.get("cellId") if isinstance(meta.get("cellId"), str) else None,
        record=record if isinstance(record, dict) else None,
        frontend=frontend if isinstance(frontend, dict) else None,
        source=source if isinstance(source, str) else None,
        allow_stdin=bool(content.get("allow_stdin")),
    )


def notebook_cells(info: RequestInfo) -> list[NotebookCell]:
    """Read the notebook's code cells the labextension sent with an ask (`cells`)."""
    found = (info.frontend or {}).get("cells")
    cells = []
    for item in found if isinstance(found, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str) and isinstance(
                item.get("source"), str):
            error = item.get("error")
            cells.append(NotebookCell(item["id"], item["source"],
                                      error if isinstance(error, str) else ""))
    return cells


def parent_header(shell: InteractiveShell) -> dict[str, Any]:
    """Return the request being executed (JupyterLab puts cell metadata in it)."""
    kernel = getattr(shell, "kernel", None)
    if kernel is not None and hasattr(kernel, "get_parent"):
        parent = kernel.get_parent("shell")
    else:
        parent = getattr(shell, "parent_header", None)
    return parent if isinstance(parent, dict) else {}


def current_request(shell: InteractiveShell) -> RequestInfo:
    """Read what the request being executed carries."""
    return request_info(parent_header(shell))
