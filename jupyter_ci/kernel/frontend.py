"""The %%ask cell while the labextension shows the steps: a progress log and the answer.

An encoder of the ask's events (agent/events.py); the steps themselves reach the browser on
the comm (kernel/comm.py), which becomes cells there.
"""

from __future__ import annotations

import contextvars
import threading
import time
from dataclasses import dataclass, field

from jupyter_ci.agent.events import (
    AskEnded,
    Event,
    Outcome,
    OutputsChanged,
    RequestSent,
    StepEnded,
    StepSentBack,
    StepStarted,
)
from jupyter_ci.agent.loop import RunCode
from jupyter_ci.agent.restart import RestartProblem
from jupyter_ci.agent.types import CodeResult
from jupyter_ci.kernel.protocol import AskInfo
from jupyter_ci.kernel.views import (
    Disclosure,
    LiveMarkdown,
    Narration,
    ending,
    keep_busy,
    step_title,
)
from jupyter_ci.wire.events import AskStart, CodePreview, Notice, Text, Thinking, WaitingForUser


@dataclass
class ProgressLog:
    """The %%ask cell's log: a line per step; while the model thinks, its seconds count."""

    view: LiveMarkdown = field(default_factory=LiveMarkdown)
    lines: list[str] = field(default_factory=list)
    #: Since when the model has been thinking (no step running, no text yet), if it is.
    thinking_since: float | None = None
    # The log is rendered from the main thread and, while the model thinks, from a ticker.
    lock: threading.RLock = field(default_factory=threading.RLock)
    _ticking: threading.Event | None = None

    def add(self, line: str, replace: bool = False) -> None:
        """Add a line, or put it in place of the last one."""
        keep_busy()
        with self.lock:
            if replace and self.lines:
                self.lines[-1] = line
            else:
                self.lines.append(line)
            self.render()

    def add_above(self, line: str) -> None:
        """Add a line above the last one (which keeps the thinking count)."""
        with self.lock:
            self.lines.insert(max(len(self.lines) - 1, 0), line)
            self.render()

    def snapshot(self) -> list[str]:
        """Return the lines as they stand."""
        with self.lock:
            return list(self.lines)

    def render(self) -> None:
        """Show the log; while the model thinks, its last line counts the seconds."""
        with self.lock:
            lines = list(self.lines)
            since = self.thinking_since
            if since is not None and lines and time.monotonic() - since >= 1:
                lines[-1] += f" · thinking {time.monotonic() - since:.0f} s"
            self.view.set("\n".join(f"- {entry}" for entry in lines))

    def think(self) -> None:
        """The model is called now: count the seconds until it writes or runs."""
        self.thinking_since = time.monotonic()
        if self._ticking is None:
            self._ticking = threading.Event()
            # The copied context carries the request's parent header (a ContextVar in
            # ipykernel 7), so the ticker's updates go to the %%ask cell's output.
            context = contextvars.copy_context()
            threading.Thread(target=context.run, args=(self._tick, self._ticking),
                             name="jupyter-ci-ticker", daemon=True).start()

    def stop_thinking(self) -> None:
        """The model writes or runs now (or the user is asked): stop counting."""
        if self.thinking_since is not None:
            self.thinking_since = None
            self.render()

    def _tick(self, stop: threading.Event) -> None:
        while not stop.wait(1.0):
            if self.thinking_since is not None:
                keep_busy()
                self.render()

    def stop(self) -> None:
        """The ask is over: no more ticks."""
        self.thinking_since = None
        if self._ticking is not None:
            self._ticking.set()
            self._ticking = None


