"""Run generated code in this IPython kernel and capture its outputs in their true order.

`ShellExecutor` runs on the kernel's main thread inside the running `%%ask` magic, through
`shell.run_cell(store_history=True)`: the code shares the user's namespace and gets its own
In/Out entries and execution count, the same on IPython 8 and 9 (history.py). Side effect:
ipykernel's execute_reply for the `%%ask` cell reports `shell.execution_count - 1`, i.e. the
count of the last generated cell.
Kernel death cannot be detected from in here (`os._exit()` or a segfault kills this process
too); status "died" belongs to the server-side executor.
"""

from __future__ import annotations

import builtins
import contextlib
import getpass
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jupyter_ci import workdir
from jupyter_ci.agent.feedback import strip_ansi
from jupyter_ci.agent.outputs import OnOutput, OutputList
from jupyter_ci.agent.types import CodeResult, ErrorInfo, FileInfo, RunStatus
from jupyter_ci.kernel import history
from jupyter_ci.kernel.alarm import Alarm
from jupyter_ci.kernel.capture import (
    MISSING,
    put_back,
    settle_std_streams,
    swap,
    tap_session,
    tap_shell,
)
from jupyter_ci.models.broker import announce_model_code

if TYPE_CHECKING:
    from IPython.core.interactiveshell import ExecutionResult, InteractiveShell

    from jupyter_ci.wire.nbformat import ErrorOutput

log = logging.getLogger(__name__)

INPUT_HINT = ("input() is not available to generated code: define the value in code or ask "
              "the user in your answer")
EXIT_HINT = ("exit()/quit()/sys.exit() do not work in generated code and the kernel keeps "
             "running: remove the call, or raise an exception to stop early")


#: Whether the server heard that model-written code runs in this kernel (one POST a process).
_announced = [False]


def _announce_model_code() -> None:
    """Tell the server, before this kernel's first step, that model-written code runs here.

    The page then renders no output of this kernel as trusted until it restarts: code a step
    ran can leave hooks that put script in the user's own later cells (models/broker.py).
    """
    if not _announced[0]:
        _announced[0] = announce_model_code(os.environ)


class InputNotAvailableError(RuntimeError):
    """Raised by input() and getpass.getpass() inside generated code."""


def _settle_displayhook(shell: InteractiveShell) -> None:
    """End a displayhook call that a KeyboardInterrupt cut short (IPython has no finally)."""
    hook: Any = shell.displayhook
    if getattr(hook, "msg", None) is not None:  # ipykernel: flags every later traceback
        hook.msg = None
    hook._is_active = False  # IPython: hides every later write from history and tap_shell


def _no_input(*_args: object, **_kwargs: object) -> str:
    """Refuse to read from stdin: nobody answers while the ask runs."""
    raise InputNotAvailableError(INPUT_HINT)


def _no_exit(*_args: object, **_kwargs: object) -> None:
    """Turn exit()/quit() into an error instead of shutting the kernel down."""
    raise SystemExit("exit() or quit() was called")


@contextmanager
def _guarded(shell: InteractiveShell) -> Iterator[None]:
    """Disable input(), getpass() and exit() for generated code; restore them after."""
    with ExitStack() as stack:
        # exit() sets the first two; the nested run_cell resets and sets the last two, which
        # ipykernel reads after the %%ask cell to decide whether that cell failed.
        for flag in ("exit_now", "keepkernel_on_exit", "_last_traceback",
                     "_last_traceback_during_displayhook"):
            if hasattr(shell, flag):
                stack.callback(setattr, shell, flag, getattr(shell, flag))
        stack.callback(_settle_displayhook, shell)
        # ipykernel rebinds builtins.input and getpass.getpass to its own methods for each
        # execute_request (_forward_input); swap puts exactly those back.
        stack.enter_context(swap(builtins, "input", _no_input))
        stack.enter_context(swap(getpass, "getpass", _no_input))
        # exit() is ZMQExitAutocall: it sets keepkernel_on_exit and calls ask_exit, which sets
        # exit_now, and ipykernel stops its io_loop 0.1 s later. Resetting is too late.
        stack.enter_context(swap(shell, "ask_exit", _no_exit))
        yield


def _traceback_lines(output: ErrorOutput | None) -> tuple[str, ...]:
    """Return the ANSI-free lines of an error output's traceback."""
    return tuple(strip_ansi("\n".join(output["traceback"])).splitlines()) if output else ()


def _error_info(exc: BaseException, captured: ErrorOutput | None) -> ErrorInfo:
    """Describe `exc`, preferring the traceback IPython showed for it."""
    if captured is not None and captured["ename"] == type(exc).__name__:
        info = ErrorInfo(captured["ename"], captured["evalue"], _traceback_lines(captured))
    else:
        lines = "".join(traceback.format_exception(exc)).splitlines()
        info = ErrorInfo(type(exc).__name__, str(exc), tuple(lines))
    if isinstance(exc, SystemExit):
        info = ErrorInfo(info.ename, f"{info.evalue} ({EXIT_HINT})".strip(), info.traceback)
    return replace(info, module=missing_module_name(exc))


