"""A kernel a bench's server starts for a notebook, driven over ZMQ from the bench.

Notebook kernels get the model service's URL and a credential of their own; a REST session's
kernel gets neither (its asks run in the server), so benches that measure `%%ask` in a
kernel, or call the service with a kernel's credential, use one of these.
"""

from __future__ import annotations

import os
import time
from queue import Empty
from types import TracebackType
from typing import Any

import httpx
from jupyter_client import BlockingKernelClient
from jupyter_core.paths import jupyter_runtime_dir


class NotebookKernel:
    """Start a kernel with POST /api/kernels; run code in it; shut it down on leaving."""

    def __init__(self, url: str, token: str, timeout: float = 120) -> None:
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"token {token}"},
                                 timeout=timeout)
        self.timeout = timeout
        self.id = self.http.post("/api/kernels", json={"name": "python3"}).json()["id"]
        # The server writes connection files to the runtime folder this process sees too.
        path = os.path.join(jupyter_runtime_dir(), f"kernel-{self.id}.json")
        self.client = BlockingKernelClient(connection_file=path)
        self.client.load_connection_file()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=timeout)

    def execute(self, code: str) -> str:
        """Run code; return what it printed; raise if it failed."""
        msg_id = self.client.execute(code)
        printed: list[str] = []
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                msg: dict[str, Any] = self.client.get_iopub_msg(timeout=0.5)
            except Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "error":
                raise RuntimeError(f"{code.splitlines()[0]!r} failed: {content['ename']}: "
                                   f"{content['evalue']}")
            if kind == "stream":
                printed.append(content["text"])
            if kind == "status" and content["execution_state"] == "idle":
                return "".join(printed)
        raise TimeoutError(f"{code.splitlines()[0]!r} did not finish in {self.timeout:g} s")

    def __enter__(self) -> NotebookKernel:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.client.stop_channels()
        self.http.delete(f"/api/kernels/{self.id}")
        self.http.close()
