"""How an ask shows itself in the %%ask cell when no labextension is attached."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from IPython.display import DisplayHandle, display

from jupyter_ci.agent.disclosure import Part, total_tokens
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
from jupyter_ci.agent.feedback import strip_ansi
from jupyter_ci.agent.loop import RunCode
from jupyter_ci.agent.outputs import OutputEvent
from jupyter_ci.agent.restart import RestartProblem
from jupyter_ci.agent.types import CodeResult, Output
from jupyter_ci.kernel.capture import OWN_DISPLAYS, show_own_display, update_own_display
from jupyter_ci.kernel.protocol import AskInfo
from jupyter_ci.kernel.safe_markdown import bundle, collapsed
from jupyter_ci.kernel.safe_outputs import inert_bundle
from jupyter_ci.wire.events import AskStart, CodePreview, Notice, Text, WaitingForUser

# Re-rendering Markdown on every token floods the frontend; a few frames a second reads live.
REFRESH_S = 0.1
#: Lines of a running step's printed output shown under its code.
TAIL_LINES = 5


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
        data = bundle(self.text)
        if self._handle is None:
            shown = show_own_display(data)  # as display(), with fewer waits for IOPub
            self._handle = DisplayHandle(shown) if shown else display(
                data, raw=True, display_id=True)
            if self._handle is not None:
                OWN_DISPLAYS.add(self._handle.display_id)
        elif not update_own_display(data, self._handle.display_id):
            self._handle.update(data, raw=True)


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


def summary(model: str, outcome: Outcome) -> str:
    """Say what an ask took: model, steps and tokens."""
    steps = outcome.steps
    return f"{model} · {steps} step{'s' * (steps != 1)} · {outcome.tokens:,} tokens"


def ending(model: str, outcome: Outcome, done: str = "Done: ") -> str:
    """Say how an answered ask ended: done, or done with a step still failing."""
    if outcome.unresolved is not None:
        said = outcome.unresolved.describe()
        return f"{said[:1].upper()}{said[1:]} ({summary(model, outcome)})"
    return f"{done}{summary(model, outcome)}"


#: The most characters of a step's description in the log.
DESCRIPTION_CHARS = 60


def step_summary(code: str, narration: str = "") -> str:
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
    what = step_summary(run.code, narration)
    return f"Step {run.step}{retry}" + (f" · {what}" if what else "")


@dataclass
class Narration:
    """What the model said before each step: kept, and shown above its answer."""

    said: list[str] = field(default_factory=list)
    #: The text of the model's turn under way (narration or the answer).
    turn: str = ""

    def text(self, delta: str) -> str:
        """Take streamed text; return it as shown (a new turn is its own paragraph)."""
        if not self.turn and self.said:
            delta = "\n\n" + delta
        self.turn += delta
        return delta

    def step(self) -> str:
        """A step starts: the turn's text was narration; return it."""
        narration = self.turn.strip()
        if narration:
            self.said.append(narration)
        self.turn = ""
        return narration

    def sent_back(self) -> str:
        """The answer was sent back (no narration): return the narration alone."""
        self.turn = ""
        return "\n\n".join(self.said)

    def above(self, answer: str) -> str:
        """Return the answer with the narration above it."""
        return "\n\n".join([*self.said, answer.strip()])


@dataclass
class Disclosure:
    """What the last model call sent, shown folded at the ask's end with --show-context."""

    model: str
    show: bool = False
    last: RequestSent | None = None

    def keep(self, event: RequestSent) -> None:
        """Remember the request."""
        self.last = event

    def shown(self) -> None:
        """Show the last request, when asked to."""
        if self.show and self.last is not None:
            show_sent(self.model, self.last.parts)


