"""Run an agent's code in a notebook a page has open, never silently: the door without the
server's shared documents (no jupyter-collaboration: notebook_door.py needs no page).

`POST /jupyter-ci/notebooks/run {"path", "code", "timeout"?}` (notebook_handlers.py), there:
the notebook's kernel is found among Jupyter's own sessions; a silent request asks the kernel
side (kernel/external.py) to announce the cell to the pages; only when a JupyterLab page with
the labextension acknowledges it, within ACK_S, is the code sent, and it lands as a new cell
of that notebook with its outputs. The reply is the execute route's object. Refused (and
nothing run) when no kernel runs the notebook, when jupyter-ci's kernel extension is not
loaded in it, or when no page shows the cell.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from jupyter_core.utils import ensure_async

from jupyter_ci.server.sessions.errors import SessionError
from jupyter_ci.server.sessions.executor import KernelControl, KernelExecutor
from jupyter_ci.server.sessions.notebook_clients import NotebookClients
from jupyter_ci.server.sessions.results import execute_result
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.messages import ExecuteRequestContent, IOPubMessage, ShellReply

#: Seconds a page has to acknowledge the cell once the kernel announced it.
ACK_S = 3.0
#: Seconds at most to wait for the kernel to take the announcing request (it may be busy).
ANNOUNCE_S = 60.0
#: The kernel side's names (kernel/external.py; not imported: the server loads no IPython).
EXTERNAL_KEY = "jupyter_ci_external"
_MODULE = "__import__('sys').modules['jupyter_ci.kernel.external']"
ANNOUNCE = f"{_MODULE}.announce()"
CANCEL = _MODULE + ".cancel({id!r})"


class NoKernel(SessionError):
    """No running kernel has this notebook."""

    status, reason = 404, "notebook_not_running"


class NotLoaded(SessionError):
    """jupyter-ci's kernel extension is not loaded in the notebook's kernel."""

    status, reason = 409, "extension_not_loaded"


class NotShown(SessionError):
    """No page with the labextension showed the cell in time."""

    status, reason = 409, "notebook_not_open"


class MarkedClient:
    """A kernel client whose execute_requests carry the external cell's metadata."""

    def __init__(self, client: Any, metadata: dict[str, object]) -> None:
        self.client, self.metadata = client, metadata

    def execute(self, code: str, silent: bool = False, store_history: bool = True,
                user_expressions: dict[str, str] | None = None,
                allow_stdin: bool | None = None, stop_on_error: bool = True) -> str:
        """Send an execute_request with the metadata; return its msg_id."""
        return send(self.client, {
            "code": code, "silent": silent, "store_history": store_history,
            "user_expressions": user_expressions or {}, "allow_stdin": bool(allow_stdin),
            "stop_on_error": stop_on_error}, self.metadata)

    async def get_iopub_msg(self, timeout: float | None = None) -> IOPubMessage:
        """Return the next IOPub message."""
        msg: IOPubMessage = await self.client.get_iopub_msg(timeout=timeout)
        return msg

    async def get_shell_msg(self, timeout: float | None = None) -> ShellReply:
        """Return the next shell reply."""
        reply: ShellReply = await self.client.get_shell_msg(timeout=timeout)
        return reply


def send(client: Any, content: ExecuteRequestContent, metadata: dict[str, object]) -> str:
    """Send an execute_request with request metadata (jupyter_client's execute has none)."""
    msg = client.session.msg("execute_request", content, metadata=metadata)
    client.shell_channel.send(msg)
    return str(msg["header"]["msg_id"])


async def reply_to(client: Any, msg_id: str, wait: float) -> ShellReply | None:
    """Return the shell reply to one request, or None after `wait` seconds."""
    deadline = time.monotonic() + wait
    while (left := deadline - time.monotonic()) > 0:
        try:
            reply: ShellReply = await client.get_shell_msg(timeout=left)
        except Exception:  # queue.Empty
            return None
        if reply.get("parent_header", {}).get("msg_id") == msg_id:
            return reply
    return None


def quiet_request(expression: str) -> ExecuteRequestContent:
    return {"code": "", "silent": True, "store_history": False, "allow_stdin": False,
            "user_expressions": {"jupyter_ci": expression}, "stop_on_error": False}


async def _announce(client: Any, cell: dict[str, str], path: str) -> None:
    """Have the kernel announce the cell; refuse when its extension is not loaded."""
    msg_id = send(client, quiet_request(ANNOUNCE), {EXTERNAL_KEY: {**cell, "announce": True}})
    reply = await reply_to(client, msg_id, ANNOUNCE_S)
    if reply is None:
        raise NotShown(f"The kernel of {path} did not answer within {ANNOUNCE_S:g} s (busy?); "
                       "nothing ran.")
    result = (reply["content"].get("user_expressions") or {}).get("jupyter_ci") or {}
    if not isinstance(result, dict) or result.get("status") != "ok":
        raise NotLoaded(f"jupyter-ci's kernel extension is not loaded in the kernel of {path}: "
                        "run `%load_ext jupyter_ci` in the notebook (or any cell, in "
                        "JupyterLab with the jupyter-ci extension), then try again; nothing ran.")


async def _acknowledged(client: Any, cell_id: str) -> bool:
    """Wait up to ACK_S for the kernel's echo of a page's acknowledgement (on IOPub)."""
    deadline = time.monotonic() + ACK_S
    while (left := deadline - time.monotonic()) > 0:
        try:
            msg: IOPubMessage = await client.get_iopub_msg(timeout=left)
        except Exception:  # queue.Empty
            return False
        if msg["msg_type"] != "comm_msg":
            continue
        data = (msg["content"] or {}).get("data") or {}
        if data.get("type") == "external_acked" and data.get("id") == cell_id:
            return True
    return False


async def kernel_of(session_manager: Any, path: str) -> str:
    """Return the id of the kernel Jupyter's sessions give the notebook at `path`."""
    wanted = path.strip("/")
    for session in await ensure_async(session_manager.list_sessions()):
        kernel = session.get("kernel") or {}
        if str(session.get("path", "")).strip("/") == wanted and kernel.get("id"):
            return str(kernel["id"])
    raise NoKernel(f"No running kernel has the notebook {path!r}: open it in JupyterLab "
                   "(list_notebooks lists those that have one).")


async def run_in_notebook(kernel_manager: Any, kernel_id: str, path: str, code: str,
                          timeout: float) -> dict[str, object]:
    """Show `code` as a new cell of the notebook, then run it there; return its result."""
    async with NotebookClients.of(kernel_manager).use(kernel_id) as client:
        cell = {"id": uuid.uuid4().hex[:12], "source": "mcp", "path": path, "code": code}
        await _announce(client, cell, path)
        if not await _acknowledged(client, cell["id"]):
            # The page that acknowledges late removes the cell the kernel drops here.
            cancel = quiet_request(CANCEL.format(id=cell["id"]))
            await reply_to(client, send(client, cancel, {}), 5.0)
            raise NotShown(f"No JupyterLab page with the jupyter-ci extension has {path} open: "
                           "open the notebook in JupyterLab first; nothing ran.")

        async def interrupt() -> None:
            await ensure_async(kernel_manager.interrupt_kernel(kernel_id))

        async def is_alive() -> bool:
            return kernel_id in kernel_manager and bool(await ensure_async(
                kernel_manager.get_kernel(kernel_id).is_alive()))

        marked = MarkedClient(client, {EXTERNAL_KEY: {"id": cell["id"], "source": "mcp"}})
        result = await KernelExecutor(marked, KernelControl(interrupt, is_alive)).run(
            code, timeout)
        return {**encode(execute_result(result)), "path": path}
