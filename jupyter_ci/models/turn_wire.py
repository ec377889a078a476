"""The model service's wire format: one ask turn as JSON, and its reply as JSON lines.

A kernel under Jupyter Server sends the server our own request (messages, the names of the
tools it offers, the reply's token limit), never a provider's; the server answers with one
JSON object per line: `{"text": …}` as text streams, `{"tool_input": {"name", "at", "text"}}`
as a tool call's arguments stream (the raw arguments so far are the earlier ones cut at
`at`, then `text`), then `{"reply": …}` or `{"error": …}`. Both sides import this module;
it is plain data and the standard library only (a kernel loads it on its first ask).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jupyter_ci.agent.errors import (
    AskError,
    BadModelReply,
    LimitReached,
    ModelConfigError,
    ModelUnavailable,
)
from jupyter_ci.agent.types import (
    FileInfo,
    Image,
    Message,
    ModelReply,
    ModelRequest,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from jupyter_ci.wire.names import TURN_PATH as TURN_PATH

#: The content type of the reply stream.
NDJSON = "application/x-ndjson"
#: Image types a request may carry (what both providers accept).
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_ROLES = ("user", "assistant", "tool")
_STATUSES = ("ok", "error", "timeout", "died", "interrupted", "invalid", "not_run")
#: The ask errors a reply may name; anything else reads as ModelUnavailable.
ERRORS: dict[str, type[AskError]] = {
    cls.__name__: cls for cls in (ModelUnavailable, ModelConfigError, LimitReached,
                                  BadModelReply)}


class WireError(ValueError):
    """A request that is not a turn this service takes; the text says which field is wrong."""


@dataclass(frozen=True)
class Turn:
    """A decoded request: which model, and our request for it."""

    model: str
    request: ModelRequest


# --- requests ---------------------------------------------------------------------------

def request_json(model: str, request: ModelRequest) -> dict[str, Any]:
    """Encode a turn for the service; tools go by name (the service holds their schemas)."""
    return {"model": model, "system": request.system, "prompt": request.prompt,
            "max_tokens": request.max_tokens, "tools": [t.name for t in request.tools],
            "messages": [_message_json(m) for m in request.messages]}


def _message_json(message: Message) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        data["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments}
                              for c in message.tool_calls]
    if message.tool_call_id is not None:
        data["tool_call_id"] = message.tool_call_id
    if message.result is not None:
        r = message.result
        data["result"] = {
            "status": r.status, "text": r.text,
            "images": [{"mime": i.mime, "data": i.data, "width": i.width, "height": i.height}
                       for i in r.images],
            "files": [{"path": f.path, "size": f.size, "mime": f.mime} for f in r.files]}
    return data


def read_turn(data: object, tools: Mapping[str, ToolSpec], max_tokens: int) -> Turn:
    """Decode a request, raising WireError; only `tools` may be offered, and at most
    `max_tokens` asked for (more is lowered to it)."""
    body = _object(data, "The body")
    _known(body, ("model", "system", "prompt", "max_tokens", "tools", "messages"), "The body")
    model = _str(body, "model", "The body", required=True)
    offered = body.get("tools", [])
    if not isinstance(offered, list) or not all(isinstance(t, str) for t in offered):
        raise WireError("'tools' must be a list of tool names.")
    unknown = [t for t in offered if t not in tools]
    if unknown:
        raise WireError(f"Unknown tool {unknown[0]!r}: the service offers only "
                        f"{', '.join(tools) or 'none'}.")
    limit = body.get("max_tokens", max_tokens)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise WireError("'max_tokens' must be a positive integer.")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise WireError("'messages' must be a non-empty list.")
    messages = tuple(_message(m, f"messages[{n}]") for n, m in enumerate(raw))
    request = ModelRequest(
        system=_str(body, "system", "The body"), messages=messages,
        tools=tuple(tools[t] for t in dict.fromkeys(offered)),
        max_tokens=min(limit, max_tokens), prompt=_str(body, "prompt", "The body"))
    return Turn(model, request)


def _message(data: object, where: str) -> Message:
    m = _object(data, where)
    _known(m, ("role", "content", "tool_calls", "tool_call_id", "result"), where)
    role = m.get("role")
    if role not in _ROLES:
        raise WireError(f"{where}.role must be one of {', '.join(_ROLES)}.")
    calls = m.get("tool_calls", [])
    if not isinstance(calls, list):
        raise WireError(f"{where}.tool_calls must be a list.")
    call_id = m.get("tool_call_id")
    if call_id is not None and not isinstance(call_id, str):
        raise WireError(f"{where}.tool_call_id must be a string.")
    result = m.get("result")
    return Message(
        role=role, content=_str(m, "content", where),
        tool_calls=tuple(_call(c, f"{where}.tool_calls[{n}]") for n, c in enumerate(calls)),
        tool_call_id=call_id,
        result=None if result is None else _result(result, f"{where}.result"))


def _call(data: object, where: str) -> ToolCall:
    c = _object(data, where)
    _known(c, ("id", "name", "arguments"), where)
    return ToolCall(_str(c, "id", where), _str(c, "name", where, required=True),
                    _str(c, "arguments", where))


def _result(data: object, where: str) -> ToolResult:
    r = _object(data, where)
    _known(r, ("status", "text", "images", "files"), where)
    status = r.get("status")
    if status not in _STATUSES:
        raise WireError(f"{where}.status must be one of {', '.join(_STATUSES)}.")
    images, files = r.get("images", []), r.get("files", [])
    if not isinstance(images, list) or not isinstance(files, list):
        raise WireError(f"{where}.images and .files must be lists.")
    return ToolResult(status, _str(r, "text", where),
                      tuple(_image(i, f"{where}.images[{n}]") for n, i in enumerate(images)),
                      tuple(_file(f, f"{where}.files[{n}]") for n, f in enumerate(files)))


def _image(data: object, where: str) -> Image:
    i = _object(data, where)
    _known(i, ("mime", "data", "width", "height"), where)
    mime = i.get("mime")
    if mime not in IMAGE_TYPES:
        raise WireError(f"{where}.mime must be one of {', '.join(IMAGE_TYPES)}.")
    return Image(mime, _str(i, "data", where, required=True),
                 _int(i, "width", where), _int(i, "height", where))


def _file(data: object, where: str) -> FileInfo:
    f = _object(data, where)
    _known(f, ("path", "size", "mime"), where)
    return FileInfo(_str(f, "path", where), _int(f, "size", where), _str(f, "mime", where))


def _object(data: object, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise WireError(f"{where} must be a JSON object.")
    return data


def _known(data: dict[str, Any], names: tuple[str, ...], where: str) -> None:
    # An unknown field is refused, not ignored: nothing reaches a provider unchecked.
    extra = [k for k in data if k not in names]
    if extra:
        raise WireError(f"{where} has a field the service does not take: {extra[0]!r} "
                        f"(known: {', '.join(names)}).")


def _str(data: dict[str, Any], name: str, where: str, required: bool = False) -> str:
    value = data.get(name, "")
    if not isinstance(value, str) or (required and not value):
        raise WireError(f"{where}.{name} must be a{' non-empty' if required else ''} string.")
    return value


def _int(data: dict[str, Any], name: str, where: str) -> int:
    value = data.get(name, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise WireError(f"{where}.{name} must be a whole number.")
    return value


# --- replies ----------------------------------------------------------------------------

def line(event: Mapping[str, Any]) -> bytes:
    """Encode one event of the reply stream."""
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


def reply_json(reply: ModelReply) -> dict[str, Any]:
    """Encode a finished turn (with its cost when the service priced it)."""
    encoded: dict[str, Any] = {
        "text": reply.text, "input_tokens": reply.input_tokens,
        "output_tokens": reply.output_tokens, "cached_tokens": reply.cached_tokens,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                       for c in reply.tool_calls]}
    if reply.cost_usd is not None:
        encoded["cost_usd"] = reply.cost_usd
    return encoded


def error_json(error: AskError) -> dict[str, Any]:
    """Encode the error that ended a turn."""
    kind = type(error).__name__ if type(error).__name__ in ERRORS else "ModelUnavailable"
    return {"type": kind, "message": error.message, "hint": error.hint}


def read_error(data: object) -> AskError:
    """Decode an error event (or an error body) into the ask error it names."""
    e = data if isinstance(data, dict) else {}
    cls = ERRORS.get(str(e.get("type", "")), ModelUnavailable)
    message = e.get("message")
    hint = e.get("hint")
    return cls(message if isinstance(message, str) and message else
               "The Jupyter server's model service failed without saying why.",
               hint if isinstance(hint, str) else "")


@dataclass
class ReplyReader:
    """Fold the events of a reply stream, calling back as text and tool input arrive."""

    on_text: Callable[[str], None]
    on_tool_input: Callable[[str, str], None] | None = None
    _arguments: str = ""

    def feed(self, raw: bytes) -> ModelReply | None:
        """Take one line; return the reply when it ends the stream, raise its error."""
        try:
            event = json.loads(raw)
        except ValueError:
            raise ModelUnavailable("The Jupyter server's model service sent a line that is "
                                   "not JSON.", "Check the server log.") from None
        if not isinstance(event, dict):
            return None
        if isinstance(text := event.get("text"), str):
            self.on_text(text)
        elif isinstance(tool := event.get("tool_input"), dict):
            at, piece = tool.get("at"), tool.get("text")
            if isinstance(at, int) and isinstance(piece, str):
                self._arguments = self._arguments[:at] + piece
                if self.on_tool_input is not None:
                    self.on_tool_input(str(tool.get("name", "")), self._arguments)
        elif "reply" in event:
            return _reply(event["reply"])
        elif "error" in event:
            raise read_error(event["error"])
        return None


def _reply(data: object) -> ModelReply:
    r = data if isinstance(data, dict) else {}
    calls = r.get("tool_calls") or []
    cost = r.get("cost_usd")  # absent: unpriced, or an older server (priced here then)
    return ModelReply(
        str(r.get("text", "")),
        tuple(ToolCall(str(c.get("id", "")), str(c.get("name", "")), str(c.get("arguments", "")))
              for c in calls if isinstance(c, dict)),
        int(r.get("input_tokens") or 0), int(r.get("output_tokens") or 0),
        int(r.get("cached_tokens") or 0),  # absent from an older server's replies
        float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool)
        and cost >= 0 else None)


def tool_input_event(name: str, before: str, now: str) -> dict[str, Any]:
    """Encode the change from `before` to `now` of a tool call's streamed arguments."""
    at = len(before) if now.startswith(before) else 0
    return {"tool_input": {"name": name, "at": at, "text": now[at:]}}
