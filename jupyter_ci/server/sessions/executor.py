"""Run code in a kernel over jupyter_client from the server's event loop (`KernelExecutor`).

It gives the same nbformat outputs and statuses as the kernel's own `ShellExecutor`, through
the same `OutputList`: a timeout interrupts the kernel and keeps it alive ("timeout"); a
kernel that dies is "died"; an interrupt from elsewhere is "interrupted".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeGuard

from jupyter_ci.agent.feedback import strip_ansi
from jupyter_ci.agent.outputs import (
    OUTPUT_MSG_TYPES,
    OnOutput,
    OutputList,
)
from jupyter_ci.agent.types import CodeResult, ErrorInfo, RunStatus
from jupyter_ci.server.sessions.capped import CappedOutputs
from jupyter_ci.wire.messages import (
    IOPubMessage,
    OutputMessage,
    ReplyContent,
    ShellReply,
)
from jupyter_ci.wire.nbformat import ErrorContent

#: Seconds to wait for the kernel to settle after an interrupt before calling it dead.
INTERRUPT_GRACE_S = 10.0
#: Seconds to wait, after a run's idle status, for its reply (sent before it, on another
#: socket): one that never comes means an interrupt hit the kernel's own handling of it.
REPLY_AFTER_IDLE_S = 3.0
#: The ename of a "died" run whose kernel is alive but ignored the interrupt (it runs on).
STUCK = "KernelStuck"
#: How often to check that the kernel is still alive while waiting for messages.
POLL_S = 1.0
#: Seconds at most a run waits for late outputs after its idle status (see late_s).
LATE_MAX_S = 1.0
#: Set a run's environment variables in a Python kernel, keeping what they replace on `sys`
#: (in a namespace of its own: no name of the user's is touched).
SET_ENV = """exec('''
import os, sys
sys._jupyter_ci_env = {{k: os.environ.get(k) for k in env}}
os.environ.update(env)
''', {{"env": {env}}})"""
#: Put back what SET_ENV replaced; remove what it added.
RESTORE_ENV = """exec('''
import os, sys
for k, v in sys.__dict__.pop("_jupyter_ci_env", {}).items():
    if v is None:
        os.environ.pop(k, None)
    else:
        os.environ[k] = v
''', {})"""


#: Asked while a run is in flight: why to stop it now, or None.
Stop = Callable[[], "str | None"]


class KernelClient(Protocol):
    """The part of jupyter_client's AsyncKernelClient the executor uses."""

    def execute(self, code: str, silent: bool = ..., store_history: bool = ...,
                user_expressions: dict[str, str] | None = ..., allow_stdin: bool | None = ...,
                stop_on_error: bool = ...) -> str:
        """Send an execute_request; return its msg_id."""
        ...

    async def get_iopub_msg(self, timeout: float | None = ...) -> IOPubMessage:
        """Return the next IOPub message (raises queue.Empty after `timeout`)."""
        ...

    async def get_shell_msg(self, timeout: float | None = ...) -> ShellReply:
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
    #: The execute_reply's status and content (None until it came, or when it never did).
    replied: str | None = None
    reply: ReplyContent = field(default_factory=ReplyContent)


def _not_run(run: _Run) -> None:
    """Make a run the kernel did not carry out an error, shown as its last output."""
    if run.replied == "aborted":
        # ipykernel aborts the requests queued behind one that failed (another client's,
        # or a run an interrupt stopped): idle, no input, no output, nothing ran.
        info = ErrorInfo("NotRun", "the kernel did not run this code: it aborted it, as it "
                         "does with requests queued behind one that failed or was "
                         "interrupted; nothing changed, run it again")
    elif run.replied is None:
        info = ErrorInfo("KernelError", f"the kernel went idle but did not answer this "
                         f"request within {REPLY_AFTER_IDLE_S:g} s (interrupts landing in its "
                         "own machinery can do that); the code may not have run: check its "
                         "effects, or run it again")
    else:
        # An error reply without an error output: the kernel failed outside the code (an
        # interrupt that landed in its own machinery); whether the code ran is unknown.
        info = ErrorInfo(str(run.reply.get("ename") or "KernelError"), str(
            run.reply.get("evalue") or f"the kernel answered '{run.replied}' without "
            "saying why; the code may not have run: check its effects, or run it again"))
    run.error = info
    run.outputs.apply("error", {"ename": info.ename, "evalue": info.evalue,
                                "traceback": [f"{info.ename}: {info.evalue}"]})


def _changes_outputs(msg: IOPubMessage) -> TypeGuard[OutputMessage]:
    """Tell an IOPub message that changes a cell's outputs."""
    return msg["msg_type"] in OUTPUT_MSG_TYPES


