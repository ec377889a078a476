"""An ask's events: what happened, typed, each with one JSON form (docs/protocol.md).

The driver, the doors (`%%ask`, the REST ask) and the headless replay emit these into a
`Journal`; the %%ask cell, the labextension's comm and the REST stream are encoders of that
one stream. An event's JSON form is its `to_json()`: the comm sends it as it is (with its
envelope), the REST stream names the server-sent event by its `type`. A new event is a
class here, emitted where it happens: every encoder that forwards events sends it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from jupyter_ci.agent.actions import (
    ApprovePlan,
    ApproveStep,
    Question,
    RunCode,
    Unresolved,
)
from jupyter_ci.agent.approval import EditDecision, ProposedEdit
from jupyter_ci.agent.cost import AskUsage, usd
from jupyter_ci.agent.disclosure import Part
from jupyter_ci.agent.errors import AskError
from jupyter_ci.agent.outputs import OutputEvent
from jupyter_ci.agent.restart import RestartProblem
from jupyter_ci.agent.types import CodeResult, Output

AskStatus = Literal["done", "failed", "interrupted"]
#: What a waiting question is about.
WaitKind = Literal["install", "step", "plan", "edits"]


@dataclass(frozen=True)
class AskStarted:
    """An ask began: who is asked what."""

    ask_id: str
    prompt: str
    model: str

    def to_json(self) -> dict[str, Any]:
        """Return the event's JSON form."""
        return {"type": "ask_start", "ask_id": self.ask_id, "prompt": self.prompt,
                "model": self.model}


@dataclass(frozen=True)
class RequestSent:
    """The model was sent a request: its parts, as a user checks them (--show-context)."""

    parts: tuple[Part, ...]

    def to_json(self) -> dict[str, Any]:
        """Return the event's JSON form."""
        return {"type": "request_sent", "parts": [part.to_json() for part in self.parts]}


@dataclass(frozen=True)
class Thinking:
    """The model is called and nothing came back yet."""

    def to_json(self) -> dict[str, Any]:
        """Return the event's JSON form."""
        return {"type": "thinking"}


@dataclass(frozen=True)
class Text:
    """A piece of the model's text as it streams."""

    delta: str

    def to_json(self) -> dict[str, Any]:
        """Return the event's JSON form."""
        return {"type": "text", "delta": self.delta}


@dataclass(frozen=True)
class Usage:
    """The tokens and cost of the model's turn just ended, and of the whole ask so far.

    `input_tokens` counts the whole prompt, `cached_tokens` of it read from the provider's
    cache; costs are USD (None: the model has no price, agent/cost.py); `context_window`
    is the model's, in tokens, when its price entry gives it.
    """

    input_tokens: int
    output_tokens: int
    ask_tokens: int
    cached_tokens: int = 0
    cost_usd: float | None = None
    ask_cost_usd: float | None = None
    context_window: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the event's JSON form."""
        return {"type": "usage", "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "ask_tokens": self.ask_tokens,
                "cached_tokens": self.cached_tokens, "cost_usd": usd(self.cost_usd),
                "ask_cost_usd": usd(self.ask_cost_usd), "context_window": self.context_window}


@dataclass(frozen=True)
class CodePreview:
    """The code of a step the model is still writing (a fix of the last step if it failed)."""

    step: int
    attempt: int
    code: str

    def to_json(self) -> dict[str, Any]:
        """Return the event's JSON form."""
        return {"type": "code_preview", "step": self.step, "attempt": self.attempt,
                "code": self.code}


@dataclass(frozen=True)
class StepStarted:
    """A step's code is about to run; the outputs that follow are its."""

    run: RunCode

    def to_json(self) -> dict[str, Any]:
        """Return the event's JSON form."""
        run = self.run
        return {"type": "step_start", "step": run.step, "attempt": run.attempt,
                "kind": run.kind, "package": run.package, "code": run.code}


