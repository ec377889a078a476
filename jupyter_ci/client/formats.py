"""What the client makes of replies: results, server-sent events, errors and tool formats.

Pure and shared by the sync and async clients, so neither writes any of it twice.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx

from jupyter_ci.client.results import Execution, is_output
from jupyter_ci.wire.codec import decode
from jupyter_ci.wire.events import WaitingForUser
from jupyter_ci.wire.nbformat import NbOutput
from jupyter_ci.wire.requests import SERVER_TIMEOUT, ApprovalAnswer, Execute
from jupyter_ci.wire.rest import ErrorReply, ExecutionOfCells, FileEntry, SessionInfo
from jupyter_ci.wire.rest import Execution as WireExecution
from jupyter_ci.wire.shapes import FileEntryJSON, SessionInfoJSON, WaitingForUserJSON, shape_of

T = TypeVar("T")

TOOL_NAME = "python"
TOOL_DESCRIPTION = (
    "Run Python code in a stateful Jupyter kernel: variables, imports and files persist "
    "between calls. The value of the last expression is shown, as are print output, "
    "tables, plots (as images) and errors. The working directory holds the user's files."
)
_SCHEMA = {"type": "object", "properties": {"code": {
    "type": "string", "description": "The Python code to run."}}, "required": ["code"]}
#: Callbacks of a streaming execute; the async client awaits those that are `async def`.
OnText = Callable[[str], Any]
OnOutput = Callable[[NbOutput], Any]
#: A server-sent event's data: a JSON object, read through its wire class before use.
EventData = dict[str, object]
#: Seconds the client waits past a run's own timeout: the server's interrupt, its grace for
#: the kernel to settle (10 s) and the look at the session's files take that much at most.
TIMEOUT_MARGIN_S = 15.0


class ServerDefault:
    """The timeout of a run that names none: the server's (c.JupyterCI.timeout, 60 s)."""

    def __repr__(self) -> str:
        return "SERVER_DEFAULT"


SERVER_DEFAULT = ServerDefault()


def auth_headers(token: str | None) -> dict[str, str]:
    """Return the header carrying `token`, else $JUPYTER_TOKEN (where servers read theirs)."""
    token = token or os.environ.get("JUPYTER_TOKEN")
    return {"Authorization": f"token {token}"} if token else {}


class CodeInterpreterError(Exception):
    """The server refused a request: `status`, `reason` and its message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{message} (HTTP {status}, {reason})")
        self.status, self.reason, self.message = status, reason, message


class TokenRejected(CodeInterpreterError):
    """The server refused the token: none was given, or it is not the server's."""


class SessionNotFound(CodeInterpreterError):
    """No such session: never created, deleted, or culled when idle (the message says which)."""


class ClientTimeout(CodeInterpreterError, TimeoutError):
    """The client stopped waiting for a reply; the server interrupts the run it gave up on."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(status, reason, message)
        self.args = (message,)  # no HTTP status: none came


def error_of(status: int, reason: str, message: str) -> CodeInterpreterError:
    """Return the typed error of a refusal."""
    kind = SessionNotFound if reason == "unknown_session" else CodeInterpreterError
    return kind(status, reason, message)


#: Said when a server too old to say it itself refuses the token (tornado's XSRF message).
NO_TOKEN = ("Forbidden: missing or invalid token. Pass the Jupyter server's token as "
            "Client(url, token=...) or in $JUPYTER_TOKEN: `jupyter server list` shows it, as "
            "does the URL the server's log prints.")


class _EventParser:
    """Server-sent events, fed line by line (so callbacks run while the server streams)."""

    def __init__(self) -> None:
        self.name, self.data = "message", list[str]()

    def feed(self, line: str) -> tuple[str, EventData] | None:
        """Take one line; return the event it completes, if any."""
        if line.startswith("event:"):
            self.name = line[6:].strip()
        elif line.startswith("data:"):
            self.data.append(line[5:].removeprefix(" "))
        elif not line and self.data:
            event = (self.name, json.loads("\n".join(self.data)))
            self.name, self.data = "message", []
            return event
        return None


def events(lines: Iterable[str]) -> Iterator[tuple[str, EventData]]:
    """Parse server-sent events from their lines into (event, data)."""
    parser = _EventParser()
    for line in lines:
        if (event := parser.feed(line)) is not None:
            yield event


async def aevents(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, EventData]]:
    """Parse server-sent events as their lines arrive."""
    parser = _EventParser()
    async for line in lines:
        if (event := parser.feed(line)) is not None:
            yield event


class Stream:
    """Feed the events of one streaming execute to the callbacks; keep the result."""

    def __init__(self, on_stdout: OnText | None, on_stderr: OnText | None,
                 on_output: OnOutput | None) -> None:
        self.callbacks = {"stdout": on_stdout, "stderr": on_stderr}
        self.on_output = on_output
        self.result: WireExecution | ExecutionOfCells | None = None  # its `result` event's

    @property
    def listens(self) -> bool:
        """Whether any callback wants the run's events (else one JSON reply will do)."""
        return self.on_output is not None or any(
            callback is not None for callback in self.callbacks.values())

    def executions(self) -> list[Execution]:
        """Return the streamed run's Executions (its `result`), once it ended."""
        assert self.result is not None, "the stream ended without a result"
        return runs_of(self.result)

    def take(self, event: str, data: EventData) -> list[Any]:
        """Take one event; return what the callbacks returned (awaitables, for async ones)."""
        called = []
        if event == "output" and is_output(data):
            callback = self.callbacks.get(str(data.get("name")))
            if data["output_type"] == "stream" and callback is not None:
                called.append(callback(str(data.get("text", ""))))
            if self.on_output is not None:
                called.append(self.on_output(data))
        elif event == "result":
            self.result = result_of(data)
        elif event == "error":
            said = read(ErrorReply, data)
            raise error_of(404 if said.reason == "unknown_session" else 409, said.reason,
                           said.message)
        return called


