"""Drive an `AskLoop`: do the I/O it asks for, synchronously (kernel) or asynchronously (server).

Both forms share every decision through `_Turns`; they differ only in whether calling the
model and running code are awaited. Hooks that belong to every door (approval, install
policy, vision) go in `_Turns`, once; what happens is told as events (agent/events.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from jupyter_ci.agent.disclosure import request_parts
from jupyter_ci.agent.events import (
    CodePreview,
    Event,
    RequestSent,
    StepEnded,
    StepSentBack,
    StepStarted,
    Text,
    Thinking,
    Usage,
    WaitingForUser,
)
from jupyter_ci.agent.install import checked_install
from jupyter_ci.agent.loop import Action, AskLoop, CallModel, ConfirmInstall, Fail, Finish, RunCode
from jupyter_ci.agent.partial import partial_code
from jupyter_ci.agent.prompts import TOOL_NAME
from jupyter_ci.agent.types import CodeResult, ModelReply, ModelRequest, OnText

#: Receives each event of the ask (a Journal's `emit`).
Emit = Callable[[Event], None]
#: Puts a yes/no question to the user (the kernel's stdin) and says whether they said yes.
Confirm = Callable[[str], bool]


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


class _Turns:
    """What happens around each model call and code run, for both forms of the driver.

    Every step of the ask becomes an event here (request sent, thinking, code preview, step
    started and ended, waiting for the user): the doors only add the ask's start and end.
    """

    def __init__(self, loop: AskLoop, emit: Emit, confirm: Confirm | None = None) -> None:
        self.loop, self.emit, self.confirm = loop, emit, confirm
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
        self.emit(Usage(reply.input_tokens, reply.output_tokens, self.loop.tokens_used))
        return action

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


def drive(loop: AskLoop, model: Model, executor: Executor, emit: Emit,
          confirm: Confirm | None = None) -> str:
    """Run the ask to its end and return the answer; raise the AskError that ended it."""
    turns = _Turns(loop, emit, confirm)
    action = loop.start()
    while True:
        if isinstance(action, CallModel):
            action = turns.replied(model.complete(turns.request(action), turns.text))
        elif isinstance(action, ConfirmInstall):
            action = turns.confirmed(action)
        elif isinstance(action, RunCode):
            turns.before_run(action)
            action = turns.ran(action, executor.run(action.code, action.timeout))
        else:
            return _end(action)


async def drive_async(loop: AskLoop, model: AsyncModel, executor: AsyncExecutor,
                      emit: Emit) -> str:
    """Run the ask to its end from an event loop; the same decisions as `drive`."""
    turns = _Turns(loop, emit)  # no one to ask here (a REST client has no stdin)
    action = loop.start()
    while True:
        if isinstance(action, CallModel):
            action = turns.replied(await model.complete(turns.request(action), turns.text))
        elif isinstance(action, ConfirmInstall):
            action = turns.confirmed(action)
        elif isinstance(action, RunCode):
            turns.before_run(action)
            action = turns.ran(action, await executor.run(action.code, action.timeout))
        else:
            return _end(action)


def _end(action: Finish | Fail) -> str:
    """Return a finished ask's answer, or raise why it failed."""
    if isinstance(action, Finish):
        return action.answer
    raise action.error
