"""Drive an `AskLoop`: do the I/O it asks for, synchronously (kernel) or asynchronously (server).

Both forms share every decision through `_Steps`; they differ only in whether calling the
model and running code are awaited. Hooks that belong to every door (approval, install
policy, vision) go in `_Steps`, once; what happens is told as events (agent/events.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Protocol

from jupyter_ci.agent.actions import ApprovePlan, ApproveStep, Question, ReviewEdits
from jupyter_ci.agent.approval import Decision, EditDecision, parse_answer, parse_review
from jupyter_ci.agent.cost import AskUsage
from jupyter_ci.agent.disclosure import request_parts
from jupyter_ci.agent.errors import AskError, AskInterrupted, AskStopped
from jupyter_ci.agent.events import (
    Event,
    Outcome,
    RequestSent,
    StepEnded,
    StepSentBack,
    StepStarted,
    waiting_for,
)
from jupyter_ci.agent.install import checked_install
from jupyter_ci.agent.loop import Action, AskLoop, CallModel, ConfirmInstall, Fail, Finish, RunCode
from jupyter_ci.agent.partial import partial_code
from jupyter_ci.agent.prompts import TOOL_NAME
from jupyter_ci.agent.types import CodeResult, ModelReply, ModelRequest, OnText
from jupyter_ci.wire.events import CodePreview, Text, Thinking, Usage, WaitingForUser

#: Receives each event of the ask (a Journal's `emit`).
Emit = Callable[[Event], None]
#: Puts a yes/no question to the user (the kernel's stdin) and says whether they said yes.
Confirm = Callable[[str], bool]
#: What one reply cost in USD, None when the model is unpriced (agent/cost.py's Meter).
Price = Callable[[ModelReply], float | None]
#: Puts an approval or a review to the user, as told (the waiting_for_user event with its
#: approval_id); returns their answer as text (JSON or a word).
Decide = Callable[[WaitingForUser], str]
#: The same, from an event loop (a REST client answers with a call).
AsyncDecide = Callable[[WaitingForUser], Awaitable[str]]
#: Turns an exception that is not an AskError into the AskError that ends the ask (a door's).
Failure = Callable[[Exception], AskError]
#: What the user can be asked, beside an install.
QUESTIONS = (ApproveStep, ApprovePlan, ReviewEdits)


class Model(Protocol):
    """A chat model called synchronously (models.base.ChatModel is one)."""

    def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        """Stream one turn, calling `on_text` with text as it arrives; return the whole turn."""
        ...


class AsyncModel(Protocol):
    """A chat model called from an event loop."""

    async def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        """Stream one turn without blocking the event loop."""
        ...


class Executor(Protocol):
    """Runs code in a kernel and returns its outputs."""

    def run(self, code: str, timeout: float) -> CodeResult:
        """Run `code`, interrupting it after `timeout` seconds."""
        ...


class AsyncExecutor(Protocol):
    """Runs code in a kernel from an event loop."""

    async def run(self, code: str, timeout: float) -> CodeResult:
        """Run `code`, interrupting it after `timeout` seconds."""
        ...


#: Preview the code being written at most this often (each preview parses the arguments).
PREVIEW_S = 0.1


class _Steps:
    """What happens around each model call and code run, for both forms of the driver.

    Every step of the ask becomes an event here (request sent, thinking, code preview, step
    started and ended, waiting for the user), and its outcome is read here: the ask's start
    and end are told by its lifecycle (lifecycle.py).
    """

    def __init__(self, loop: AskLoop, emit: Emit, confirm: Confirm | None = None,
                 can_decide: bool = False, price: Price | None = None,
                 ask_id: str | None = None) -> None:
        self.loop, self.emit, self.confirm, self.ask_id = loop, emit, confirm, ask_id
        #: Prices each reply (a door's cost.Meter); the ask's tokens and cost so far.
        self.price = price
        self.usage = AskUsage()
        #: Whether someone answers approvals and reviews (else: edits are only listed).
        self.can_decide = can_decide
        #: The last attempt of each step that ran, and whether the last run failed: code
        #: being written is a fix of that step when it failed, else the next step.
        self.attempts: dict[int, int] = {}
        self.failed: int | None = None
        self.previewed_at = 0.0

    def request(self, action: CallModel) -> ModelRequest:
        """Emit what is sent and that the model thinks; previews follow its code."""
        if action.restart is not None:
            self.failed = action.restart.step  # its next code is that step's, made whole
            self.emit(StepSentBack(action.restart))
        self.previewed_at = 0.0  # the first preview of each call goes at once
        self.emit(RequestSent(tuple(request_parts(action.request))))
        self.emit(Thinking())
        return replace(action.request, on_tool_input=self._preview)

    def _preview(self, name: str, raw: str) -> None:
        now = time.monotonic()
        if name != TOOL_NAME or now - self.previewed_at < PREVIEW_S:
            return
        code = partial_code(raw)
        if code:
            self.previewed_at = now
            step = self.failed if self.failed is not None else max(self.attempts, default=0) + 1
            self.emit(CodePreview(step, self.attempts.get(step, 0) + 1, code))

    def text(self, delta: str) -> None:
        """Emit a piece of the model's text."""
        self.emit(Text(delta))

    def replied(self, reply: ModelReply) -> Action:
        action = self.loop.on_reply(reply)
        cost = self.price(reply) if self.price is not None else None
        was = self.usage
        self.usage = AskUsage(
            was.input_tokens + reply.input_tokens, was.output_tokens + reply.output_tokens,
            was.cached_tokens + reply.cached_tokens,
            was.cost_usd if cost is None else (was.cost_usd or 0.0) + cost)
        self.emit(Usage(reply.input_tokens, reply.output_tokens, self.loop.tokens_used,
                        reply.cached_tokens, cost, self.usage.cost_usd,
                        getattr(self.price, "context_window", None)))
        return action

    def outcome(self, end: Finish | AskError) -> Outcome:
        """Return how the ask ended: answered, or the error that ended it."""
        loop = self.loop
        if isinstance(end, Finish):
            return Outcome("done", end.answer, unresolved=loop.unresolved, steps=loop.step,
                           tokens=loop.tokens_used, usage=self.usage, edits=tuple(loop.edits))
        return Outcome("interrupted" if isinstance(end, AskInterrupted) else "failed",
                       error=end, steps=loop.step, tokens=loop.tokens_used, usage=self.usage,
                       edits=tuple(loop.edits))

    def before_run(self, run: RunCode) -> None:
        self.attempts[run.step] = run.attempt
        self.emit(StepStarted(run))

    def ran(self, run: RunCode, result: CodeResult) -> Action:
        if run.kind == "install":
            result = checked_install(run.package, result)
        self.failed = None if result.ok else run.step
        self.emit(StepEnded(run, result))
        return self.loop.on_result(result)

    def confirmed(self, action: ConfirmInstall) -> Action:
        # Nobody to ask (the policy said "ask" where no one can answer) is a no.
        if self.confirm is None:
            return self.loop.on_install_answer(False)
        self.emit(WaitingForUser(action.question))
        return self.loop.on_install_answer(self.confirm(action.question))

    def asking(self, asked: Question) -> WaitingForUser | None:
        """Tell the user the question (with the id to answer it by), when someone can answer."""
        if not self.can_decide:
            return None
        told = replace(waiting_for(asked), approval_id=uuid.uuid4().hex, ask_id=self.ask_id)
        self.emit(told)
        return told

    def answered(self, asked: Question, answer: str | None) -> Action:
        """Feed the user's answer (None: no one can answer) to the loop."""
        if isinstance(asked, ReviewEdits):
            decisions: dict[str, EditDecision] = (
                {edit.call_id: "proposed" for edit in asked.edits} if answer is None
                else parse_review(answer, asked.edits))
            return self.loop.on_review(decisions)
        decision = Decision("stop") if answer is None else parse_answer(answer)
        action = (self.loop.on_plan_answer(decision) if isinstance(asked, ApprovePlan)
                  else self.loop.on_approval(decision))
        if answer is None:  # the doors refuse such an ask first; this is the backstop
            return Fail(AskStopped("This ask waits for approval, and no one can answer here.",
                                   "Ask with --approve never, or where you can answer."))
        return action