#: The answers to a question (edit: run the `code` given instead).
DECISIONS = ("run", "edit", "skip", "stop")
#: What `on_approval` gets (the waiting_for_user event, with its approval_id) and returns:
#: a decision ("run", "skip", "stop"), a body ({"decision": "edit", "code": ...}), or None
#: to leave the question to be answered elsewhere (`approve()` from another connection).
OnApproval = Callable[[EventData], Any]


class ApprovalRequired(CodeInterpreterError):
    """An ask waited for an approval that nothing answered (no `on_approval`, no `approve`)."""


def ask_body(prompt: str, approve: str | None, options: Mapping[str, object]
             ) -> dict[str, object]:
    """Return an ask's body: the prompt, its approval mode if given, and the other options."""
    return {"prompt": prompt, **({"approve": approve} if approve else {}), **options}


def answer_body(approval_id: str, decision: Any, code: str | None = None,
                plan: str | None = None) -> ApprovalAnswer:
    """Return the body answering an approval with what a callback (or a caller) decided."""
    body = {"decision": decision} if isinstance(decision, str) else decision
    if not isinstance(body, dict) or body.get("decision") not in DECISIONS:
        raise ValueError(f"An approval's answer is one of {', '.join(DECISIONS)}, or a dict "
                         f"such as {{'decision': 'edit', 'code': '...'}}; not {decision!r}.")
    texts = {k: v for k, v in (("code", code), ("plan", plan)) if v is not None}
    # Strict: a field the server does not know, or a code that is no string, is a
    # ValueError naming it here rather than a 400 from the server.
    return decode(ApprovalAnswer, {**body, **texts, "approval_id": approval_id})


class Approving:
    """What an ask's stream does with its questions (both clients share it).

    A question is a waiting_for_user event with an approval_id (an install question, which a
    REST ask never asks, has none).

    With `on_approval`, each question is put to it and its answer sent. Without, the caller
    answers with `session.approve(...)` while it reads the events; reading on past a question
    it left unanswered raises ApprovalRequired (and hanging up stops the ask on the server),
    rather than wait in silence until c.JupyterCI.approval_timeout.
    """

    def __init__(self, on_approval: OnApproval | None) -> None:
        self.on_approval = on_approval
        self.answered: set[str] = set()
        self.asked: str | None = None

    def take(self, event: str, data: EventData) -> Any:
        """Note a question; return the callback's answer (maybe awaitable), or None."""
        if event != "waiting_for_user" or "approval_id" not in data:
            return None
        self.asked = str(read(WaitingForUser, data).approval_id)
        return None if self.on_approval is None else self.on_approval(data)

    def check(self) -> None:
        """Raise ApprovalRequired if the last question is left unanswered with no callback."""
        asked, self.asked = self.asked, None
        if asked is not None and self.on_approval is None and asked not in self.answered:
            raise ApprovalRequired(0, "approval_required", (
                "The ask waits for an approval: pass on_approval=... to ask() (a callback "
                "given the waiting_for_user event, returning 'run', 'skip', 'stop' or "
                "{'decision': 'edit', 'code': ...}), or answer it with session.approve("
                "event['approval_id'], ...) before reading on. The ask was stopped."))


def raise_for(response: httpx.Response) -> None:
    """Turn an error reply into CodeInterpreterError with the server's message."""
    if response.is_success:
        return
    try:
        body = json.loads(response.read())
    except (ValueError, httpx.ResponseNotRead):
        body = {}
    said = read(ErrorReply, {"message": response.reason_phrase, "reason": "error",
                             **(body if isinstance(body, dict) else {})})
    reason, message = said.reason, said.message
    if response.status_code == 403 and (reason == "invalid_token" or "_xsrf" in message):
        raise TokenRejected(403, "invalid_token", message if "token" in message else NO_TOKEN)
    raise error_of(response.status_code, reason, message)


def execute_body(code: str | list[str], timeout: float | ServerDefault | None,
                 envs: dict[str, str] | None, language: str | None = None) -> Execute:
    """Return an execute's body (a list of cells: `cells`); a timeout of None or 0 is sent
    as null: no deadline."""
    return Execute(code if isinstance(code, str) else None,
                   None if isinstance(code, str) else tuple(code),
                   SERVER_TIMEOUT if isinstance(timeout, ServerDefault) else timeout or None,
                   dict(envs) if envs else None, language)


