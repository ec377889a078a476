"""A JupyterLab page's part in run_in_notebook, over a kernel client, without a browser.

It does what labextension/src/externalcells.ts does (docs/protocol.md §5): on the kernel's
`external_cell` comm for its notebook it appends a marked code cell and answers
`external_ack`; the cell's count and outputs come only from the IOPub messages of the request
the kernel names with `external_run` on that comm, up to its idle status. A cell the kernel
never names stays as the page would show it: `[ ]:` and no outputs. The browser test of the
same is tests/ui/test_notebook_run.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import nbformat

from jupyter_ci.wire.names import COMM_TARGET

_OUTPUTS = ("stream", "display_data", "execute_result", "error")


class FakePage:
    """One notebook's page on one kernel: its cells, filled as the page fills them."""

    def __init__(self, client: Any, path: str) -> None:
        self.client, self.path = client, path.strip("/")
        # A page's kernel connection has a session of its own.
        self.client.session.session = str(uuid.uuid4())
        self.notebook = nbformat.v4.new_notebook()
        self._comms: dict[str, Any] = {}
        self._runs: dict[str, Any] = {}
        self._task: asyncio.Future[None] | None = None
        #: The cells whose run ended, in the order they ended, and their requests' ids.
        self.done: list[Any] = []
        self.run_ids: list[str] = []

    async def __aenter__(self) -> FakePage:
        self.client.start_channels(hb=False)  # a page has no heartbeat of its own
        await self.client.wait_for_ready(timeout=60)
        self._task = asyncio.ensure_future(self._follow())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.client.stop_channels()

    async def settled(self, cells: int, timeout: float = 30) -> None:
        """Wait until `cells` runs the kernel named have reached their idle status (a cell
        never named never does: then this gives up after `timeout` s, a hang guard)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.done) < cells and loop.time() < deadline:
            await asyncio.sleep(0.05)

    async def _follow(self) -> None:
        while True:
            try:
                msg = await self.client.get_iopub_msg(timeout=1)
            except Exception:  # queue.Empty
                continue
            self._on(msg)

    def _on(self, msg: dict[str, Any]) -> None:
        kind, content = msg["msg_type"], msg["content"]
        parent = msg["parent_header"].get("msg_id")
        if kind == "comm_open" and content.get("target_name") == COMM_TARGET:
            self._opened(content["comm_id"], content.get("data") or {})
        elif kind == "comm_msg" and content.get("comm_id") in self._comms:
            data = content.get("data") or {}
            if data.get("type") == "external_run":
                cell = self._comms.pop(content["comm_id"])
                cell.execution_count = data.get("execution_count")
                self._runs[parent] = cell
                self.run_ids.append(parent)
        elif kind == "comm_close" and content.get("comm_id") in self._comms:
            self.notebook.cells.remove(self._comms.pop(content["comm_id"]))  # cancelled
        elif parent in self._runs:
            self._apply(self._runs[parent], parent, kind, content)

    def _opened(self, comm_id: str, data: dict[str, Any]) -> None:
        if data.get("type") != "external_cell" or str(data.get("path")).strip("/") != self.path:
            return
        cell = nbformat.v4.new_code_cell(data["code"], metadata={
            "jupyter_ci": {"external": data["source"]}})
        self.notebook.cells.append(cell)
        self._comms[comm_id] = cell
        self.client.shell_channel.send(self.client.session.msg("comm_msg", {
            "comm_id": comm_id, "data": {"type": "external_ack", "id": data["id"]}}))

    def _apply(self, cell: Any, parent: str, kind: str, content: dict[str, Any]) -> None:
        if kind == "status" and content.get("execution_state") == "idle":
            self.done.append(self._runs.pop(parent))
        elif kind == "execute_input":
            cell.execution_count = content["execution_count"]
        elif kind == "clear_output":
            cell.outputs = []
        elif kind in _OUTPUTS:
            fields = {k: v for k, v in content.items() if k != "transient"}
            cell.outputs.append(nbformat.from_dict({"output_type": kind, **fields}))
