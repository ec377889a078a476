"""The `ask` of a REST session: the same loop, limits and memory as `%%ask`, driven in the server.

The loop is the sans-IO `AskLoop` driven by `drive_async`; code runs in the session's kernel
through its `KernelExecutor`; each model turn streams through the server's model service in
this process (the same adapters, budgets and metering as a kernel's %%ask, with the session
as the budget's holder). A client that hangs up or deletes the session cancels the task,
and with it the provider's stream.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from jupyter_ci.agent.drive import drive_async
from jupyter_ci.agent.errors import AskError
from jupyter_ci.agent.loop import AskLoop, Limits, RunCode
from jupyter_ci.agent.memory import Memory
from jupyter_ci.agent.outputs import OutputEvent
from jupyter_ci.agent.secrets import Redactor
from jupyter_ci.agent.types import CodeResult, ModelReply, ModelRequest, OnText
from jupyter_ci.config import JupyterCI
from jupyter_ci.models import retiring
from jupyter_ci.models.base import ChatModel
from jupyter_ci.models.broker import ENV_TOKEN
from jupyter_ci.models.recording import Recording
from jupyter_ci.models.recording import write as write_recording
from jupyter_ci.models.resolve import (
    default_model_id,
    parse_model_id,
    resolve_model,
)
from jupyter_ci.models.turn_wire import Turn
from jupyter_ci.server.model_service import ModelService, as_text_sink
from jupyter_ci.server.session_results import execute_result, markdown_cell
from jupyter_ci.server.sessions import Session, SessionError, SessionManager

#: Sends one server-sent event: (event name, data).
Emit = Callable[[str, dict[str, Any]], None]


def ask_token_id(sid: str) -> str:
    """Name the budget holder of a session's asks (closed with the session)."""
    return f"ask:{sid}"


@dataclass(frozen=True)
class AskRequest:
    """A validated ask: the prompt and what may override the settings."""

    prompt: str
    model: str | None = None
    timeout: float | None = None
    max_steps: int | None = None
    max_fixes: int | None = None

    def limits(self, ci: JupyterCI, model_id: str) -> Limits:
        """The ask's limits: the request's where given, else the server's settings."""
        return ci.limits(model_id, self.max_steps, self.max_fixes, self.timeout)


#: The fields an ask's body may hold.
FIELDS = tuple(f.name for f in fields(AskRequest))


class ServiceTurns:
    """The driver's model: each turn streams through the model service, in this process."""

    def __init__(self, service: ModelService, holder: str, model_id: str, record_dir: str
                 ) -> None:
        self.service, self.holder, self.id = service, holder, model_id
        self.record_dir = Path(record_dir) if record_dir else None
        self.turns: list[ModelReply] = []

    async def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        """Stream one turn on the event loop (no thread); cancelling stops the provider."""
        reply = await self.service.turn(self.holder, Turn(self.id, request),
                                        as_text_sink(on_text))
        if self.record_dir is not None:  # c.JupyterCI.record_dir, as for %%ask
            self.turns.append(reply)
            recording = Recording(request.prompt, self.id, tuple(self.turns))
            try:
                await asyncio.to_thread(write_recording, self.record_dir, recording)
            except OSError as error:
                self.service.warn(f"could not write the recording in {self.record_dir}: "
                                  f"{error.strerror or error}")
        return reply


class InProcessTurns:
    """A model that lives in the server process (a replay, the scripted double)."""

    def __init__(self, model: ChatModel) -> None:
        self.model, self.id = model, model.id

    async def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        """Call it in a worker thread (a replay reads files), its text back on the loop."""
        loop = asyncio.get_running_loop()

        def from_thread(delta: str) -> None:
            loop.call_soon_threadsafe(on_text, delta)

        return await asyncio.to_thread(self.model.complete, request, from_thread)


Turns = ServiceTurns | InProcessTurns