def drive(loop: AskLoop, model: Model, executor: Executor, emit: Emit,
          confirm: Confirm | None = None, decide: Decide | None = None,
          price: Price | None = None, ask_id: str | None = None) -> Outcome:
    """Run the ask to its end; return its outcome (with the AskError that ended it, if any)."""
    steps = _Steps(loop, emit, confirm, decide is not None, price, ask_id)
    try:
        action = loop.start()
        while True:
            if isinstance(action, CallModel):
                action = steps.replied(model.complete(steps.request(action), steps.text))
            elif isinstance(action, QUESTIONS):
                told = steps.asking(action)
                action = steps.answered(action, decide(told) if told and decide else None)
            elif isinstance(action, ConfirmInstall):
                action = steps.confirmed(action)
            elif isinstance(action, RunCode):
                steps.before_run(action)
                action = steps.ran(action, executor.run(action.code, action.timeout))
            else:
                return steps.outcome(action if isinstance(action, Finish) else action.error)
    except AskError as error:
        return steps.outcome(error)
    except KeyboardInterrupt:  # the kernel's interrupt, between or inside steps
        return steps.outcome(AskInterrupted("The ask was interrupted.",
                                            "Cells run so far keep their results."))


async def drive_async(loop: AskLoop, model: AsyncModel, executor: AsyncExecutor,
                      emit: Emit, decide: AsyncDecide | None = None,
                      price: Price | None = None, ask_id: str | None = None,
                      failure: Failure | None = None) -> Outcome:
    """Run the ask to its end from an event loop; the same decisions as `drive`.

    Any other exception is the ask's failure through `failure` (else it propagates);
    cancelling the task (a hang-up) cancels the ask.
    """
    # No one answers an install question here (a REST client has no stdin).
    steps = _Steps(loop, emit, can_decide=decide is not None, price=price, ask_id=ask_id)
    try:
        action = loop.start()
        while True:
            if isinstance(action, CallModel):
                action = steps.replied(await model.complete(steps.request(action), steps.text))
            elif isinstance(action, QUESTIONS):
                told = steps.asking(action)
                action = steps.answered(action, await decide(told) if told and decide else None)
            elif isinstance(action, ConfirmInstall):
                action = steps.confirmed(action)
            elif isinstance(action, RunCode):
                steps.before_run(action)
                action = steps.ran(action, await executor.run(action.code, action.timeout))
            else:
                return steps.outcome(action if isinstance(action, Finish) else action.error)
    except AskError as error:
        return steps.outcome(error)
    except Exception as exc:
        if failure is None:
            raise
        return steps.outcome(failure(exc))