def missing_module_name(exc: BaseException) -> str | None:
    """Name the module an import could not find: the error's own, or the one it was raised from.

    Libraries re-raise a missing optional dependency as a plain ImportError (pandas:
    "Missing optional dependency 'openpyxl'") from the ModuleNotFoundError, which has the name.
    """
    seen: BaseException | None = exc
    for _ in range(3):
        if seen is None:
            break
        if isinstance(seen, ModuleNotFoundError):
            return seen.name if isinstance(seen.name, str) else None
        if not isinstance(seen, ImportError):
            break
        seen = seen.__cause__  # not __context__: a fallback import's failure is no cause
    return None


def _outcome(result: ExecutionResult | None, alarm: Alarm, collector: OutputList,
             timeout: float) -> tuple[RunStatus, ErrorInfo | None]:
    """Classify a run and describe its error for the model."""
    exc = None if result is None else (result.error_before_exec or result.error_in_exec)
    errors = [o for o in collector.outputs if o["output_type"] == "error"]
    captured = errors[-1] if errors else None
    interrupted = result is None or isinstance(exc, KeyboardInterrupt)
    if interrupted and alarm.sent:
        evalue = (f"the code was still running after {timeout:g} s and was interrupted; "
                  "make it faster or split the work into smaller steps")
        return "timeout", ErrorInfo("TimeoutError", evalue, _traceback_lines(captured))
    if interrupted:  # a SIGINT that was not ours: the user pressed Stop
        tb = _traceback_lines(captured)
        return "interrupted", ErrorInfo("KeyboardInterrupt", "interrupted by the user", tb)
    if exc is not None:
        return "error", _error_info(exc, captured)
    # A traceback shown without an exception: a _repr_*_ method that raised (IPython shows
    # it and goes on; ipykernel 7 fails such a request, 6 does not), or showtraceback().
    if captured is not None:
        return "error", ErrorInfo(captured["ename"], captured["evalue"], _traceback_lines(captured))
    return "ok", None


class ShellExecutor:
    """Run code as new cells of this IPython shell and capture their outputs as nbformat."""

    def __init__(self, shell: InteractiveShell, *,
                 on_output: OnOutput | None = None,
                 passthrough: bool = True,
                 workdir: Path | None = None) -> None:
        self.shell = shell
        #: The folder whose new and changed files each run reports; None: not watched.
        self.workdir = workdir
        #: Told each change of the output list as it happens, possibly on the IOPub thread.
        self.on_output = on_output
        #: Also publish the outputs on IOPub (so they show in the %%ask cell), or swallow them.
        self.passthrough = passthrough

    def run(self, code: str, timeout: float) -> CodeResult:
        """Run `code` in the user namespace, interrupting it after `timeout` seconds."""
        _announce_model_code()
        collector, alarm = OutputList(self.on_output), Alarm(timeout)
        settle_std_streams()  # what the %%ask cell printed itself is not this code's output
        before = self._snapshot()
        started = time.monotonic()
        with ExitStack() as stack:
            stack.enter_context(self._tap(collector))
            stack.enter_context(_guarded(self.shell))
            stack.enter_context(alarm.installed())
            stack.enter_context(history.cached(self.shell))
            stack.enter_context(history.own_number(self.shell))
            result = self._run_cell(code, alarm)
        duration = time.monotonic() - started
        status, error = _outcome(result, alarm, collector, timeout)
        count = result.execution_count if result is not None else None
        files, cut = self._changed(before)
        return CodeResult(status=status, outputs=collector.merged(), duration_s=duration,
                          execution_count=count, error=error, files=files, files_cut=cut,
                          updated=collector.updated_elsewhere())

    def _snapshot(self) -> workdir.Scan | None:
        """Record the working directory's files before a run (None: not watched)."""
        if self.workdir is None:
            return None
        try:
            return workdir.scan(self.workdir)
        except OSError:  # the folder was deleted under the kernel
            return None

    def _changed(self, before: workdir.Scan | None) -> tuple[list[FileInfo], bool]:
        """List the files the run created or changed, and whether a walk's cap cut them."""
        if before is None or self.workdir is None:
            return [], False
        try:
            after = workdir.scan(self.workdir)
        except OSError:
            return [], False
        return workdir.compare(before.files, after.files), before.cut or after.cut

    def _tap(self, collector: OutputList) -> contextlib.AbstractContextManager[None]:
        """Capture through the kernel's session, or through plain IPython's hooks."""
        kernel = getattr(self.shell, "kernel", None)
        if kernel is not None and getattr(kernel, "session", None) is not None:
            return tap_session(kernel, collector, self.passthrough)
        return tap_shell(self.shell, collector, self.passthrough)

    def _run_cell(self, code: str, alarm: Alarm) -> ExecutionResult | None:
        """Run the cell; None when a KeyboardInterrupt escaped IPython's own handling."""
        streams = (sys.stdout, sys.stderr)
        writes = [vars(s).get("write", MISSING) for s in streams]
        run_cell: Callable[..., ExecutionResult] = self.shell.run_cell
        result = None
        try:
            alarm.start()
            result = run_cell(code, store_history=True)
            alarm.stop()
        except KeyboardInterrupt:  # raised outside the code, e.g. as run_cell returned
            alarm.stop()
            if result is None:  # IPython's _tee patches stream.write without try/finally
                for stream, write in zip(streams, writes, strict=True):
                    put_back(stream, "write", write)
        return result
