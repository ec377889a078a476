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
import sys
import time
import traceback
import uuid
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from jupyter_ci.agent.cost import Meter, price_table
from jupyter_ci.agent.errors import AskError
from jupyter_ci.agent.events import (
    AskEnded,
    Event,
    FilesWritten,
    Journal,
    Outcome,
    event_json,
)
from jupyter_ci.agent.lifecycle import AskLife
from jupyter_ci.agent.loop import AskLoop, Limits
from jupyter_ci.agent.memory import Memory
from jupyter_ci.agent.prompts import system_prompt
from jupyter_ci.agent.secrets import Redactor
from jupyter_ci.agent.types import CodeResult, ModelReply, ModelRequest, OnText
from jupyter_ci.config import JupyterCI
from jupyter_ci.models import retiring
from jupyter_ci.models.base import ChatModel, SeesImages
from jupyter_ci.models.broker import ENV_TOKEN
from jupyter_ci.models.recording import Recording
from jupyter_ci.models.recording import write as write_recording
from jupyter_ci.models.resolve import (
    canonical_model_id,
    default_model_id,
    parse_model_id,
    resolve_model,
)
from jupyter_ci.models.turn_wire import Turn
from jupyter_ci.providers import model_sees_images
from jupyter_ci.server.sessions.approvals import Asker, EmitSSE, approval_mode, check_mode
from jupyter_ci.server.sessions.errors import SessionError
from jupyter_ci.server.sessions.fields import Check, names_of, read_body
from jupyter_ci.server.sessions.manager import SessionManager
from jupyter_ci.server.sessions.ports import ModelPort, as_text_sink, ask_token_id
from jupyter_ci.server.sessions.results import markdown_cell
from jupyter_ci.server.sessions.session import Session
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.requests import Ask
from jupyter_ci.wire.results import AskResult


class ServiceModel:
    """The driver's model: each turn streams through the model service, in this process."""

    def __init__(self, service: ModelPort, holder: str, model_id: str, record_dir: str
                 ) -> None:
        self.service, self.holder, self.id = service, holder, model_id
        self.record_dir = Path(record_dir) if record_dir else None
        self.turns: list[ModelReply] = []
        self.sees_images = model_sees_images(model_id)
        #: The ask's tokens and cost (set by `resolve` from c.JupyterCI.prices).
        self.meter = Meter(None)

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


class InProcessModel:
    """A model that lives in the server process (a replay, the scripted double)."""

    def __init__(self, model: ChatModel) -> None:
        self.model, self.id = model, model.id
        self.sees_images = model.sees_images
        self.meter = Meter(None)  # a replay or the scripted double: priced when listed

    async def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        """Call it in a worker thread (a replay reads files), its text back on the loop."""
        loop = asyncio.get_running_loop()

        def from_thread(delta: str) -> None:
            loop.call_soon_threadsafe(on_text, delta)

        return await asyncio.to_thread(self.model.complete, request, from_thread)


AskModel = ServiceModel | InProcessModel


class RestEncoder:
    """The REST encoding of an ask: each event a server-sent event named by its type.

    The end is the ask's result (`ask_end`, wire.results.AskResult): the outcome with each
    step's last attempt and the approvals it waited for; it is kept for the `result` alias.
    """

    def __init__(self, emit: EmitSSE, journal: Journal, asker: Asker) -> None:
        self.emit, self.journal, self.asker = emit, journal, asker
        self.result: AskResult | None = None

    def __call__(self, event: Event) -> None:
        """Send one event; the end, as the ask's result."""
        if isinstance(event, AskEnded):
            steps = tuple({**{k: v for k, v in event_json(end).items() if k != "type"},
                           "outputs": list(end.result.outputs)} for end in self.journal.ended())
            self.result = event.outcome.to_result(steps, tuple(self.asker.noted))
            self.emit(self.result.type, encode(self.result))
        else:
            data = event_json(event)
            self.emit(data["type"], data)


class SessionSteps:
    """The executor the driver uses: runs in the session (its lock held by the ask)."""

    def __init__(self, manager: SessionManager, session: Session, journal: Journal) -> None:
        self.manager, self.session, self.journal = manager, session, journal

    async def run(self, code: str, timeout: float) -> CodeResult:
        """Run one step's code, streaming its outputs and saying which files it wrote."""
        result, files = await self.manager.run_locked(self.session, code, timeout,
                                                      self.journal.output)
        if files:
            self.journal.emit(FilesWritten(self.journal.step, tuple(files)))
        return result


def _check(body: Mapping[str, object]) -> None:
    """Refuse an ask's body with its first bad field's message, in the order of its fields."""
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise SessionError("'prompt' (a non-empty string) is required.")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise SessionError("'model' must be a string such as 'openai:gpt-5.5'.")
    for name, kind in (("timeout", float), ("max_steps", int), ("max_fixes", int)):
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(
                value, (int, float) if kind is float else int) or value <= 0):
            raise SessionError(f"'{name}' must be a positive "
                               f"{'number' if kind is float else 'integer'}.")
    check_mode(body)


#: A field the codec refuses: the whole body checked, so the first bad field is the one said.
_CHECKS: dict[str, Check] = dict.fromkeys(names_of(Ask), _check)