@dataclass
class InlineView:
    """Everything inline: narration, each step's code and final outputs, the answer.

    An encoder of the ask's events (agent/events.py). Outputs are captured, not passed
    through: while an attempt runs, the step's header shows the tail of its printed output;
    when it ends, a successful attempt's outputs are shown under its code, and a failed one
    collapses into a line ("attempt 1 failed: NameError: ..."), so a headless notebook holds
    each step once, with no `error` output for a failure the model fixed. A failure nobody
    fixed (the ask failed, or the model answered over it) keeps its outputs, the traceback
    as text.
    """

    info: AskInfo
    show_context: bool = False
    _turn: LiveMarkdown | None = None
    #: The last model turn shown: at the end, the answer.
    _last_turn: LiveMarkdown | None = None
    _status: LiveMarkdown = field(default_factory=LiveMarkdown)
    _header: LiveMarkdown | None = None
    _code: str = ""
    _tail: str = ""
    #: The last attempt, while it failed and no retry came yet.
    _failed: tuple[RunCode, CodeResult] | None = None
    _sent: Disclosure | None = None

    def __call__(self, event: Event) -> None:
        """Show one event of the ask."""
        if not isinstance(event, Text | CodePreview | OutputsChanged):
            self._turn_end()  # the model's turn ended: what comes next is not its text
        match event:
            case AskStart():
                self._status.set(f"*Asking {self.info.model}…*")
            case Text(delta):
                self._turn = self._turn or LiveMarkdown()
                self._turn.append(delta)
            case RequestSent():
                self._disclosure().keep(event)
            case StepStarted(run):
                self._step_start(run)
            case OutputsChanged(change=change):
                self._output(change)
            case StepEnded(run, result):
                self._step_end(run, result)
            case StepSentBack(problem):
                self._sent_back(problem)
            case Notice(message):
                show_markdown(f"*⚠ {message}*")
            case WaitingForUser(kind="step", step=step, code=code):
                show_markdown(f"**Step {step} waits for you**\n\n{code_block(code or '')}")
            case WaitingForUser(kind="plan", plan=plan):
                show_markdown(f"**The model's plan**\n\n{plan}")
            case AskEnded(outcome):
                self._end(outcome)

    def _disclosure(self) -> Disclosure:
        self._sent = self._sent or Disclosure(self.info.model, self.show_context)
        return self._sent

    def _turn_end(self) -> None:
        """Show the rest of this turn's text."""
        if self._turn is not None:
            self._turn.flush()
            self._last_turn = self._turn
        self._turn = None

    def _step_start(self, run: RunCode) -> None:
        """Show the step's code; its outputs follow when it ends."""
        self._failed = None  # a retry: the failed attempt stays a collapsed line
        self._last_turn = None  # the text before a step was narration, not the answer
        self._code = f"**{step_title(run)}**\n\n{code_block(run.code)}"
        self._tail = ""
        self._header = LiveMarkdown()
        self._header.set(self._code + "\n\n*running…*")

    def _output(self, change: OutputEvent) -> None:
        """Show the last lines printed so far under the code, as a live preview."""
        out = change.output
        if self._header is None or change.kind != "add" or out is None or \
                out.get("output_type") != "stream":
            return
        self._tail = (self._tail + str(out.get("text", "")))[-4000:]
        tail = "\n".join(self._tail.rstrip("\n").splitlines()[-TAIL_LINES:])
        self._header.text = f"{self._code}\n\n{fenced(tail, '')}\n\n*running…*"
        if time.monotonic() - self._header.shown_at >= REFRESH_S:
            self._header.flush()

    def _step_end(self, run: RunCode, result: CodeResult) -> None:
        """Show a successful attempt's outputs; collapse a failed one into a line."""
        header = self._header or LiveMarkdown()
        self._header = None
        if result.ok:
            header.set(self._code)
            publish(result.outputs)
            return
        header.set(f"*{step_title(run)}: {attempt_failure(run, result)}.*")
        self._failed = (run, result)

    def _sent_back(self, problem: RestartProblem) -> None:
        """Say that the model was sent back to make a step self-contained."""
        if self._last_turn is not None:
            self._last_turn.set("")  # its answer was sent back: a new one comes
            self._last_turn = None
        show_markdown(f"*⚠ {problem.notice()}*")

    def _show_unfixed(self) -> None:
        """Show the outputs of a failed attempt that no retry replaced."""
        if self._failed is not None:
            run, result = self._failed
            self._failed = None
            show_markdown(f"*{step_title(run)}, not fixed: its output.*\n\n"
                          f"{code_block(run.code)}")
            publish(result.outputs, errors_as_text=True)

    def _end(self, outcome: Outcome) -> None:
        """Show the answer as finished (files linked), what was sent if asked, the status.

        A failed ask's error itself is raised in the cell; the status line stays honest.
        """
        answer = outcome.answer
        if outcome.status == "done" and self._last_turn is not None and \
                self._last_turn.text.strip() != answer.strip():
            self._last_turn.set(answer)
        self._show_unfixed()
        self._disclosure().shown()
        cost = f"  \n{line}" if (line := outcome.usage.line()) else ""  # tokens in, out, $
        if outcome.status == "done":
            self._status.set(f"*{ending(self.info.model, outcome, done='')}*{cost}")
        else:
            self._status.set(f"*{self.info.model} · ask {outcome.status}*{cost}")


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
        if out["output_type"] == "stream":
            stream = sys.stderr if out.get("name") == "stderr" else sys.stdout
            stream.write(str(out.get("text", "")))
            stream.flush()
        elif out["output_type"] == "display_data" or out["output_type"] == "execute_result":
            # The %%ask cell is trusted (the user ran it): model-written HTML must not run.
            publish_display_data(inert_bundle(dict(out.get("data", {}))),
                                 dict(out.get("metadata", {})))
        elif out["output_type"] == "error" and errors_as_text:
            sys.stderr.write(strip_ansi("\n".join(out.get("traceback", []))) + "\n")
            sys.stderr.flush()
