"""How an ask shows itself in the %%ask cell when no labextension is attached."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from IPython.display import display

from jupyter_ci.agent.drive import View
from jupyter_ci.agent.errors import AskError
from jupyter_ci.agent.loop import RunCode
from jupyter_ci.agent.outputs import OutputEvent
from jupyter_ci.agent.types import CodeResult
from jupyter_ci.kernel.record import AskInfo
from jupyter_ci.kernel.safe_markdown import bundle

# Re-rendering Markdown on every token floods the frontend; a few frames a second reads live.
REFRESH_S = 0.1


class AskView(View, Protocol):
    """The driver's view, plus the ask's start and end and whether outputs reach the cell."""

    passthrough: bool

    def start(self) -> None:
        """The ask begins."""

    def output(self, event: OutputEvent) -> None:
        """A change of the current step's outputs."""

    def finish(self, answer: str, record: dict[str, Any]) -> None:
        """The ask ended with an answer; `record` goes into the %%ask cell's metadata."""

    def fail(self, error: AskError, status: str, record: dict[str, Any]) -> None:
        """The ask ended without an answer."""


@dataclass
class LiveMarkdown:
    """A Markdown display (rendered safe) that can be rewritten in place, every REFRESH_S."""

    text: str = ""
    _handle: Any = None
    _shown_at: float = 0.0

    def append(self, delta: str) -> None:
        """Add streamed text, refreshing the display when enough time passed."""
        self.text += delta
        if time.monotonic() - self._shown_at >= REFRESH_S:
            self.flush()

    def set(self, text: str) -> None:
        """Replace the whole text and show it now."""
        self.text = text
        self.flush()

    def flush(self) -> None:
        """Show the current text."""
        self._shown_at = time.monotonic()
        if self._handle is None:
            self._handle = display(bundle(self.text), raw=True, display_id=True)
        else:
            self._handle.update(bundle(self.text), raw=True)


def show_markdown(text: str) -> None:
    """Display model-written Markdown once, with no live HTML (see safe_markdown)."""
    display(bundle(text), raw=True)


def code_block(code: str) -> str:
    """Fence code as Markdown, choosing a fence the code cannot close."""
    fence = "```"
    while fence in code:
        fence += "`"
    return f"{fence}python\n{code.rstrip()}\n{fence}"


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


def step_title(run: RunCode) -> str:
    """Name a step as the user sees it."""
    retry = f" (fix, attempt {run.attempt})" if run.attempt > 1 else ""
    return f"Step {run.step}{retry}"


@dataclass
class InlineView:
    """Everything inline: narration, each step's code, its real outputs, the answer."""

    info: AskInfo
    passthrough: bool = True
    _turn: LiveMarkdown | None = None
    _status: LiveMarkdown = field(default_factory=LiveMarkdown)

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
        self._turn = None

    def step_start(self, run: RunCode) -> None:
        """Show the step's code before its outputs."""
        show_markdown(f"**{step_title(run)}**\n\n{code_block(run.code)}")

    def output(self, event: OutputEvent) -> None:
        """Outputs reach the cell by themselves (passthrough)."""

    def step_end(self, run: RunCode, result: CodeResult) -> None:
        """Say when a step failed, so the fix that follows makes sense."""
        if result.status == "timeout":
            show_markdown(f"*{step_title(run)} timed out and was interrupted.*")
        elif not result.ok and result.error is not None:
            show_markdown(f"*{step_title(run)} failed: `{result.error.ename}`.*")

    def finish(self, answer: str, record: dict[str, Any]) -> None:
        """The answer was streamed already; close with a status line."""
        self._status.set(f"*{ending(self.info.model, record, done='')}*")

    def fail(self, error: AskError, status: str, record: dict[str, Any]) -> None:
        """The error itself is raised in the cell; keep the status line honest."""
        self._status.set(f"*{self.info.model} · ask {status}*")
