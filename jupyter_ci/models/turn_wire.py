"""The model service's wire, read and written: wire/turn.py's classes and the agent's types.

A kernel under Jupyter Server sends the server our own request (messages, the names of the
tools it offers, the reply's token limit), never a provider's; the server answers with one
JSON object per line (wire/turn.py says which). Both sides import this module; the codec
reads and writes the JSON, so an unknown or wrong-typed field is refused with its path
(`messages[2].result.images[0].mime must be one of …`); what the types cannot say (a
tool the service offers, a non-empty name) is checked here after. The standard library only
(a kernel loads it on its first ask).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import cast

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
from jupyter_ci.wire.codec import WireError as WireError
from jupyter_ci.wire.codec import decode, encode
from jupyter_ci.wire.names import TURN_PATH as TURN_PATH
from jupyter_ci.wire.turn import (
    ImageType,
    ToolInput,
    ToolInputLine,
    TurnError,
    TurnFile,
    TurnImage,
    TurnMessage,
    TurnReply,
    TurnRequest,
    TurnResult,
    TurnToolCall,
)

#: The content type of the reply stream.
NDJSON = "application/x-ndjson"
#: The ask errors a reply may name; anything else reads as ModelUnavailable.
ERRORS: dict[str, type[AskError]] = {
    cls.__name__: cls for cls in (ModelUnavailable, ModelConfigError, LimitReached,
                                  BadModelReply)}
#: What a refusal quotes of a bad value at most (a body may be megabytes).
_SHOWN = 200


@dataclass(frozen=True)
class Turn:
    """A decoded request: which model, and our request for it."""

    model: str
    request: ModelRequest


# --- requests ---------------------------------------------------------------------------

def request_json(model: str, request: ModelRequest) -> dict[str, object]:
    """Encode a turn for the service; tools go by name (the service holds their schemas)."""
    turn = TurnRequest(model=model, system=request.system, prompt=request.prompt,
                       max_tokens=request.max_tokens, tools=tuple(t.name for t in request.tools),
                       messages=tuple(_wire_message(m) for m in request.messages))
    return cast(dict[str, object], encode(turn))


def _wire_message(message: Message) -> TurnMessage:
    r = message.result
    return TurnMessage(
        message.role, message.content, tuple(_wire_call(c) for c in message.tool_calls),
        message.tool_call_id, None if r is None else TurnResult(
            r.status, r.text,
            # The server refuses a type it does not take (mime is checked on reading).
            tuple(TurnImage(cast(ImageType, i.mime), i.data, i.width, i.height)
                  for i in r.images),
            tuple(TurnFile(f.path, f.size, f.mime) for f in r.files)))


def _wire_call(call: ToolCall) -> TurnToolCall:
    return TurnToolCall(call.id, call.name, call.arguments)


def read_turn(data: object, tools: Mapping[str, ToolSpec], max_tokens: int) -> Turn:
    """Decode a request, raising WireError naming the bad field; only `tools` may be
    offered, and at most `max_tokens` asked for (more is lowered to it)."""
    try:
        body = decode(TurnRequest, data)
    except WireError as err:
        raise _said(err, data) from None
    if body.max_tokens is None and isinstance(data, dict) and "max_tokens" in data:
        raise WireError("max_tokens must be a positive integer, got None.", "max_tokens")
    for where, problem in _problems(body, tools):
        raise WireError(problem, where)
    limit = max_tokens if body.max_tokens is None else min(body.max_tokens, max_tokens)
    request = ModelRequest(
        system=body.system, messages=tuple(_message(m) for m in body.messages),
        tools=tuple(tools[t] for t in dict.fromkeys(body.tools)), max_tokens=limit,
        prompt=body.prompt)
    return Turn(body.model, request)


def _said(err: WireError, data: object) -> WireError:
    """Say the codec's complaint as the service's refusal: the field's path, then what."""
    where, text = err.path, str(err)
    detail = text[len(where) + 2:] if where and text.startswith(f"{where}: ") else text
    if detail.startswith("unknown field of "):
        # An unknown field is refused, not ignored: nothing reaches a provider unchecked.
        top = isinstance(data, dict) and where in data
        name = where if top else where.rpartition(".")[2]
        return WireError(f"{where}: the service takes no field {name!r}.", where)
    if detail == "missing":
        detail = "is missing"
    if detail.startswith("expected "):
        detail = "must be " + detail.removeprefix("expected ")
    if len(detail) > _SHOWN:
        detail = detail[:_SHOWN] + "…"
    if where == "tools" or where.startswith("tools["):
        return WireError(f"'tools' must be a list of tool names ({where} {detail}).", where)
    return WireError(f"{where or 'The body'} {detail}.", where)