def parse(body: Mapping[str, object]) -> Ask:
    """Read an ask's body as its wire class, raising SessionError with what is wrong."""
    try:
        request = read_body(Ask, body, _CHECKS)
    except OverflowError:  # an integer no float holds (JSON has no bound on its digits)
        _check(body)
        raise SessionError("'timeout' must be a positive number of seconds no larger than "
                           f"{sys.float_info.max:g}.") from None
    # What the codec takes but an ask does not: a blank prompt, a number not above zero.
    if not request.prompt.strip() or any(
            value is not None and value <= 0
            for value in (request.timeout, request.max_steps, request.max_fixes)):
        _check(body)
    return replace(request, prompt=request.prompt.strip())


def limits(request: Ask, ci: JupyterCI, model: SeesImages) -> Limits:
    """Return an ask's limits: the request's where given, else the server's settings."""
    return ci.limits(model, request.max_steps, request.max_fixes, request.timeout)


async def resolve(manager: SessionManager, session: Session, model: str | None
                  ) -> tuple[AskModel, Redactor]:
    """Pick the ask's model in the model service, and what to redact from the kernel's words."""
    service: ModelPort | None = manager.service
    if service is None:
        raise SessionError("This server has no model service: asks are not available.")
    model = confine_replay(model, session.directory, manager.ci.record_dir)
    holder = ask_token_id(session.id)
    service.open_budget(holder)
    # No fallback_model here, on purpose: it lets a demo notebook run before a key is set
    # (a replay beside it); a REST client with no model configured is told what to set.
    settings = replace(manager.ci.model_settings(), fallback="")
    turns: AskModel
    try:
        # One id for the ask's meter, its turns' prices and budget, and the call.
        model_id = canonical_model_id(model or default_model_id(settings, os.environ))
        if parse_model_id(model_id)[0].in_process:
            turns = InProcessModel(resolve_model(model_id, settings, os.environ))
        else:
            await service.model(model_id)  # unknown model, no key: said now, before the ask
            turns = ServiceModel(service, holder, model_id, manager.ci.record_dir)
    except AskError as error:
        raise SessionError(str(error)) from None
    turns.meter = price_table(manager.ci.prices).meter(turns.id)
    # Redacted: every provider key the server holds, and the kernel's own credential.
    return turns, Redactor([*service.held_keys(), *_kernel_token(manager, session)])


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


async def ask(manager: SessionManager, session: Session, request: Ask,
              chat: AskModel, redactor: Redactor, emit: EmitSSE, user: str = ""
              ) -> AskResult:
    """Run one ask in the session (its lock held by the caller); return its result.

    Whatever goes wrong, the ask ends with one result (failed, then): its `ask_end` event,
    returned for the stream's `result` alias.
    """
    # Its questions wait for `user`'s answer (approvals.py).
    asker = Asker(session.approvals, uuid.uuid4().hex[:12], user, manager.ci.approval_timeout)
    journal = Journal()
    encoder = RestEncoder(emit, journal, asker)
    journal.encoders.append(encoder)
    try:
        life = _life(manager, session, request, chat, redactor, journal, asker.ask_id)
        warning = retiring.note(chat.id)
        if warning:
            manager.log.warning("jupyter-ci: session %s: %s", session.id, warning)
        life.start(warning)
        outcome = await life.drive_async(
            chat, SessionSteps(manager, session, journal), decide=asker, price=chat.meter,
            failure=lambda exc: failure(exc, manager, redactor))
        if outcome.error is None:
            session.history.append(markdown_cell(outcome.answer))
        life.end(outcome)
    except Exception as exc:  # the ask's own failures are outcomes already: this is a backstop
        if encoder.result is None:
            journal.emit(AskEnded(Outcome("failed", error=failure(exc, manager, redactor))))
    finally:
        # An ask is activity, steps or not: the culler counts idle time from its end.
        session.last_activity = time.time()
    assert encoder.result is not None, "every ask ends with its ask_end"
    return encoder.result


def _life(manager: SessionManager, session: Session, request: Ask, chat: AskModel,
          redactor: Redactor, journal: Journal, ask_id: str) -> AskLife:
    """Return the ask's lifecycle: its loop in the session's context, and the session's memory."""
    ci = manager.ci
    if session.memory is None:
        session.memory = Memory(ci.memory_tokens)
    loop = AskLoop(request.prompt, context=f"Working directory: {session.directory.name}/ "
                   "(files you write there can be downloaded by the user).",
                   history=session.memory.messages(), limits=limits(request, ci, chat),
                   redact=redactor,
                   # A REST client has no stdin to answer on: "never" unless "always".
                   install=ci.install_policy(can_ask=False),
                   approval=approval_mode(request.approve, ci.approval, ci.approval_minimum),
                   system=system_prompt(redactor(ci.instructions)))
    session.history.append(markdown_cell(f"**Ask:** {request.prompt}"))
    return AskLife(ask_id, request.prompt, chat.id, loop, journal, session.memory)


def failure(exc: Exception, manager: SessionManager, redactor: Redactor) -> AskError:
    """Return the AskError an ask ended with: `exc`, or one that says what broke.

    A session's own failure (its kernel or gateway gone) keeps its message; anything else
    (a bug, an executor's surprise) is logged, and the client still gets a failed result.
    """
    if isinstance(exc, AskError):
        return exc
    if isinstance(exc, SessionError):
        return AskError(exc.message)
    told = redactor(f"{type(exc).__name__}: {exc}")
    manager.log.error("jupyter-ci: an ask failed: %s", redactor(
        "".join(traceback.format_exception(exc))))
    return AskError(f"The ask failed unexpectedly ({told[:300]}).",
                    "The server log says more.")
