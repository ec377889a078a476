"""The kernel's side of the kernel <-> JupyterLab protocol (docs/protocol.md, version 1).

The twin of labextension/src/protocol.ts: the names both sides use, and what a cell's
execute_request carries, read once per ask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from IPython.core.interactiveshell import InteractiveShell

#: The protocol version the labextension announces in every execute_request.
PROTOCOL_VERSION = 1
#: The comm target the kernel opens one comm on per ask.
COMM_TARGET = "jupyter_ci"
#: The key of the frontend announcement in execute_request metadata.
FRONTEND_KEY = "jupyter_ci_frontend"
#: The cell metadata key of ask records and generated-cell records.
METADATA_KEY = "jupyter_ci"


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
