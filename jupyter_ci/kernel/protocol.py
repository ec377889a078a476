"""The kernel's side of the kernel <-> JupyterLab protocol (docs/protocol.md, version 2).

What a cell's execute_request carries, read once per ask: its cell id, its ask record as
written, its source, and the labextension's announcement (wire/comm.Frontend, read strictly).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from IPython.core.interactiveshell import InteractiveShell

from jupyter_ci.agent.approval import NotebookCell
from jupyter_ci.agent.errors import AskError
from jupyter_ci.wire.names import FRONTEND_KEY, METADATA_KEY, PROTOCOL_VERSION

if TYPE_CHECKING:
    from jupyter_ci.wire.comm import Frontend

#: A JSON object as it came (a request's metadata, a cell's record): read with checks.
Raw = Mapping[str, object]


class FrontendUnreadable(AskError):
    """The labextension's announcement in a request does not read as this kernel's protocol."""


@dataclass(frozen=True)
class RequestInfo:
    """What the frontend sent with this cell's execute_request."""

    cell_id: str | None
    #: The cell's `metadata.jupyter_ci` as written (a signature covers it so).
    record: Raw | None
    #: The labextension's announcement (None: no labextension, or another protocol version).
    frontend: Frontend | None
    #: The cell's source as the runner sent it (headless runners send only this).
    source: str | None = None
    #: Whether the frontend can answer a question on stdin during this request.
    allow_stdin: bool = False

    @property
    def has_frontend(self) -> bool:
        """Tell whether the jupyter-ci labextension sent this request."""
        return self.frontend is not None

    @property
    def record_ask_id(self) -> str | None:
        """Return the ask id the cell's record names, if any."""
        found = (self.record or {}).get("ask_id")
        return found if isinstance(found, str) else None


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


def as_object(value: object) -> dict[str, object]:
    """Return a JSON value that should be an object as one (anything else: empty)."""
    return value if isinstance(value, dict) else {}


def read_frontend(raw: object) -> Frontend | None:
    """Read the labextension's announcement strictly; None without one of this version."""
    if not isinstance(raw, dict) or raw.get("protocol") != PROTOCOL_VERSION:
        return None
    from jupyter_ci.wire.codec import WireError, decode
    from jupyter_ci.wire.comm import Frontend

    try:
        return decode(Frontend, raw)
    except WireError as exc:
        raise FrontendUnreadable(
            f"jupyter-ci: this cell's request carries a labextension announcement the kernel "
            f"cannot read ({FRONTEND_KEY}.{exc}); nothing was asked.",
            "JupyterLab's jupyter-ci and the kernel's differ: install the same version of "
            "jupyter-ci in the kernel's environment, restart the kernel and reload the page."
        ) from None


def request_info(parent: Raw) -> RequestInfo:
    """Read the cell id, ask record, frontend announcement and source of a request."""
    meta, content = as_object(parent.get("metadata")), as_object(parent.get("content"))
    cell_id, record, source = meta.get("cellId"), meta.get(METADATA_KEY), content.get("code")
    return RequestInfo(
        cell_id=cell_id if isinstance(cell_id, str) else None,
        record=record if isinstance(record, dict) else None,
        frontend=read_frontend(meta.get(FRONTEND_KEY)),
        source=source if isinstance(source, str) else None,
        allow_stdin=bool(content.get("allow_stdin")),
    )


def notebook_cells(info: RequestInfo) -> list[NotebookCell]:
    """Return the notebook's code cells the labextension sent with an ask (`cells`)."""
    sent = info.frontend.cells if info.frontend is not None else ()
    return [NotebookCell(cell.id, cell.source, cell.error) for cell in sent]


def parent_header(shell: InteractiveShell) -> Raw:
    """Return the request being executed (JupyterLab puts cell metadata in it)."""
    kernel = getattr(shell, "kernel", None)
    if kernel is not None and hasattr(kernel, "get_parent"):
        parent = kernel.get_parent("shell")
    else:
        parent = getattr(shell, "parent_header", None)
    return as_object(parent)


def current_request(shell: InteractiveShell) -> RequestInfo:
    """Read what the request being executed carries (FrontendUnreadable: a bad announcement)."""
    return request_info(parent_header(shell))


def current_record(shell: InteractiveShell) -> Raw | None:
    """Return the `metadata.jupyter_ci` of the request being executed, as written."""
    record = as_object(parent_header(shell).get("metadata")).get(METADATA_KEY)
    return record if isinstance(record, dict) else None
