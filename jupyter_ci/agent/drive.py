"""Drive an `AskLoop`: do the I/O it asks for, synchronously (kernel) or asynchronously (server).

Both forms share every decision through `_Turns`; they differ only in whether calling the
model and running code are awaited. Hooks that belong to every door (approval, install
policy, vision) go in `_Turns`, once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from jupyter_ci.agent.install import checked_install
from jupyter_ci.agent.loop import Action, AskLoop, CallModel, ConfirmInstall, Fail, Finish, RunCode
from jupyter_ci.agent.partial import partial_code
from jupyter_ci.agent.prompts import TOOL_NAME
from jupyter_ci.agent.types import CodeResult, ModelReply, ModelRequest, OnText

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


class View(Protocol):
    """Shows an ask as it happens; it learns the current step from `step_start`."""

    def text(self, delta: str) -> None:
        """Show a piece of model text as it streams."""

    def turn_end(self) -> None:
        """The model's turn is complete."""

    def step_start(self, run: RunCode) -> None:
        """Code is about to run; outputs that follow belong to this step."""

    def step_end(self, run: RunCode, result: CodeResult) -> None:
        """The step's code finished (or failed, or timed out)."""


class _Turns:
    """What happens around each model call and code run, for both forms of the driver."""

    def __init__(self, loop: AskLoop, view: View, confirm: Confirm | None = None) -> None:
        self.loop = loop
        self.view = view
        self.confirm = confirm

    def request(self, action: CallModel) -> ModelRequest:
        """The request of a model call; a view that previews code gets it as it streams."""
        restart_fix = getattr(self.view, "restart_fix", None)
        if action.restart is not None and restart_fix is not None:
            restart_fix(action.restart)  # the model is sent back: say so, and which step
        preview = getattr(self.view, "code_preview", None)
        if preview is None:
            return action.request

        def on_tool_input(name: str, raw: str) -> None:
            code = partial_code(raw) if name == TOOL_NAME else None
            if code:
                preview(code)

        return replace(action.request, on_tool_input=on_tool_input)

    def replied(self, reply: ModelReply) -> Action:
        self.view.turn_end()
        return self.loop.on_reply(reply)

    def before_run(self, run: RunCode) -> None:
        self.view.step_start(run)

    def ran(self, run: RunCode, result: CodeResult) -> Action:
        if run.kind == "install":
            result = checked_install(run.package, result)
        self.view.step_end(run, result)
        return self.loop.on_result(result)

    def confirmed(self, action: ConfirmInstall) -> Action:
        # Nobody to ask (the policy said "ask" where no one can answer) is a no.
        approved = self.confirm is not None and self.confirm(action.question)
        return self.loop.on_install_answer(approved)


def drive(loop: AskLoop, model: Model, executor: Executor, view: View,
          confirm: Confirm | None = None) -> str:
    """Run the ask to its end and return the answer; raise the AskError that ended it."""
    turns = _Turns(loop, view, confirm)
    action = loop.start()
    while True:
        if isinstance(action, CallModel):
            action = turns.replied(model.complete(turns.request(action), view.text))
        elif isinstance(action, ConfirmInstall):
            action = turns.confirmed(action)
        elif isinstance(action, RunCode):
            turns.before_run(action)
            action = turns.ran(action, executor.run(action.code, action.timeout))
        else:
            return _end(action)


async def drive_async(loop: AskLoop, model: AsyncModel, executor: AsyncExecutor,
                      view: View) -> str:
    """Run the ask to its end from an event loop; the same decisions as `drive`."""
    turns = _Turns(loop, view)  # no one to ask here (a REST client has no stdin)
    action = loop.start()
    while True:
        if isinstance(action, CallModel):
            action = turns.replied(await model.complete(turns.request(action), view.text))
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