class KernelExecutor:
    """Run code in one kernel, one run at a time, and collect its outputs as nbformat."""

    def __init__(self, client: KernelClient, control: KernelControl,
                 on_output: OnOutput | None = None, output_limit: int = 0) -> None:
        self.client = client
        self.control = control
        self.on_output = on_output
        #: Bytes of outputs a run keeps for its result (0: all; see CappedOutputs).
        self.output_limit = output_limit
        #: Seconds of quiet to wait for after a run's idle status (0: none): Deno's kernel
        #: publishes idle before its last outputs (sessions/languages.py sets it).
        self.late_s = 0.0
        self._lock = asyncio.Lock()

    async def run(self, code: str, timeout: float, on_output: OnOutput | None = None,
                  env: dict[str, str] | None = None, around: tuple[str, str] | None = None,
                  stop: Stop | None = None) -> CodeResult:
        """Run `code`, interrupting after `timeout` s (inf: never), with `env` for it alone.

        `env` is for a Python kernel; `around` is (set, restore) code of another language's
        kernel that does the same (sessions/languages.py `env_prelude`). `stop`, asked
        while it runs, says why to interrupt it early (a cap it went over: disk.py).
        """
        # The variables go in before the code; what they replaced comes back after, also
        # when the code failed or timed out (not if the kernel died).
        if env:
            around = (SET_ENV.format(env=repr(env)), RESTORE_ENV)
        async with self._lock:
            if around is None:
                return await self._run(code, timeout, on_output, stop)
            if not await self._quiet(around[0]):
                # An interrupt (a client that hung up) meant for the code came first.
                await self._restore(around[1])
                return CodeResult("interrupted", error=ErrorInfo(
                    "KeyboardInterrupt", "interrupted before the code started"))
            result = await self._run(code, timeout, on_output, stop)
            if result.status != "died":
                await self._restore(around[1])
            return result

    async def _restore(self, code: str) -> None:
        """Put back the environment the set-up changed (again, if an interrupt cut it short)."""
        for _ in range(3):
            if await self._quiet(code):
                return

    async def _quiet(self, code: str) -> bool:
        """Run a few lines silently (no count, history or outputs); False if interrupted."""
        for _ in range(3):
            msg_id = self.client.execute(code, silent=True, store_history=False,
                                         allow_stdin=False, stop_on_error=False)
            status = await self._reply_status(msg_id)
            # After an error the kernel aborts the requests that came meanwhile: again then.
            if status != "aborted":
                return status != "error"
        return True

    async def _reply_status(self, msg_id: str) -> str | None:
        """Return the status of a request's reply; None when the kernel did not answer."""
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        while time.monotonic() < deadline:
            try:
                reply = await self.client.get_shell_msg(timeout=POLL_S)
            except Exception:  # queue.Empty: unless the kernel is gone, keep waiting
                if not await self.control.is_alive():
                    return None
                continue
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                return str(reply["content"].get("status"))
        return None

    async def _run(self, code: str, timeout: float, on_output: OnOutput | None,
                   stop: Stop | None = None) -> CodeResult:
        """Run the code itself and collect its outputs."""
        # `on_output` replaces the executor's own listener for one run (a streaming request).
        started = time.monotonic()
        listener = on_output or self.on_output
        outputs = CappedOutputs(listener, limit=self.output_limit) if (
            self.output_limit > 0) else OutputList(listener)
        run = _Run(self.client.execute(code, store_history=True, allow_stdin=False),
                   outputs)
        status = await self._follow(run, started + timeout, stop)
        stuck = False
        why = f"the code was still running after {timeout:g} s"
        if status == "timeout":
            why = (stop and stop()) or why
            await self.control.interrupt()
            if not await self._settle(run):
                # Alive but deaf to SIGINT: the session manager may restart it (STUCK).
                status, stuck = "died", await self.control.is_alive()
        error = ErrorInfo(STUCK, f"{why} and did not stop within {INTERRUPT_GRACE_S:g} s of "
                          "the interrupt") if stuck else self._error(status, run, timeout)
        return CodeResult(status, run.outputs.merged(), time.monotonic() - started,
                          run.execution_count, error, updated=run.outputs.updated_elsewhere())

    async def _follow(self, run: _Run, deadline: float, stop: Stop | None = None
                      ) -> RunStatus:
        """Read messages until the run is idle, the deadline passes (or `stop` says so) or
        the kernel dies."""
        while not run.idle:
            left = deadline - time.monotonic()
            if left <= 0 or (stop is not None and stop() is not None):
                return "timeout"
            if not await self._next(run, min(left, POLL_S)) and not await self.control.is_alive():
                return "died"
        await self._reply(run)
        lull = time.monotonic() + LATE_MAX_S
        while self.late_s and time.monotonic() < lull and await self._next(run, self.late_s):
            pass  # a message came in: wait for a lull again (an endless stream: LATE_MAX_S)
        if run.error is None and run.replied != "ok":
            _not_run(run)  # the kernel answered without running it, or failed outside it
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
            await self._reply(run, INTERRUPT_GRACE_S)
        return run.idle

    async def _next(self, run: _Run, wait: float) -> bool:
        """Apply the next IOPub message of this run; False when none came in `wait` s."""
        try:
            msg = await self.client.get_iopub_msg(timeout=wait)
        except Exception:  # queue.Empty, or the channel closing as the kernel dies
            return False
        if msg.get("parent_header", {}).get("msg_id") != run.msg_id:
            return True  # another client's request, or a previous run's late message
        if msg["msg_type"] == "status":
            run.idle = run.idle or msg["content"].get("execution_state") == "idle"
        elif msg["msg_type"] == "execute_input":
            run.execution_count = msg["content"].get("execution_count")
        elif msg["msg_type"] == "error":
            # Plain text for every reader of a REST output (an app's page, a log, a model).
            content: ErrorContent = {**msg["content"], "traceback": [
                strip_ansi(line) for line in msg["content"]["traceback"]]}
            run.error = ErrorInfo(content["ename"], content["evalue"], tuple(
                "\n".join(content["traceback"]).splitlines()))
            run.outputs.apply("error", content)
        elif _changes_outputs(msg):
            run.outputs.apply(msg["msg_type"], msg["content"])
        return True

    async def _reply(self, run: _Run, wait: float = REPLY_AFTER_IDLE_S) -> None:
        """Read the execute_reply of this run (its count, when IOPub did not carry it)."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                reply = await self.client.get_shell_msg(timeout=POLL_S)
            except Exception:  # queue.Empty: keep waiting until the deadline
                continue
            if reply.get("parent_header", {}).get("msg_id") == run.msg_id:
                run.execution_count = reply["content"].get("execution_count",
                                                           run.execution_count)
                run.replied = str(reply["content"].get("status"))
                run.reply = reply["content"]
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