@dataclass
class LogView:
    """The %%ask cell beside the browser's step cells: the log, then the answer."""

    info: AskInfo
    show_context: bool = False
    log: ProgressLog = field(default_factory=ProgressLog)
    _answer: LiveMarkdown | None = None
    narration: Narration = field(default_factory=Narration)
    #: Each step's name in the log, from its first attempt (a fix keeps it).
    _titles: dict[int, str] = field(default_factory=dict)
    # The first failure of each step, so its final log line can say it was fixed.
    _failures: dict[int, str] = field(default_factory=dict)
    # Steps the restart check sent back; the log line of the next attempt follows its notice.
    _redone: set[int] = field(default_factory=set)
    _notice_last: bool = False
    _sent: Disclosure | None = None

    def __call__(self, event: Event) -> None:
        """Show one event of the ask in the cell."""
        # Flushed when the model's turn ends; outputs arrive on the IOPub thread, many.
        if not isinstance(event, Text | CodePreview | OutputsChanged) and self._answer is not None:
            self._answer.flush()
        match event:
            case AskStart():
                self.log.add(f"Asking {self.info.model}…")
            case Thinking():
                self.log.think()
            case RequestSent():
                self._disclosure().keep(event)
            case Text(delta):
                self._text(delta)
            case WaitingForUser(kind=kind, step=step) if kind != "install":
                self.log.stop_thinking()
                self.log.add({"step": f"Step {step} waits for your approval (in its cell).",
                              "plan": "The plan waits for your approval (in this cell and "
                                      "the panel).",
                              "edits": "Proposed edits wait for your review (in their "
                                       "cells)."}[kind])
            case CodePreview() | WaitingForUser():
                self.log.stop_thinking()  # it writes code now, or the user is asked
            case StepStarted(run):
                self._step_start(run)
            case StepEnded(run, result):
                self._step_end(run, result)
            case StepSentBack(problem):
                self._sent_back(problem)
            case Notice(message) if self.log.snapshot() == [f"Asking {self.info.model}…"]:
                # Said as the ask starts: above "Asking…", which counts the model's seconds.
                self.log.add_above(f"⚠ {message}")
            case Notice(message):
                self.log.add(f"⚠ {message}")
            case AskEnded(outcome):
                self._end(outcome)

    def _disclosure(self) -> Disclosure:
        self._sent = self._sent or Disclosure(self.info.model, self.show_context)
        return self._sent

    def _text(self, delta: str) -> None:
        """Stream the answer into the cell."""
        self.log.stop_thinking()  # it writes now: the text is the progress
        self._answer = self._answer or LiveMarkdown()
        self._answer.append(self.narration.text(delta))

    def _step_start(self, run: RunCode) -> None:
        """Note the step in the log; narration before it stays above the answer."""
        narration = self.narration.step()
        self.log.thinking_since = None
        title = self._titles.setdefault(run.step, step_title(run, narration))
        if run.attempt > 1:
            title = step_title(run, narration)  # "(fix, attempt 2)", an install's own words
        # A fix takes the place of its step's line, unless a notice came between them.
        self.log.add(f"{title}: running…", replace=run.attempt > 1 and not self._notice_last)
        self._notice_last = False

    def _step_end(self, run: RunCode, result: CodeResult) -> None:
        """Say how the step went: "failed (NameError) → fixed", "timed out → fixing"."""
        error = result.error
        failure = "timed out" if result.status == "timeout" else (
            f"failed ({error.ename if error else result.status})")
        if not result.ok:
            self._failures.setdefault(run.step, failure)
        first = self._failures.get(run.step)
        name = self._titles.get(run.step, f"Step {run.step}")
        if result.ok:
            done = f"installed {run.package}" if run.kind == "install" else (
                "fixed" if first else "done")
            if run.step in self._redone:  # its notice, just above, said what went wrong
                first, done = None, "made self-contained"
            line = f"{name}: {first + ' → ' if first else ''}{done} " \
                f"({result.duration_s:.1f} s)"
        elif result.status in ("interrupted", "died"):
            line = f"{name}: {result.status}"
        else:
            line = f"{name}: {failure} → fixing"
        self.log.add(line, replace=True)

    def _sent_back(self, problem: RestartProblem) -> None:
        """Log that the model must redo a step; its answer so far was not the answer."""
        narration = self.narration.sent_back()  # a new answer comes
        self._redone.add(problem.step)
        if self._answer is not None:
            self._answer.set(narration)
        self.log.add(f"⚠ {problem.notice()}")
        self._notice_last = True

    def _end(self, outcome: Outcome) -> None:
        """Show the whole answer (narration above it) and how the ask ended."""
        self.log.stop()
        self._disclosure().shown()
        if outcome.status != "done":
            message = outcome.error.message if outcome.error else outcome.status
            self.log.add(f"Ask {outcome.status}: {message}")
            self._cost(outcome)
            return
        # What the model said between steps stays, above its answer (cell and panel).
        answer = self.narration.above(outcome.answer)
        if self._answer is None or self._answer.text.strip() != answer.strip():
            self._answer = self._answer or LiveMarkdown()
            self._answer.set(answer)
        lines = self.log.lines
        if outcome.unresolved is not None and lines and lines[-1].endswith(" → fixing"):
            # The model answered instead: the step was never fixed.
            self.log.add(lines[-1].removesuffix(" → fixing") + " → not fixed", replace=True)
        self.log.add(ending(self.info.model, outcome))
        self._cost(outcome)

    def _cost(self, outcome: Outcome) -> None:
        """End the log with the ask's tokens and cost, when it used any."""
        line = outcome.usage.line()
        if line:
            self.log.add(line)