@dataclass(frozen=True)
class OutputsChanged:
    """The running step's outputs changed; `outputs` is the list as it now stands."""

    step: int
    change: OutputEvent

    @property
    def outputs(self) -> tuple[Output, ...]:
        """Return the step's outputs as they stand (read from their list when asked)."""
        source = self.change.source
        return source.snapshot() if source is not None else ()

    @property
    def clear_pending(self) -> bool:
        """Tell whether a clear_output(wait=True) waits for the next output."""
        source = self.change.source
        return source is not None and source.clear_pending

    def to_json(self) -> dict[str, Any]:
        """Return the event's JSON form: the change (the list is the sum of the changes)."""
        change = self.change
        if change.kind == "add":
            return {"type": "output", "step": self.step, "output": change.output}
        if change.kind == "clear":
            return {"type": "clear_output", "step": self.step, "wait": change.wait}
        return {"type": "set_outputs", "step": self.step, "outputs": list(change.outputs)}


@dataclass(frozen=True)
class StepEnded:
    """A step's code finished, failed, timed out, was interrupted, or its kernel died."""

    run: RunCode
    result: CodeResult

    def to_json(self) -> dict[str, Any]:
        """Return the event's JSON form."""
        run, result, error = self.run, self.result, self.result.error
        return {"type": "step_end", "step": run.step, "attempt": run.attempt,
                "kind": run.kind, "code": run.code, "status": result.status,
                "execution_count": result.execution_count,
                "duration_ms": round(result.duration_s * 1000, 1),
                "error": {"ename": error.ename, "evalue": error.evalue} if error else None}