def read(cls: type[T], reply: object) -> T:
    """Read a reply as its wire class, leniently: a newer server may add fields."""
    return decode(cls, reply, lenient=True)


def info_of(reply: Any) -> SessionInfoJSON:
    """Return a session's info (httpx's parsed JSON), read as SessionInfo; kept whole: a
    newer server's fields too."""
    read(SessionInfo, reply)  # raises unless the reply is a SessionInfo's JSON
    checked: SessionInfoJSON = reply
    return checked.copy()


def files_of(reply: object) -> list[FileEntryJSON]:
    """Return a listing of files (path, size, mime), read as FileEntry."""
    entries: tuple[FileEntry, ...] = decode(tuple[FileEntry, ...], reply, lenient=True)
    return [shape_of(entry) for entry in entries]


def approvals_of(reply: object) -> list[WaitingForUserJSON]:
    """Return the questions that wait, read as waiting_for_user events."""
    waiting: tuple[WaitingForUser, ...] = decode(tuple[WaitingForUser, ...], reply, lenient=True)
    return [shape_of(event) for event in waiting]


def result_of(reply: object) -> WireExecution | ExecutionOfCells:
    """Read an execute's reply: an ExecutionOfCells for `cells`, else one Execution."""
    if isinstance(reply, dict) and "results" in reply:
        return read(ExecutionOfCells, reply)
    return read(WireExecution, reply)


def runs_of(result: WireExecution | ExecutionOfCells) -> list[Execution]:
    """Return an execute's Executions: one for `code`, one per cell run for `cells`."""
    runs = result.results if isinstance(result, ExecutionOfCells) else (result,)
    return [Execution.of(run) for run in runs]


def executions_of(reply: object) -> list[Execution]:
    """Return the Executions of an execute's JSON reply."""
    return runs_of(result_of(reply))


def http_timeout(default: httpx.Timeout, timeout: float | ServerDefault | None, cells: int = 1
                 ) -> httpx.Timeout:
    """Return the HTTP timeouts of an execute: its read deadline follows the run's timeout
    (each cell's, for several: the reply comes after the last)."""
    if isinstance(timeout, ServerDefault):
        read = None if default.read is None else default.read * cells
    else:
        read = None if not timeout or default.read is None else max(
            default.read, timeout * cells + TIMEOUT_MARGIN_S)
    return httpx.Timeout(default.connect, read=read, write=default.write, pool=default.pool)


def gave_up(error: httpx.TimeoutException) -> ClientTimeout:
    """Say that the client stopped waiting (the server interrupts the run on the hang-up)."""
    return ClientTimeout(0, "client_timeout", f"No reply within the client's timeout "
                         f"({type(error).__name__}); the server interrupts the run.")


def body_of(data: bytes | str | os.PathLike[str]) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode()
    return Path(data).read_bytes()


def _field(value: Any, name: str) -> Any:
    """Read a field of an SDK object or of its dict form."""
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def code_of(call: Any) -> tuple[str, str, str]:
    """Return (provider, call id, code) of an OpenAI tool call or an Anthropic tool_use."""
    function = _field(call, "function")
    if function is not None:  # OpenAI Chat Completions
        arguments = json.loads(_field(function, "arguments") or "{}")
        return "openai", str(_field(call, "id")), str(arguments.get("code", ""))
    tool_input = _field(call, "input")  # Anthropic Messages
    if isinstance(tool_input, dict):
        return "anthropic", str(_field(call, "id")), str(tool_input.get("code", ""))
    raise ValueError("Not an OpenAI tool call or an Anthropic tool_use block.")


def tool_result(provider: str, call_id: str, run: Execution) -> Any:
    """Give a run back to the model in its provider's format, images included."""
    text = run.summary
    if provider == "anthropic":
        content: list[dict[str, object]] = [{"type": "text", "text": text}]
        content += [{"type": "image", "source": {"type": "base64", "media_type": mime,
                                                 "data": data}} for mime, data in run.images]
        return {"type": "tool_result", "tool_use_id": call_id, "content": content,
                "is_error": run.status != "ok"}
    # Chat Completions tool messages hold text only: images follow in a user message.
    messages: list[dict[str, object]] = [{"role": "tool", "tool_call_id": call_id,
                                          "content": text}]
    if run.images:
        messages.append({"role": "user", "content": [
            {"type": "text", "text": f"The images the `{TOOL_NAME}` call displayed:"},
            *({"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
              for mime, data in run.images)]})
    return messages


class Tools:
    """Tool definitions for OpenAI and Anthropic (the same for both session kinds)."""

    @staticmethod
    def openai_tool() -> dict[str, Any]:
        """The code interpreter as an OpenAI Chat Completions tool."""
        return {"type": "function", "function": {
            "name": TOOL_NAME, "description": TOOL_DESCRIPTION, "parameters": _SCHEMA}}

    @staticmethod
    def anthropic_tool() -> dict[str, Any]:
        """The code interpreter as an Anthropic Messages tool."""
        return {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "input_schema": _SCHEMA}
