"""An ask's events: what happened, typed, each with one JSON form (docs/protocol.md).

The driver, the doors (`%%ask`, the REST ask) and the headless replay emit these into a
`Journal`; the %%ask cell, the labextension's comm and the REST stream are encoders of that
one stream. An event's JSON form is `event_json(event)`, its wire form (jupyter_ci/wire)
encoded: the comm sends it as it is (with its envelope), the REST stream names the
server-sent event by its `type`. Events that are plain data are the wire classes
themselves; those that carry live objects (a run, a result, an output list) give their
wire form. A new event is a wire class, emitted where it happens.
"""

from __future__ import annotations

import threading
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jupyter_ci.agent.actions import (
    ApprovePlan,
    ApproveStep,
    Question,
    RunCode,
    Unresolved,
)
from jupyter_ci.agent.approval import EditDecision, ProposedEdit
from jupyter_ci.agent.cost import AskUsage
from jupyter_ci.agent.disclosure import Part
from jupyter_ci.agent.errors import AskError
from jupyter_ci.agent.outputs import OutputEvent
from jupyter_ci.agent.restart import RestartProblem
from jupyter_ci.agent.types import CodeResult, Output
from jupyter_ci.wire import events as wire
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.events import AskStart, JSONObject
from jupyter_ci.wire.events import AskStatus as AskStatus
from jupyter_ci.wire.events import CodePreview as CodePreview
from jupyter_ci.wire.events import Notice as Notice
from jupyter_ci.wire.events import Text as Text
from jupyter_ci.wire.events import Thinking as Thinking
from jupyter_ci.wire.events import Usage as Usage
from jupyter_ci.wire.events import WaitingForUser as WaitingForUser
from jupyter_ci.wire.frozen import frozen
from jupyter_ci.wire.results import ApprovalNote, AskResult, ResultUsage

#: The ask's start as the doors have named it (the wire class is `AskStart`).
AskStarted = AskStart
#: The running step wrote files (the wire class is `Files`).
FilesWritten = wire.Files


@frozen
class RequestSent:
    """The model was sent a request: its parts, as a user checks them (--show-context)."""

    parts: tuple[Part, ...]

    def to_wire(self) -> wire.RequestSent:
        """Return the event's wire form."""
        return wire.RequestSent(tuple(wire.Part(p.name, p.tokens, p.text) for p in self.parts))


@frozen
class StepStarted:
    """A step's code is about to run; the outputs that follow are its."""

    run: RunCode

    def to_wire(self) -> wire.StepStart:
        """Return the event's wire form."""
        run = self.run
        return wire.StepStart(run.step, run.attempt, run.kind, run.package, run.code)


@frozen
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

    def to_wire(self) -> wire.Output | wire.ClearOutput | wire.SetOutputs:
        """Return the event's wire form: the change (the list is the sum of the changes)."""
        change = self.change
        if change.kind == "add" and change.output is not None:  # an add always carries one
            return wire.Output(self.step, change.output)
        if change.kind == "clear":
            return wire.ClearOutput(self.step, change.wait)
        return wire.SetOutputs(self.step, tuple(change.outputs))


@frozen
class StepEnded:
    """A step's code finished, failed, timed out, was interrupted, or its kernel died."""

    run: RunCode
    result: CodeResult

    def to_wire(self) -> wire.StepEnd:
        """Return the event's wire form."""
        run, result, error = self.run, self.result, self.result.error
        return wire.StepEnd(run.step, run.attempt, run.kind, run.code, result.status,
                            result.execution_count, round(result.duration_s * 1000, 1),
                            wire.StepError(error.ename, error.evalue) if error else None)


@frozen
class StepSentBack:
    """The model's answer was sent back: a kept step would fail after a restart."""

    problem: RestartProblem

    def to_wire(self) -> wire.StepSentBack:
        """Return the event's wire form."""
        return wire.StepSentBack(self.problem.step, self.problem.notice())


def waiting_for(asked: Question) -> WaitingForUser:
    """Return the event that puts `asked` to the user."""
    if isinstance(asked, ApproveStep):
        return WaitingForUser(asked.question, "step", asked.run.step, asked.run.attempt,
                              asked.run.code)
    if isinstance(asked, ApprovePlan):
        return WaitingForUser(asked.question, "plan", plan=asked.plan)
    return WaitingForUser(asked.question, "edits", edits=asked.edits)


