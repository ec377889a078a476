"""How an ask shows itself in the %%ask cell when no labextension is attached."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from IPython.display import display

from jupyter_ci.agent.disclosure import Part, total_tokens
from jupyter_ci.agent.drive import View
from jupyter_ci.agent.errors import AskError
from jupyter_ci.agent.feedback import strip_ansi
from jupyter_ci.agent.loop import RunCode
from jupyter_ci.agent.outputs import OutputEvent
from jupyter_ci.agent.restart import RestartProblem
from jupyter_ci.agent.types import CodeResult, Output
from jupyter_ci.kernel.capture import OWN_DISPLAYS
from jupyter_ci.kernel.record import AskInfo
from jupyter_ci.kernel.safe_markdown import bundle, collapsed
from jupyter_ci.kernel.safe_outputs import inert_bundle

# Re-rendering Markdown on every token floods the frontend; a few frames a second reads live.
REFRESH_S = 0.1
#: Lines of a running step's printed output shown under its code.
TAIL_LINES = 5


class AskView(View, Protocol):
    """The driver's view, plus the ask's start and end and whether outputs reach the cell."""

    passthrough: bool

    def start(self) -> None:
        """The ask begins."""

    def output(self, event: OutputEvent) -> None:
        """A change of the current step's outputs."""

    def note(self, text: str) -> None:
        """Warn about the notebook the ask left (e.g. what a restart would break)."""

    def finish(self, answer: str, record: dict[str, Any]) -> None:
        """The ask ended with an answer; `record` goes into the %%ask cell's metadata."""

    def fail(self, error: AskError, status: str, record: dict[str, Any]) -> None:
        """The ask ended without an answer."""

    def sent(self, parts: Sequence[Part]) -> None:
        """Show what the ask sent the model last (`--show-context`)."""


@dataclass
class LiveMarkdown:
    """A Markdown display (rendered safe) that can be rewritten in place, every REFRESH_S."""

    text: str = ""
    _handle: Any = None
    shown_at: float = 0.0

    def append(self, delta: str) -> None:
        """Add streamed text, refreshing the display when enough time passed."""
        self.text += delta
        if time.monotonic() - self.shown_at >= REFRESH_S:
            self.flush()

    def set(self, text: str) -> None:
        """Replace the whole text and show it now."""
        self.text = text
        self.flush()

    def flush(self) -> None:
        """Show the current text."""
        self.shown_at = time.monotonic()
        if self._handle is None:
            self._handle = display(bundle(self.text), raw=True, display_id=True)
            if self._handle is not None:
                OWN_DISPLAYS.add(self._handle.display_id)
        else:
            self._handle.update(bundle(self.text), raw=True)


def keep_busy() -> None:
    """Say again that the kernel is busy with the ask's request.

    JupyterLab shows the last status any request caused; its debugger's requests on the
    control channel end "idle" while an ask still runs, and the status bar then says Idle.
    """
    from IPython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    publish = getattr(kernel, "_publish_status", None)
    if publish is None:
        return
    try:
        publish("busy", "shell")
    except Exception:  # a status is a courtesy: never let it break an ask
        return


def show_markdown(text: str) -> None:
    """Display model-written Markdown once, with no live HTML (see safe_markdown)."""
    display(bundle(text), raw=True)


def show_sent(model: str, parts: Sequence[Part], dry_run: bool = False) -> None:
    """Show the parts of a request folded under a line with their total (safe HTML)."""
    total = total_tokens(parts)
    what = ("Would send (dry run: nothing was sent, nothing ran)" if dry_run
            else "Sent in the last model call")
    line = (f"{what} to {model}: {len(parts)} parts, about {total:,} tokens "
            "(estimated: characters / 4)")
    blocks = [f"**{_plain(part.name)}** · {part.tokens:,} tokens\n\n{fenced(part.text, 'text')}"
              for part in parts]
    blocks.append(f"**Total** · {total:,} tokens")
    display(collapsed(line, "\n\n".join(blocks)), raw=True)


