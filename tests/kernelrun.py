"""Drive a real kernel with jupyter_client, sending metadata the way JupyterLab does."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager, start_new_kernel

from jupyter_ci.kernel.magics import UNBOXED_NOTE


@dataclass
class Execution:
    """What one execute_request produced."""

    reply: dict[str, Any]
    iopub: list[dict[str, Any]] = field(default_factory=list)
    #: The prompts of the input_requests the kernel sent on stdin, in order.
    prompts: list[str] = field(default_factory=list)

    def of_type(self, *types: str) -> list[dict[str, Any]]:
        """Return iopub messages of these types, in order."""
        return [m for m in self.iopub if m["msg_type"] in types]

    def comm_data(self, unboxed_note: bool = False) -> list[dict[str, Any]]:
        """Return the data of every comm_open/comm_msg of the ask's own comm, in order.

        These kernels are not boxed, so a kernel's first ask says so (a warning); it is left
        out unless `unboxed_note` (tests/test_unboxed_note.py is about it).
        """
        return [m["content"]["data"] for m in self.of_type("comm_open", "comm_msg")
                if m["content"]["data"].get("type") != "ask_state" and
                (unboxed_note or m["content"]["data"].get("message") != UNBOXED_NOTE)]

    def states(self) -> list[dict[str, Any]]:
        """Return the ask_state broadcasts (for pages that missed the ask), in order."""
        return [m["content"]["data"] for m in self.of_type("comm_open")
                if m["content"]["data"].get("type") == "ask_state"]

    def comm_ids(self) -> list[str]:
        """Return the ids of the comms opened for asks (not the one-shot ask_state ones)."""
        return [m["content"]["comm_id"] for m in self.of_type("comm_open")
                if m["content"]["data"].get("type") == "ask_start"]


class Kernel:
    """A started kernel and its client."""

    def __init__(self, env: dict[str, str], cwd: str, kernel_name: str = "python3") -> None:
        self.km: KernelManager
        self.km, self.kc = start_new_kernel(kernel_name=kernel_name, env=env, cwd=cwd)
        self._answers: list[str] = []

    def execute(self, code: str, metadata: dict[str, Any] | None = None,
                interrupt_after: float | None = None, timeout: float = 60,
                answers: list[str] | None = None) -> Execution:
        """Run code with request metadata; optionally interrupt the kernel after some seconds.

        With `answers`, the request allows stdin (as JupyterLab's do) and each input_request
        is answered with the next of them.
        """
        content = {"code": code, "silent": False, "store_history": True,
                   "user_expressions": {}, "allow_stdin": answers is not None,
                   "stop_on_error": True}
        self._answers = list(answers or [])
        msg = self.kc.session.msg("execute_request", content, metadata=metadata or {})
        self.kc.shell_channel.send(msg)
        msg_id = msg["header"]["msg_id"]
        result = Execution(reply={})
        deadline = time.monotonic() + timeout
        interrupt_at = None if interrupt_after is None else time.monotonic() + interrupt_after
        idle = False
        while not idle or not result.reply:
            if interrupt_at is not None and time.monotonic() >= interrupt_at:
                self.km.interrupt_kernel()
                interrupt_at = None
            if time.monotonic() > deadline:
                raise TimeoutError(f"no reply to {code!r}")
            idle = self._pump(msg_id, result, idle)
        return result

    def _pump(self, msg_id: str, result: Execution, idle: bool) -> bool:
        if self.kc.stdin_channel.msg_ready():
            request = self.kc.get_stdin_msg(timeout=1)
            if request["msg_type"] == "input_request":
                result.prompts.append(request["content"]["prompt"])
                self.kc.input(self._answers.pop(0) if self._answers else "")
        elif self.kc.iopub_channel.msg_ready():
            msg = self.kc.get_iopub_msg(timeout=1)
            if msg["parent_header"].get("msg_id") == msg_id:
                result.iopub.append(msg)
                state = msg["content"].get("execution_state")
                idle = idle or (msg["msg_type"] == "status" and state == "idle")
        elif self.kc.shell_channel.msg_ready():
            reply = self.kc.get_shell_msg(timeout=1)
            if reply["parent_header"].get("msg_id") == msg_id:
                result.reply = reply
        else:
            time.sleep(0.005)
        return idle

    def close(self) -> None:
        """Stop the kernel."""
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def connection_file(runtime: Path, kernel_id: str, uid: int | None = None,
                    timeout: float = 30) -> Path:
    """Return the connection file of a server's kernel, boxed or not, once it is written.

    An unboxed kernel's is in the server's runtime folder; a boxed one's (by default, the
    kernel a notebook gets) in its box's private folder (server/sandbox/provisioner.py).
    """
    owner = os.getuid() if uid is None else uid
    boxed = Path(tempfile.gettempdir()) / f"jupyter-ci-{owner}" / \
        kernel_id.replace("-", "")[:16] / "kernel.json"
    unboxed = runtime / f"kernel-{kernel_id}.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in (unboxed, boxed):
            if path.exists():
                return path
        time.sleep(0.05)
    raise AssertionError(f"no connection file of kernel {kernel_id}: {unboxed}, {boxed}")