@dataclass(frozen=True)
class FilesWritten:
    """The running step wrote files the user can download (a REST session's directory)."""

    step: int
    #: Each file as the API lists it (path, size, mime).
    files: tuple[dict[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        """Return the event's JSON form."""
        return {"type": "files", "step": self.step, "files": list(self.files)}


@dataclass(frozen=True)
class StepSentBack:
    """The model's answer was sent back: a kept step would fail after a restart."""

    problem: RestartProblem

    def to_json(self) -> dict[str, Any]:
        """Return the event's JSON form."""
        return {"type": "step_sent_back", "step": self.problem.step,
                "message": self.problem.notice()}


@dataclass(frozen=True)
class Notice:
    """Something the user should know that does not stop the ask (a retiring model)."""

    message: str

    def to_json(self) -> dict[str, Any]:
        """Return the event's JSON form."""
        return {"type": "warning", "message": self.message}


@dataclass(frozen=True)
class WaitingForUser:
    """A question waits for the user (the model is not thinking): an install, a step to
    approve, a plan to approve or edits to review."""

    question: str
    kind: WaitKind = "install"
    step: int | None = None
    attempt: int | None = None
    code: str | None = None
    plan: str | None = None
    edits: tuple[ProposedEdit, ...] | None = None

    @classmethod
    def of(cls, asked: Question) -> WaitingForUser:
        """Return the event that puts `asked` to the user."""
        if isinstance(asked, ApproveStep):
            return cls(asked.question, "step", asked.run.step, asked.run.attempt, asked.run.code)
        if isinstance(asked, ApprovePlan):
            return cls(asked.question, "plan", plan=asked.plan)
        return cls(asked.question, "edits", edits=asked.edits)

    def to_json(self) -> dict[str, Any]:
        """Return the event's JSON form."""
        edits = None if self.edits is None else [edit.to_json() for edit in self.edits]
        return {"type": "waiting_for_user", "question": self.question, "kind": self.kind,
                "step": self.step, "attempt": self.attempt, "code": self.code,
                "plan": self.plan, "edits": edits}


@dataclass(frozen=True)
class Outcome:
    """How an ask ended: the one reading the REST result, the comm's end and the record share."""

    status: AskStatus
    answer: str = ""
    error: AskError | None = None
    #: Answered while a step still failed: done, but not a clean done.
    unresolved: Unresolved | None = None
    steps: int = 0
    tokens: int = 0
    #: The ask's tokens in, out and cached, and their cost (the door's cost.Meter).
    usage: AskUsage = field(default_factory=AskUsage)
    #: The edits of the user's cells proposed in the ask, and what became of each.
    edits: tuple[tuple[ProposedEdit, EditDecision], ...] = ()

    def error_json(self) -> dict[str, str] | None:
        """Return the error as the API and the comm give it."""
        error = self.error
        if error is None:
            return None
        return {"message": error.message, "hint": error.hint, "type": type(error).__name__}

    def unresolved_json(self) -> dict[str, Any] | None:
        """Return the unresolved step with the sentence every door shows."""
        if self.unresolved is None:
            return None
        return {**self.unresolved.to_json(), "message": self.unresolved.describe()}

    def to_json(self) -> dict[str, Any]:
        """Return the outcome's JSON form."""
        return {"status": self.status, "answer": self.answer, "error": self.error_json(),
                "unresolved": self.unresolved_json(), "steps": self.steps,
                "tokens": self.tokens, "usage": self.usage.to_json(),
                "edits": [{**edit.to_json(), "decision": said} for edit, said in self.edits]}


@dataclass(frozen=True)
class AskEnded:
    """The ask ended, answered or not."""

    outcome: Outcome

    def to_json(self) -> dict[str, Any]:
        """Return the event's JSON form."""
        return {"type": "ask_end", **self.outcome.to_json()}


Event = (AskStarted | RequestSent | Thinking | Text | Usage | CodePreview | StepStarted
         | OutputsChanged | StepEnded | FilesWritten | StepSentBack | Notice | WaitingForUser
         | AskEnded)
#: Receives each event of an ask as it happens (an encoder).
Encoder = Callable[[Event], None]


@dataclass
class Journal:
    """One ask's events, handed to each encoder in order; what a late page needs is kept.

    It keeps the events that place the ask's steps (its start, each step's start and end, its
    end) and each step's last outputs event, which carries the list as it now stands: a page
    that joins late rebuilds the ask from `catch_up()`.
    """

    encoders: list[Encoder] = field(default_factory=list)
    placed: list[AskStarted | StepStarted | StepEnded | AskEnded] = field(default_factory=list)
    outputs: dict[int, OutputsChanged] = field(default_factory=dict)
    #: The step whose outputs arrive now.
    step: int = 0
    # Outputs arrive on the kernel's IOPub thread as well as the main one. Held only to keep
    # events, never while encoding or reading an output list: the IOPub thread holds its
    # list's lock when it emits, so holding ours around a list's would deadlock.
    lock: threading.Lock = field(default_factory=threading.Lock)

    def emit(self, event: Event) -> None:
        """Keep what a late page needs of `event` and give it to every encoder."""
        with self.lock:
            if isinstance(event, AskStarted | StepStarted | StepEnded | AskEnded):
                self.placed.append(event)
            if isinstance(event, StepStarted):
                self.step = event.run.step
                self.outputs.pop(event.run.step, None)  # a new attempt starts empty
            elif isinstance(event, OutputsChanged):
                self.outputs[event.step] = event
        for encode in self.encoders:
            encode(event)

    def output(self, change: OutputEvent) -> None:
        """Emit a change of the running step's outputs (an executor's listener)."""
        self.emit(OutputsChanged(self.step, change))

    def catch_up(self) -> list[dict[str, Any]]:
        """Return the ask so far as JSON events a page applies in order.

        Each step's outputs as they stand follow its last start; a pending clear follows
        them, so the next output replaces them as it does live.
        """
        with self.lock:
            placed, outputs = list(self.placed), dict(self.outputs)
        last_start = {e.run.step: i for i, e in enumerate(placed) if isinstance(e, StepStarted)}
        events: list[dict[str, Any]] = []
        for i, event in enumerate(placed):
            events.append(event.to_json())
            if isinstance(event, StepStarted) and last_start[event.run.step] == i:
                events += self._outputs_now(event.run.step, outputs.get(event.run.step))
        return events

    @staticmethod
    def _outputs_now(step: int, now: OutputsChanged | None) -> list[dict[str, Any]]:
        if now is None:
            return [{"type": "set_outputs", "step": step, "outputs": []}]
        shown = [{"type": "set_outputs", "step": step, "outputs": list(now.outputs)}]
        if now.clear_pending:
            shown.append({"type": "clear_output", "step": step, "wait": True})
        return shown

    def ended(self) -> list[StepEnded]:
        """Return the last end of each step, in step order (what the REST result lists)."""
        with self.lock:
            last = {e.run.step: e for e in self.placed if isinstance(e, StepEnded)}
        return [last[step] for step in sorted(last)]

