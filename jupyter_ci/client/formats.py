"""What the client makes of replies: results, server-sent events, errors and tool formats.

Pure and shared by the sync and async clients, so neither writes any of it twice.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from jupyter_ci.agent.feedback import format_result
from jupyter_ci.agent.types import CodeResult, ErrorInfo, RunStatus

TOOL_NAME = "python"
TOOL_DESCRIPTION = (
    "Run Python code in a stateful Jupyter kernel: variables, imports and files persist "
    "between calls. The value of the last expression is shown, as are print output, "
    "tables, plots (as images) and errors. The working directory holds the user's files."
)
_SCHEMA = {"type": "object", "properties": {"code": {
    "type": "string", "description": "The Python code to run."}}, "required": ["code"]}
#: Characters of a run's text given back to the model (head and tail kept).
TOOL_TEXT_CHARS = 20_000
_IMAGE_TYPES = ("image/png", "image/jpeg")
_STATUS: dict[str, RunStatus] = {"ok": "ok", "error": "error", "timeout": "timeout",
                                 "dead": "died"}

OnText = Callable[[str], None]
OnOutput = Callable[[dict[str, Any]], None]


class CodeInterpreterError(Exception):
    """The server refused a request: `status`, `reason` and its message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{message} (HTTP {status}, {reason})")
        self.status, self.reason, self.message = status, reason, message


class TokenRejected(CodeInterpreterError):
    """The server refused the token: none was given, or it is not the server's."""


#: Said when a server too old to say it itself refuses the token (tornado's XSRF message).
NO_TOKEN = ("Forbidden: missing or invalid token. Pass the Jupyter server's token as "
            "Client(url, token=...) or in $JUPYTER_TOKEN: `jupyter server list` shows it, as "
            "does the URL the server's log prints.")


@dataclass(frozen=True)
class Execution:
    """The result of one execute: status, nbformat outputs, count, duration and files."""

    status: str
    outputs: list[dict[str, Any]] = field(default_factory=list)
    execution_count: int | None = None
    duration_ms: float = 0.0
    files: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Execution:
        """Build from the API's result object."""
        return cls(data["status"], list(data.get("outputs", [])), data.get("execution_count"),
                   float(data.get("duration_ms", 0.0)), list(data.get("files", [])))

    @property
    def error(self) -> dict[str, Any] | None:
        """The error output (ename, evalue, traceback), if the code raised."""
        return next((o for o in self.outputs if o.get("output_type") == "error"), None)

    @property
    def images(self) -> list[tuple[str, str]]:
        """(MIME type, base64 data) of every PNG or JPEG the code displayed."""
        return [(mime, str(o["data"][mime]).replace("\n", "")) for o in self.outputs
                for mime in _IMAGE_TYPES if mime in o.get("data", {})]

    @property
    def text(self) -> str:
        """What the run showed, as a model or a person would read it (images noted)."""
        error = self.error
        info = ErrorInfo(error["ename"], error["evalue"], tuple(error.get("traceback", []))) \
            if error else None
        result = CodeResult(_STATUS.get(self.status, "error"), self.outputs,
                            self.duration_ms / 1000, self.execution_count, info)
        return format_result(result, self.duration_ms / 1000, TOOL_TEXT_CHARS)


class _EventParser:
    """Server-sent events, fed line by line (so callbacks run while the server streams)."""

    def __init__(self) -> None:
        self.name, self.data = "message", list[str]()

    def feed(self, line: str) -> tuple[str, dict[str, Any]] | None:
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


def events(lines: Iterable[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Parse server-sent events from their lines into (event, data)."""
    parser = _EventParser()
    for line in lines:
        if (event := parser.feed(line)) is not None:
            yield event


async def aevents(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, dict[str, Any]]]:
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
        self.result: Execution | None = None

    def take(self, event: str, data: dict[str, Any]) -> None:
        if event == "output":
            callback = self.callbacks.get(str(data.get("name")))
            if data.get("output_type") == "stream" and callback is not None:
                callback(str(data.get("text", "")))
            if self.on_output is not None:
                self.on_output(data)
        elif event == "result":
            self.result = Execution.from_json(data)
        elif event == "error":
            raise CodeInterpreterError(409, str(data.get("reason")), str(data.get("message")))


def raise_for(response: httpx.Response) -> None:
    """Turn an error reply into CodeInterpreterError with the server's message."""
    if response.is_success:
        return
    try:
        body = json.loads(response.read())
    except (ValueError, httpx.ResponseNotRead):
        body = {}
    reason = str(body.get("reason", "error"))
    message = str(body.get("message", response.reason_phrase))
    if response.status_code == 403 and (reason == "invalid_token" or "_xsrf" in message):
        raise TokenRejected(403, "invalid_token", message if "token" in message else NO_TOKEN)
    raise CodeInterpreterError(response.status_code, reason, message)


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
    text = run.text
    if provider == "anthropic":
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        content += [{"type": "image", "source": {"type": "base64", "media_type": mime,
                                                 "data": data}} for mime, data in run.images]
        return {"type": "tool_result", "tool_use_id": call_id, "content": content,
                "is_error": run.status != "ok"}
    # Chat Completions tool messages hold text only: images follow in a user message.
    messages: list[dict[str, Any]] = [{"role": "tool", "tool_call_id": call_id,
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