@dataclass
class EventView:
    """The driver's view: every event of the ask becomes a server-sent event."""

    emit: Emit
    steps: dict[int, dict[str, Any]] = field(default_factory=dict)

    def text(self, delta: str) -> None:
        """Stream the model's text."""
        self.emit("text", {"delta": delta})

    def turn_end(self) -> None:
        """A model turn ended (nothing to send: the next event says what follows)."""

    def step_start(self, run: RunCode) -> None:
        """A step's code is about to run."""
        self.emit("step_start", {"step": run.step, "attempt": run.attempt, "code": run.code})

    def output(self, event: OutputEvent) -> None:
        """A change of the running step's outputs."""
        if event.kind == "add":
            self.emit("output", {"output": event.output})
        elif event.kind == "clear":
            self.emit("clear_output", {"wait": event.wait})
        else:
            self.emit("set_outputs", {"outputs": list(event.outputs)})

    def step_end(self, run: RunCode, result: CodeResult) -> None:
        """A step's code finished; the last attempt of each step is what the steps list keeps."""
        error = result.error
        done = {"step": run.step, "attempt": run.attempt, "code": run.code,
                "status": execute_result(result, [])["status"],
                "execution_count": result.execution_count,
                "duration_ms": round(result.duration_s * 1000, 1),
                "error": {"ename": error.ename, "evalue": error.evalue} if error else None}
        self.steps[run.step] = {**done, "outputs": list(result.outputs)}
        self.emit("step_end", done)


class SessionSteps:
    """The executor the driver uses: runs in the session (its lock held by the ask)."""

    def __init__(self, manager: SessionManager, session: Session, view: EventView) -> None:
        self.manager, self.session, self.view = manager, session, view

    async def run(self, code: str, timeout: float) -> CodeResult:
        """Run one step's code, streaming its outputs."""
        result, files = await self.manager.run_locked(self.session, code, timeout,
                                                      self.view.output)
        if files:
            self.view.emit("files", {"files": files})
        return result


def parse(body: dict[str, Any]) -> AskRequest:
    """Validate an ask's body, raising SessionError with what is wrong."""
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise SessionError("'prompt' (a non-empty string) is required.")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise SessionError("'model' must be a string such as 'openai:gpt-5.5'.")
    numbers: dict[str, Any] = {}
    for name, kind in (("timeout", float), ("max_steps", int), ("max_fixes", int)):
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(
                value, (int, float) if kind is float else int) or value <= 0):
            raise SessionError(f"'{name}' must be a positive "
                               f"{'number' if kind is float else 'integer'}.")
        numbers[name] = value
    return AskRequest(prompt.strip(), model, **numbers)


async def resolve(manager: SessionManager, session: Session, model: str | None
                  ) -> tuple[Turns, Redactor]:
    """Pick the ask's model in the model service, and what to redact from the kernel's words."""
    service: ModelService | None = manager.service
    if service is None:
        raise SessionError("This server has no model service: asks are not available.")
    model = confine_replay(model, session.directory, manager.ci.record_dir)
    holder = ask_token_id(session.id)
    service.broker.budget.open(holder)
    # No fallback_model here, on purpose: it lets a demo notebook run before a key is set
    # (a replay beside it); a REST client with no model configured is told what to set.
    settings = replace(manager.ci.model_settings(), fallback="")
    turns: Turns
    try:
        model_id = model or default_model_id(settings, os.environ)
        if parse_model_id(model_id)[0].in_process:
            turns = InProcessTurns(resolve_model(model_id, settings, os.environ))
        else:
            await service.model(model_id)  # unknown model, no key: said now, before the ask
            turns = ServiceTurns(service, holder, model_id, manager.ci.record_dir)
    except AskError as error:
        raise SessionError(str(error)) from None
    # Redacted: every provider key the server holds, and the kernel's own credential.
    keys = [p.api_key for p in service.broker.providers.values() if p.api_key]
    return turns, Redactor([*keys, *_kernel_token(manager, session)])