def _problems(body: TurnRequest, tools: Mapping[str, ToolSpec]) -> Iterator[tuple[str, str]]:
    """Yield (path, what is wrong) for what the wire's types cannot say."""
    if not body.model:
        yield "model", "model must be a non-empty string."
    for n, name in enumerate(body.tools):
        if name not in tools:
            yield f"tools[{n}]", (f"Unknown tool {name!r} (tools[{n}]): the service offers "
                                  f"only {', '.join(tools) or 'none'}.")
    if body.max_tokens is not None and body.max_tokens < 1:
        yield "max_tokens", "max_tokens must be a positive integer."
    if not body.messages:
        yield "messages", "messages must be a non-empty list."
    for n, message in enumerate(body.messages):
        yield from _message_problems(message, f"messages[{n}]")


def _message_problems(message: TurnMessage, where: str) -> Iterator[tuple[str, str]]:
    for n, call in enumerate(message.tool_calls):
        if not call.name:
            yield f"{where}.tool_calls[{n}].name", (f"{where}.tool_calls[{n}].name must be a "
                                                    "non-empty string.")
    result = message.result
    numbers: list[tuple[str, int]] = []
    for n, image in enumerate(result.images if result else ()):
        at = f"{where}.result.images[{n}]"
        if not image.data:
            yield f"{at}.data", f"{at}.data must be a non-empty string."
        numbers += [(f"{at}.width", image.width), (f"{at}.height", image.height)]
    numbers += [(f"{where}.result.files[{n}].size", f.size)
                for n, f in enumerate(result.files if result else ())]
    for at, number in numbers:
        if number < 0:
            yield at, f"{at} must be a whole number."


def _message(m: TurnMessage) -> Message:
    r = m.result
    return Message(
        m.role, m.content, tuple(ToolCall(c.id, c.name, c.arguments) for c in m.tool_calls),
        m.tool_call_id, None if r is None else ToolResult(
            r.status, r.text, tuple(Image(i.mime, i.data, i.width, i.height) for i in r.images),
            tuple(FileInfo(f.path, f.size, f.mime) for f in r.files)))


# --- replies ----------------------------------------------------------------------------

def line(event: object) -> bytes:
    """Encode one line of the reply stream (a wire/turn.py line, or its JSON object)."""
    return json.dumps(encode(event), separators=(",", ":")).encode() + b"\n"


def reply_json(reply: ModelReply) -> dict[str, object]:
    """Encode a finished turn (with its cost when the service priced it)."""
    return cast(dict[str, object], encode(TurnReply(
        reply.text, reply.input_tokens, reply.output_tokens, reply.cached_tokens,
        tuple(_wire_call(c) for c in reply.tool_calls), reply.cost_usd)))


def error_json(error: AskError) -> dict[str, str]:
    """Encode the error that ended a turn."""
    kind = type(error).__name__ if type(error).__name__ in ERRORS else "ModelUnavailable"
    return cast(dict[str, str], encode(TurnError(kind, error.message, error.hint)))


def read_error(data: object) -> AskError:
    """Decode an error event (or an error body) into the ask error it names."""
    try:
        error = decode(TurnError, data, lenient=True)
    except WireError:
        error = TurnError("", "")
    return ERRORS.get(error.type, ModelUnavailable)(
        error.message or "The Jupyter server's model service failed without saying why.",
        error.hint)


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
        elif "tool_input" in event:
            self._tool_input(event["tool_input"])
        elif "reply" in event:
            return _reply(event["reply"])
        elif "error" in event:
            raise read_error(event["error"])
        return None

    def _tool_input(self, data: object) -> None:
        try:
            tool = decode(ToolInput, data, lenient=True)
        except WireError:
            return  # a preview only: the reply brings the arguments whole
        self._arguments = self._arguments[:tool.at] + tool.text
        if self.on_tool_input is not None:
            self.on_tool_input(tool.name, self._arguments)


def _reply(data: object) -> ModelReply:
    # Read leniently: an older server's reply has no cached_tokens (0) and no cost_usd
    # (priced here then); a newer one's may have more fields.
    try:
        r = decode(TurnReply, data, lenient=True)
    except WireError as err:
        raise ModelUnavailable(f"The Jupyter server's model service sent a reply this kernel "
                               f"cannot read ({err}).",
                               "Use the same jupyter-ci version in the kernel and the "
                               "server.") from None
    cost = r.cost_usd if r.cost_usd is not None and r.cost_usd >= 0 else None
    return ModelReply(r.text, tuple(ToolCall(c.id, c.name, c.arguments) for c in r.tool_calls),
                      r.input_tokens, r.output_tokens, r.cached_tokens, cost)


def tool_input_event(name: str, before: str, now: str) -> dict[str, object]:
    """Encode the change from `before` to `now` of a tool call's streamed arguments."""
    at = len(before) if now.startswith(before) else 0
    return cast(dict[str, object], encode(ToolInputLine(ToolInput(name, at, now[at:]))))