@frozen
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

    def error_wire(self) -> wire.AskFailure | None:
        """Return the error as the API and the comm give it."""
        error = self.error
        if error is None:
            return None
        return wire.AskFailure(error.message, error.hint, type(error).__name__)

    def unresolved_wire(self) -> wire.UnresolvedStep | None:
        """Return the unresolved step with the sentence every door shows."""
        found = self.unresolved
        if found is None:
            return None
        return wire.UnresolvedStep(found.step, found.error, found.names, found.describe())

    @property
    def result_status(self) -> wire.ResultStatus:
        """Return the status as REST and MCP read it, decided here once."""
        if self.status == "interrupted":  # the user said stop, or no answer came in time
            return "stopped"
        if self.unresolved is not None:  # a client that checks for "done" must not pass it
            return "unresolved"
        return "failed" if self.status == "failed" else "done"

    def usage_wire(self) -> wire.UsageTotals:
        """Return the ask's tokens and cost in their wire form."""
        usage = self.usage
        return wire.UsageTotals(usage.input_tokens, usage.output_tokens, usage.cached_tokens,
                                usage.cost_usd)

    def to_wire(self) -> wire.Outcome:
        """Return the outcome's wire form."""
        return wire.Outcome(
            self.status, self.answer, self.error_wire(), self.unresolved_wire(), self.steps,
            self.tokens, self.usage_wire(),
            tuple(wire.EditOutcome(e.call_id, e.cell_id, e.old, e.new, said)
                  for e, said in self.edits))

    def to_result(self, steps: tuple[JSONObject, ...],
                  approvals: tuple[ApprovalNote, ...] = ()) -> AskResult:
        """Return the outcome as a REST ask's end reads it, with its steps and approvals."""
        return AskResult(self.result_status, self.answer, steps,
                         ResultUsage(self.tokens, self.usage_wire()), approvals,
                         self.error_wire(), self.unresolved_wire())


@frozen
class AskEnded:
    """The ask ended, answered or not."""

    outcome: Outcome

    def to_wire(self) -> wire.AskEnd:
        """Return the event's wire form."""
        return wire.AskEnd(self.outcome.to_wire())


Event = (AskStarted | RequestSent | Thinking | Text | Usage | CodePreview | StepStarted
         | OutputsChanged | StepEnded | FilesWritten | StepSentBack | Notice | WaitingForUser
         | AskEnded)
#: The events that carry live objects, and how each gives its wire form when encoded.
_TO_WIRE: dict[type, Callable[[Any], wire.Event]] = {
    cls: cls.to_wire for cls in (RequestSent, StepStarted, OutputsChanged, StepEnded,
                                 StepSentBack, AskEnded)}
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
        for encoder in self.encoders:
            encoder(event)

    def output(self, change: OutputEvent) -> None:
        """Emit a change of the running step's outputs (an executor's listener)."""
        self.emit(OutputsChanged(self.step, change))

    def catch_up(self) -> list[JSONObject]:
        """Return the ask so far as the JSON events a page applies in order (`caught_up`)."""
        return [typing.cast(JSONObject, encode(event)) for event in self.caught_up()]

    def caught_up(self) -> list[wire.Event]:
        """Return the ask so far as the wire events a page applies in order.

        Each step's outputs as they stand follow its last start; a pending clear follows
        them, so the next output replaces them as it does live.
        """
        with self.lock:
            placed, outputs = list(self.placed), dict(self.outputs)
        last_start = {e.run.step: i for i, e in enumerate(placed) if isinstance(e, StepStarted)}
        events: list[wire.Event] = []
        for i, event in enumerate(placed):
            events.append(wire_of(event))
            if isinstance(event, StepStarted) and last_start[event.run.step] == i:
                events += self._outputs_now(event.run.step, outputs.get(event.run.step))
        return events

    @staticmethod
    def _outputs_now(step: int, now: OutputsChanged | None) -> list[wire.Event]:
        if now is None:
            return [wire.SetOutputs(step, ())]
        shown: list[wire.Event] = [wire.SetOutputs(step, now.outputs)]
        if now.clear_pending:
            shown.append(wire.ClearOutput(step, True))
        return shown

    def ended(self) -> list[StepEnded]:
        """Return the last end of each step, in step order (what the REST result lists)."""
        with self.lock:
            last = {e.run.step: e for e in self.placed if isinstance(e, StepEnded)}
        return [last[step] for step in sorted(last)]


def wire_of(event: Event) -> wire.Event:
    """Return an event's wire form (the event itself when it is plain data)."""
    to_wire = _TO_WIRE.get(type(event))
    return typing.cast(wire.Event, event if to_wire is None else to_wire(event))


def event_json(event: Event) -> JSONObject:
    """Return an event's JSON form (docs/protocol.md): its wire form, encoded."""
    return typing.cast(JSONObject, encode(wire_of(event)))
