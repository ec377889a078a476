"""Code that an MCP client runs in this notebook's kernel, only once a page shows it as a cell.

The server (server/sessions/notebook_run.py) sends two requests. The first, silent, calls
`announce()` through `user_expressions`: it opens a `jupyter_ci` comm whose open data is
`{"type": "external_cell", id, source, path, code}`; a JupyterLab page with the labextension
that has the notebook open inserts the cell and answers `{"type": "external_ack", id}` on it,
which is echoed as `external_acked` (the server sees the echo on IOPub). Only then does the
server send the code itself, its request's metadata naming the id: `ExternalGate` lets it run
when that id was acknowledged and the code is the code announced, else it runs a refusal.
The page takes the run's outputs from the IOPub messages of that request, which it learns
from the `external_run` message sent on the comm just before the code runs.

A kernel without the extension loaded has no such module in `sys.modules`: the first request
fails, and the server runs nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from jupyter_ci.kernel.protocol import Raw, as_object, parent_header
from jupyter_ci.wire.codec import WireError, decode, encode
from jupyter_ci.wire.names import COMM_TARGET

log = logging.getLogger(__name__)

#: The key of the execute_request metadata that marks an MCP client's request.
EXTERNAL_KEY = "jupyter_ci_external"
#: Requests the gate remembers having let through (the latest; older ones ran already).
PASSED_KEPT = 16


@dataclass
class Pending:
    """A cell announced to the pages, waiting for its code's request."""

    id: str
    code: str
    comm: Any
    acked: bool = False


class ExternalCells:
    """The announced cells of this kernel, and the gate of their requests (an input
    transformer, so a refused request runs a refusal instead of its code)."""

    def __init__(self) -> None:
        self.pending: dict[str, Pending] = {}
        #: Requests let through already, as (msg_id, cell id): IPython may transform a cell
        #: more than once. Keyed by the cell too: a request that reuses an earlier one's
        #: msg_id (a client that numbers its messages from the same start) is a new cell,
        #: which must be announced to the pages (external_run) like the first.
        self.passed: dict[tuple[str, str], None] = {}

    def announce(self, shell: Any) -> str:
        """Open the comm that asks the pages to show the cell; return the comm's id."""
        from comm import create_comm

        from jupyter_ci.wire.comm import ExternalCell

        meta = as_object(parent_header(shell).get("metadata")).get(EXTERNAL_KEY)
        if not isinstance(meta, dict) or not all(
                isinstance(meta.get(k), str) for k in ("id", "code", "source")):
            raise ValueError("no external cell in this request's metadata")
        cell_id, code = meta["id"], meta["code"]
        comm = create_comm(target_name=COMM_TARGET, data=encode(
            ExternalCell(cell_id, meta["source"], meta.get("path"), code)))
        pending = Pending(cell_id, code, comm)
        comm.on_msg(lambda msg: self._on_msg(pending, msg))
        self.pending[cell_id] = pending
        return str(comm.comm_id)

    @staticmethod
    def _on_msg(pending: Pending, msg: Raw) -> None:
        """Read a page's acknowledgement (strictly) and echo it for the server."""
        from jupyter_ci.wire.comm import ExternalAck, ExternalAcked

        try:
            ack = decode(ExternalAck, as_object(msg.get("content")).get("data"))
        except WireError as exc:
            log.warning("jupyter-ci: a page answered the MCP client's cell %s with a message "
                        "this kernel cannot read (%s); the cell stays unacknowledged and its "
                        "code does not run. Install the same version of jupyter-ci in "
                        "JupyterLab's environment and the kernel's, then reload the page.",
                        pending.id, exc)
            return
        if ack.id == pending.id and not pending.acked:
            pending.acked = True
            pending.comm.send(encode(ExternalAcked(pending.id)))

    def cancel(self, cell_id: str) -> bool:
        """Drop an announced cell (no page acknowledged it in time); the pages remove it."""
        pending = self.pending.pop(cell_id, None)
        if pending is None:
            return False
        from jupyter_ci.wire.comm import ExternalCancelled

        pending.comm.close(encode(ExternalCancelled(cell_id)))
        return True

    def gate(self, shell: Any, lines: list[str]) -> list[str]:
        """Let an MCP client's code run only as the cell a page acknowledged."""
        header = parent_header(shell)
        meta = as_object(header.get("metadata")).get(EXTERNAL_KEY)
        if not isinstance(meta, dict) or meta.get("announce"):
            return lines
        key = (str(as_object(header.get("header")).get("msg_id", "")), str(meta.get("id")))
        if key in self.passed:
            return lines
        pending = self.pending.get(key[1])
        code = as_object(header.get("content")).get("code")
        if pending is None or not pending.acked or code != pending.code:
            return ["raise RuntimeError('jupyter-ci: refused: this code was not shown as a "
                    "cell of the notebook first; nothing ran')\n"]
        del self.pending[pending.id]
        self.passed[key] = None
        while len(self.passed) > PASSED_KEPT:  # only the request running now is asked again
            del self.passed[next(iter(self.passed))]
        # Sent in this request: the page reads the request's id from this message's parent
        # (its execute_input came before: the count is here).
        from jupyter_ci.wire.comm import ExternalRun

        pending.comm.send(encode(ExternalRun(pending.id,
                                             getattr(shell, "execution_count", None))))
        pending.comm.close()
        return lines


#: This kernel's cells; set by `install` (the extension's load).
_CELLS: ExternalCells | None = None
_SHELL: Any = None


def install(shell: Any) -> None:
    """Put the gate on the shell's input transformers (once)."""
    global _CELLS, _SHELL
    if _CELLS is not None and _SHELL is shell:
        return
    cells = ExternalCells()
    _CELLS, _SHELL = cells, shell
    shell.input_transformers_cleanup.append(lambda lines: cells.gate(shell, lines))


def announce() -> str:
    """Announce the cell the current request describes (see the module's docstring)."""
    if _CELLS is None:
        raise RuntimeError("jupyter-ci's kernel extension is not loaded")
    return _CELLS.announce(_SHELL)


def cancel(cell_id: str) -> bool:
    """Drop a cell announced but not acknowledged."""
    return _CELLS is not None and _CELLS.cancel(cell_id)
