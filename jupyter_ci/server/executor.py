"""Run code in a kernel over jupyter_client from the server's event loop (`KernelExecutor`).

It gives the same nbformat outputs and statuses as the kernel's own `ShellExecutor`, through
the same `OutputList`: a timeout interrupts the kernel and keeps it alive ("timeout"); a
kernel that dies is "died"; an interrupt from elsewhere is "interrupted".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from jupyter_ci.agent.feedback import strip_ansi
from jupyter_ci.agent.outputs import OUTPUT_MSG_TYPES, OnOutput, OutputList
from jupyter_ci.agent.types import CodeResult, ErrorInfo, RunStatus

#: Seconds to wait for the kernel to settle after an interrupt before calling it dead.
INTERRUPT_GRACE_S = 10.0
#: How often to check that the kernel is still alive while waiting for messages.
POLL_S = 1.0


class KernelClient(Protocol):
    """The part of jupyter_client's AsyncKernelClient the executor uses."""

    def execute(self, code: str, silent: bool = ..., store_history: bool = ...,
                user_expressions: dict[str, Any] | None = ..., allow_stdin: bool | None = ...,
                stop_on_error: bool = ...) -> str:
        """Send an execute_request; return its msg_id."""
        ...

    async def get_iopub_msg(self, timeout: float | None = ...) -> dict[str, Any]:
        """Return the next IOPub message (raises queue.Empty after `timeout`)."""
        ...

    async def get_shell_msg(self, timeout: float | None = ...) -> dict[str, Any]:
        """Return the next shell reply (raises queue.Empty after `timeout`)."""
        ...


@dataclass
class KernelControl:
    """What the executor may do to the kernel itself (the kernel manager's methods)."""

    interrupt: Callable[[], Awaitable[None]]
    is_alive: Callable[[], Awaitable[bool]]


@dataclass
class _Run:
    """The state of one execute_request while its messages arrive."""

    msg_id: str
    outputs: OutputList
    idle: bool = False
    execution_count: int | None = None
    error: ErrorInfo | None = None


class KernelExecutor:
    """Run code in one kernel, one run at a time, and collect its outputs as nbformat."""

    def __init__(self, client: KernelClient, control: KernelControl,
                 on_output: OnOutput | None = None) -> None:
        self.client = client
        self.control = control
        self.on_output = on_output
        self._lock = asyncio.Lock()

    async def run(self, code: str, timeout: float, on_output: OnOutput | None = None
                  ) -> CodeResult:
        """Run `code`, interrupting the kernel after `timeout` seconds."""
        # `on_output` replaces the executor's own listener for one run (a streaming request).
        async with self._lock:
            started = time.monotonic()
            run = _Run(self.client.execute(code, store_history=True, allow_stdin=False),
                       OutputList(on_output or self.on_output))
            status = await self._follow(run, started + timeout)
            if status == "timeout":
                await self.control.interrupt()
                if not await self._settle(run):
                    status = "died"
            return CodeResult(status, run.outputs.merged(), time.monotonic() - started,
                              run.execution_count, self._error(status, run, timeout),
                              updated=run.outputs.updated_elsewhere())

    async def _follow(self, run: _Run, deadline: float) -> RunStatus:
        """Read messages until the run is idle, the deadline passes or the kernel dies."""
        while not run.idle:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            if not await self._next(run, min(left, POLL_S)) and not await self.control.is_alive():
                return "died"
        await self._reply(run)
        if run.error is None:
            return "ok"
        return "interrupted" if run.error.ename == "KeyboardInterrupt" else "error"

    async def _settle(self, run: _Run) -> bool:
        """Wait for the interrupted run to end; False when the kernel never came back."""
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        while not run.idle and time.monotonic() < deadline:
            if not await self._next(run, POLL_S) and not await self.control.is_alive():
                return False
        if run.idle:
            await self._reply(run)
        return run.idle

    async def _next(self, run: _Run, wait: float) -> bool:
        """Apply the next IOPub message of this run; False when none came in `wait` s."""
        try:
            msg = await self.client.get_iopub_msg(timeout=wait)
        except Exception:  # queue.Empty, or the channel closing as the kernel dies
            return False
        if msg.get("parent_header", {}).get("msg_id") != run.msg_id:
            return True  # another client's request, or a previous run's late message
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status" and content.get("execution_state") == "idle":
            run.idle = True
        elif kind == "execute_input":
            run.execution_count = content.get("execution_count")
        elif kind in OUTPUT_MSG_TYPES:
            run.outputs.apply(kind, content)
            if kind == "error":
                run.error = ErrorInfo(content["ename"], content["evalue"], tuple(
                    strip_ansi("\n".join(content["traceback"])).splitlines()))
        return True

    async def _reply(self, run: _Run) -> None:
        """Read the execute_reply of this run (its count, when IOPub did not carry it)."""
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        while time.monotonic() < deadline:
            try:
                reply = await self.client.get_shell_msg(timeout=POLL_S)
            except Exception:  # queue.Empty: keep waiting until the deadline
                continue
            if reply.get("parent_header", {}).get("msg_id") == run.msg_id:
                run.execution_count = reply["content"].get("execution_count",
                                                           run.execution_count)
                return

    @staticmethod
    def _error(status: RunStatus, run: _Run, timeout: float) -> ErrorInfo | None:
        """Describe why a run did not succeed, in the same words as the kernel's executor."""
        if status == "timeout":
            return ErrorInfo("TimeoutError", f"the code was still running after {timeout:g} s "
                             "and was interrupted; make it faster or split the work into "
                             "smaller steps", run.error.traceback if run.error else ())
        if status == "died":
            return ErrorInfo("KernelDied", "the kernel died while running this code")
        return run.error