def _plain(text: str) -> str:
    """Escape Markdown in a name taken from data (a folder, a heading)."""
    return re.sub(r"([\\`*_\[\]<>~|])", r"\\\1", text)


def code_block(code: str) -> str:
    """Fence code as Markdown, choosing a fence the code cannot close."""
    return fenced(code, "python")


def fenced(text: str, language: str) -> str:
    """Fence text as a Markdown code block, with a fence the text cannot close."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def summary(model: str, record: dict[str, Any]) -> str:
    """Say what an ask took: model, steps and tokens."""
    steps, tokens = record.get("steps", 0), record.get("tokens", 0)
    return f"{model} · {steps} step{'s' * (steps != 1)} · {tokens:,} tokens"


def ending(model: str, record: dict[str, Any], done: str = "Done: ") -> str:
    """Say how an answered ask ended: done, or done with a step still failing."""
    unresolved = record.get("unresolved")
    if isinstance(unresolved, dict):
        return (f"Done with an unresolved error in step {unresolved.get('step')}: "
                f"{unresolved.get('error')} ({summary(model, record)})")
    return f"{done}{summary(model, record)}"


#: The most characters of a step's description in the log.
DESCRIPTION_CHARS = 60


def describe(code: str, narration: str = "") -> str:
    """Say in a few words what a step does: its code's first comment, else the model's text."""
    for line in code.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") and not stripped.startswith("#!"):
            text = stripped.lstrip("#").strip()
            if text:
                return _shorten(text)
        elif stripped:
            break  # only a comment that leads the code says what all of it does
    first = re.split(r"(?<=[.!?:])\s", " ".join(narration.split()), maxsplit=1)[0]
    return _shorten(first.rstrip(".:"))


def _shorten(text: str) -> str:
    text = text.replace("`", "").replace("*", "").strip()
    if len(text) <= DESCRIPTION_CHARS:
        return text
    return text[:DESCRIPTION_CHARS].rsplit(" ", 1)[0] + "…"


def step_title(run: RunCode, narration: str = "") -> str:
    """Name a step as the user sees it, with what it does when the code or model says."""
    if run.kind == "install":
        return f"Step {run.step} (installing {run.package})"
    if run.kind == "retry":
        return f"Step {run.step} (the code again, with {run.package} installed)"
    retry = f" (fix, attempt {run.attempt})" if run.attempt > 1 else ""
    what = describe(run.code, narration)
    return f"Step {run.step}{retry}" + (f" · {what}" if what else "")


@dataclass
class InlineView:
    """Everything inline: narration, each step's code and final outputs, the answer.

    Outputs are captured, not passed through: while an attempt runs, the step's header shows
    the tail of its printed output; when it ends, a successful attempt's outputs are shown
    under its code, and a failed one collapses into a line ("attempt 1 failed: NameError:
    ..."), so a headless notebook holds each step once, with no `error` output for a failure
    the model fixed. A failure nobody fixed (the ask failed, or the model answered over it)
    keeps its outputs, the traceback as text.
    """

    info: AskInfo
    passthrough: bool = False
    _turn: LiveMarkdown | None = None
    #: The last model turn shown: at the end, the answer.
    _last_turn: LiveMarkdown | None = None
    _status: LiveMarkdown = field(default_factory=LiveMarkdown)
    _header: LiveMarkdown | None = None
    _code: str = ""
    _tail: str = ""
    #: The last attempt, while it failed and no retry came yet.
    _failed: tuple[RunCode, CodeResult] | None = None

    def start(self) -> None:
        """Show who is being asked."""
        self._status.set(f"*Asking {self.info.model}…*")

    def text(self, delta: str) -> None:
        """Stream model text into this turn's Markdown."""
        if self._turn is None:
            self._turn = LiveMarkdown()
        self._turn.append(delta)

    def turn_end(self) -> None:
        """Show the rest of this turn's text."""
        if self._turn is not None:
            self._turn.flush()
            self._last_turn = self._turn
        self._turn = None

    def step_start(self, run: RunCode) -> None:
        """Show the step's code; its outputs follow when it ends."""
        self._failed = None  # a retry: the failed attempt stays a collapsed line
        self._last_turn = None  # the text before a step was narration, not the answer
        self._code = f"**{step_title(run)}**\n\n{code_block(run.code)}"
        self._tail = ""
        self._header = LiveMarkdown()
        self._header.set(self._code + "\n\n*running…*")

    def output(self, event: OutputEvent) -> None:
        """Show the last lines printed so far under the code, as a live preview."""
        out = event.output
        if self._header is None or event.kind != "add" or out is None or \
                out.get("output_type") != "stream":
            return
        self._tail = (self._tail + str(out.get("text", "")))[-4000:]
        tail = "\n".join(self._tail.rstrip("\n").splitlines()[-TAIL_LINES:])
        self._header.text = f"{self._code}\n\n{fenced(tail, '')}\n\n*running…*"
        if time.monotonic() - self._header.shown_at >= REFRESH_S:
            self._header.flush()

    def step_end(self, run: RunCode, result: CodeResult) -> None:
        """Show a successful attempt's outputs; collapse a failed one into a line."""
        header = self._header or LiveMarkdown()
        self._header = None
        if result.ok:
            header.set(self._code)
            publish(result.outputs)
            return
        header.set(f"*{step_title(run)}: {attempt_failure(run, result)}.*")
        self._failed = (run, result)

    def note(self, text: str) -> None:
        """Show a warning line in the cell."""
        show_markdown(f"*⚠ {text}*")

    def restart_fix(self, problem: RestartProblem) -> None:
        """Say that the model was sent back to make a step self-contained."""
        if self._last_turn is not None:
            self._last_turn.set("")  # its answer was sent back: a new one comes
            self._last_turn = None
        self.note(problem.notice())

    def _show_unfixed(self) -> None:
        """Show the outputs of a failed attempt that no retry replaced."""
        if self._failed is not None:
            run, result = self._failed
            self._failed = None
            show_markdown(f"*{step_title(run)}, not fixed: its output.*\n\n"
                          f"{code_block(run.code)}")
            publish(result.outputs, errors_as_text=True)

    def finish(self, answer: str, record: dict[str, Any]) -> None:
        """The answer was streamed already; show it as finished (files linked), then status."""
        if self._last_turn is not None and self._last_turn.text.strip() != answer.strip():
            self._last_turn.set(answer)
        self._show_unfixed()
        self._status.set(f"*{ending(self.info.model, record, done='')}*")

    def sent(self, parts: Sequence[Part]) -> None:
        """Show what was sent, folded."""
        show_sent(self.info.model, parts)

    def fail(self, error: AskError, status: str, record: dict[str, Any]) -> None:
        """The error itself is raised in the cell; keep the status line honest."""
        self._show_unfixed()
        self._status.set(f"*{self.info.model} · ask {status}*")


def attempt_failure(run: RunCode, result: CodeResult) -> str:
    """Say in a few words how an attempt failed: "attempt 1 failed: NameError: ..."."""
    if result.status == "timeout":
        return f"attempt {run.attempt} timed out and was interrupted"
    error = result.error
    what = f"{error.ename}: {error.evalue}" if error else result.status
    first = what.splitlines()[0] if what else result.status
    return f"attempt {run.attempt} failed: `{first[:200]}`"


def publish(outputs: Sequence[Output], errors_as_text: bool = False) -> None:
    """Show captured nbformat outputs in the running cell, in their order, made inert."""
    from IPython.display import publish_display_data

    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            stream = sys.stderr if out.get("name") == "stderr" else sys.stdout
            stream.write(str(out.get("text", "")))
            stream.flush()
        elif kind in ("display_data", "execute_result"):
            # The %%ask cell is trusted (the user ran it): model-written HTML must not run.
            publish_display_data(inert_bundle(dict(out.get("data", {}))),
                                 dict(out.get("metadata", {})))
        elif kind == "error" and errors_as_text:
            sys.stderr.write(strip_ansi("\n".join(out.get("traceback", []))) + "\n")
            sys.stderr.flush()