def confine_replay(model: str | None, directory: Path, record_dir: str) -> str | None:
    """Return `model`, a `replay:` path made absolute and checked to be the session's own.

    The %%ask magic reads replays from the kernel's working directory; a REST client names
    one relative to its session's directory, and reads none outside it or record_dir.
    """
    provider, _, name = (model or "").strip().partition(":")
    if provider != "replay" or not name.strip():
        return model  # not a replay, or one parse_model_id refuses with its own message
    roots = [directory.resolve()]
    if record_dir:
        roots.append(Path(record_dir).expanduser().resolve())
    try:
        # Strict: every link followed to where it ends; an absolute name replaces directory.
        path: Path | None = (directory / name).resolve(strict=True)
    except (OSError, ValueError, RuntimeError):  # missing, a NUL byte, a symlink loop
        path = None
    if path is None or not any(path.is_relative_to(root) for root in roots):
        elsewhere = f", or inside c.JupyterCI.record_dir ({record_dir})" if record_dir else ""
        raise SessionError(
            f"Cannot replay {name!r}: a REST ask replays only a recording file or folder inside "
            f"the session's own directory (a path relative to it, such as replay:recordings)"
            f"{elsewhere}, and there is none there by that name.")
    return f"replay:{path}"


def _kernel_token(manager: SessionManager, session: Session) -> list[str]:
    """Return the broker token the session's kernel was started with, to redact it too."""
    # jupyter_client keeps the launch's env for restarts; no public accessor exists.
    launch = getattr(manager.km.get_kernel(session.kernel_id), "_launch_args", None) or {}
    token = (launch.get("env") or {}).get(ENV_TOKEN, "")
    return [token] if isinstance(token, str) and token else []


async def ask(manager: SessionManager, session: Session, request: AskRequest,
              chat: Turns, redactor: Redactor, emit: Emit) -> dict[str, Any]:
    """Run one ask in the session (its lock held by the caller); return the final event."""
    view = EventView(emit)
    if session.memory is None:
        session.memory = Memory(manager.ci.memory_tokens)
    memory: Memory = session.memory
    loop = AskLoop(request.prompt, context=f"Working directory: {session.directory.name}/ "
                   "(files you write there can be downloaded by the user).",
                   history=memory.messages(), limits=request.limits(manager.ci, chat.id),
                   redact=redactor,
                   # A REST client has no stdin to answer on: "never" unless "always".
                   install=manager.ci.install_policy(can_ask=False))
    session.history.append(markdown_cell(f"**Ask:** {request.prompt}"))
    warning = retiring.note(chat.id)
    if warning:  # a retiring model still answers: said, not refused
        manager.log.warning("jupyter-ci: session %s: %s", session.id, warning)
        emit("warning", {"message": warning})
    try:
        answer = await drive_async(loop, chat, SessionSteps(
            manager, session, view), view)
    except AskError as error:
        memory.remember(request.prompt, loop.transcript(), f"(The ask failed: {error})")
        return {"status": "failed", "answer": "", "error": {
            "message": error.message, "hint": error.hint, "type": type(error).__name__},
            "steps": _steps(view), "usage": {"tokens": loop.tokens_used}}
    memory.remember(request.prompt, loop.transcript(), answer)
    session.history.append(markdown_cell(answer))
    result: dict[str, Any] = {"status": "done", "answer": answer, "steps": _steps(view),
                              "usage": {"tokens": loop.tokens_used}}
    if loop.unresolved is not None:
        # Answered, but a step still fails: a client that checks for "done" must not pass it.
        result.update(status="unresolved", unresolved={
            **loop.unresolved.to_json(), "message": loop.unresolved.describe()})
    return result


def _steps(view: EventView) -> list[dict[str, Any]]:
    return [view.steps[k] for k in sorted(view.steps)]

