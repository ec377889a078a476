"""Adapter for the Anthropic Messages API.

Our provider-neutral history maps onto Messages like this: the system prompt is the
top-level `system`; an assistant message's tool calls become `tool_use` blocks after its
text; tool results become `tool_result` blocks of a user message, and consecutive
messages of one role are merged into one, since the API wants user and assistant to
alternate and all results of one assistant turn in the single user message after it.
A `tool_use` block needs an object as `input`: arguments that were not a JSON object
(malformed JSON the agent loop already reported to the model) are sent as
``{"_raw_arguments": "<text>"}`` so the model still sees what it wrote.

Each reply's tool call carries `arguments` = the JSON text of the tool_use input,
assembled from the streamed `input_json_delta` pieces.

`complete` streams a turn through the SDK's sync client; `acomplete` is its async twin for
the server's event loop (the model service), through `anthropic.AsyncAnthropic`, with the
same request, previews and errors, and the usage reported so far kept in a `Usage`
(message_start reports the input tokens; cancelling the awaiting task closes the
provider's stream at once). Both come from `SdkChatModel` (sdk_client.py); here each
sends `_kwargs` and folds events with `_Turn`; only the loop differs.

The `anthropic` SDK is imported only when the first request is made, or by `prepare`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, ClassVar, Literal, cast

from jupyter_ci.agent.types import (
    Image,
    Message,
    ModelReply,
    ModelRequest,
    OnToolInput,
    ToolCall,
)
from jupyter_ci.models.base import OnText, Usage
from jupyter_ci.models.sdk_client import ClientOptions, SdkChatModel, afold, fold
from jupyter_ci.models.stream_json import ContentBlock, Delta, StreamEvent
from jupyter_ci.models.transport import REHEARSAL_URL, rehearsal_client, sse_body

ImageMime = Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
#: Image types the Messages API accepts.
IMAGE_TYPES: tuple[str, ...] = ("image/jpeg", "image/png", "image/gif", "image/webp")

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import (
        ContentBlockParam,
        ImageBlockParam,
        MessageParam,
        RawMessageStreamEvent,
        TextBlockParam,
        ToolParam,
        ToolResultBlockParam,
    )
    from anthropic.types.message_create_params import MessageCreateParamsStreaming
    from anthropic.types.tool_param import InputSchema


class AnthropicChatModel(SdkChatModel["anthropic.Anthropic", "anthropic.AsyncAnthropic"]):
    """A Claude model reached through the `anthropic` SDK."""

    def _sdk(self) -> ModuleType:
        """Import `anthropic` and return it."""
        import anthropic

        return anthropic

    def _sdk_error(self) -> type[Exception]:
        """Return the base class of every exception `anthropic` raises."""
        import anthropic

        return anthropic.AnthropicError

    def _new_client(self, options: ClientOptions) -> anthropic.Anthropic:
        """Build the sync client."""
        import anthropic

        return anthropic.Anthropic(**options)

    def _new_async_client(self, options: ClientOptions) -> anthropic.AsyncAnthropic:
        """Build the async client."""
        import anthropic

        return anthropic.AsyncAnthropic(**options)

    def _rehearsal_client(self) -> anthropic.Anthropic:
        """Build a client that streams `_REHEARSAL_STREAM` for every request, offline."""
        import anthropic

        # The first stream of a process builds the SDK's pydantic validator of stream
        # events (~50 ms): the rehearsal pays that.
        return anthropic.Anthropic(api_key="rehearsal", base_url=REHEARSAL_URL, max_retries=0,
                                   http_client=rehearsal_client(anthropic.DefaultHttpxClient,
                                                                _REHEARSAL_STREAM))

    def _stream(self, client: anthropic.Anthropic, request: ModelRequest, on_text: OnText,
                usage: Usage | None = None) -> ModelReply:
        """Stream one turn from `client`; SDK errors are the caller's to translate."""
        stream: anthropic.Stream[RawMessageStreamEvent]
        stream = client.messages.create(**self._kwargs(request))
        return fold(stream, _Turn(on_tool_input=request.on_tool_input, usage=usage), on_text)

    async def _astream(self, client: anthropic.AsyncAnthropic, request: ModelRequest,
                       on_text: OnText, usage: Usage | None) -> ModelReply:
        """The async twin of `_stream`; leaving it, even by cancellation, closes the stream."""
        stream: anthropic.AsyncStream[RawMessageStreamEvent]
        stream = await client.messages.create(**self._kwargs(request))
        return await afold(stream, _Turn(on_tool_input=request.on_tool_input, usage=usage),
                           on_text)

    def _kwargs(self, request: ModelRequest) -> MessageCreateParamsStreaming:
        """Return what `messages.create` is sent for `request`."""
        kwargs: MessageCreateParamsStreaming = {
            "model": self.name, "max_tokens": request.max_tokens, "stream": True,
            "messages": to_wire(request.messages)}
        if request.system:
            kwargs["system"] = request.system
        if request.tools:
            kwargs["tools"] = [_tool(t.name, t.description, t.parameters) for t in request.tools]
        return kwargs


def _block(index: int, block: ContentBlock, *deltas: Delta) -> list[tuple[str, StreamEvent]]:
    """Write the canned events of one content block for the rehearsal."""
    start: StreamEvent = {"type": "content_block_start", "index": index, "content_block": block}
    pieces: list[StreamEvent] = [{"type": "content_block_delta", "index": index, "delta": delta}
                                 for delta in deltas]
    stop: StreamEvent = {"type": "content_block_stop", "index": index}
    return [("content_block_start", start), *(("content_block_delta", p) for p in pieces),
            ("content_block_stop", stop)]


_USAGE = {"input_tokens": 1, "output_tokens": 1}
_REHEARSAL_STREAM = sse_body(
    ("message_start", {"type": "message_start", "message": {
        "id": "r", "type": "message", "role": "assistant", "model": "r", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": _USAGE}}),
    ("ping", {"type": "ping"}),
    *_block(0, {"type": "text", "text": ""}, {"type": "text_delta", "text": "ok"}),
    *_block(1, {"type": "tool_use", "id": "c", "name": "run_python", "input": {}},
            {"type": "input_json_delta", "partial_json": "{}"}),
    ("message_delta", {"type": "message_delta", "usage": _USAGE,
                       "delta": {"stop_reason": "tool_use", "stop_sequence": None}}),
    ("message_stop", {"type": "message_stop"}),
)


@dataclass
class _Turn:
    """The text, tool calls and usage of one streamed turn, assembled event by event from
    their decoded JSON (`RawMessageStreamEvent`'s fields), not the SDK's models."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, tuple[str, str, list[str]]] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    #: Of the input tokens, those read from the prompt cache (cache_read_input_tokens).
    cached_tokens: int = 0
    #: Called with a tool call's input JSON so far whenever a piece of it arrives.
    on_tool_input: OnToolInput | None = None
    #: Where each usage report goes as it arrives (kept when the stream is cut).
    usage: Usage | None = None
    #: Whether message_stop (or a stop_reason) came: a stream that ends before was cut off.
    finished: bool = False
    end_mark: ClassVar[str] = "message_stop"

    def add(self, event: StreamEvent, on_text: OnText) -> None:
        """Fold one stream event into the turn; report usage and tool input as they come."""
        kind = event.get("type")
        if not isinstance(kind, str):
            raise TypeError("an event without a type")  # JSON, but not an event
        if kind == "message_stop":
            self.finished = True
        elif kind == "message_start":
            usage = event["message"]["usage"]
            self._input(usage["input_tokens"], usage.get("cache_creation_input_tokens"),
                        usage.get("cache_read_input_tokens"))
            self.output_tokens = usage["output_tokens"]
            self._report_usage()
        elif kind == "content_block_start":
            self._start(event["index"], event["content_block"], on_text)
        elif kind == "content_block_delta":
            self._delta(event["index"], event["delta"], on_text)
        elif kind == "message_delta":
            self.finished = self.finished or event["delta"].get("stop_reason") is not None
            # message_delta carries cumulative counts; input only on some API versions.
            usage = event["usage"]
            self.output_tokens = usage["output_tokens"]
            if usage.get("input_tokens") is not None:
                self._input(usage["input_tokens"], usage.get("cache_creation_input_tokens"),
                            usage.get("cache_read_input_tokens"))
            self._report_usage()

    def _start(self, index: int, block: ContentBlock, on_text: OnText) -> None:
        """Open a content block: text may start in it; a tool call is named in it."""
        if block["type"] == "text" and block.get("text"):
            self._text(block["text"], on_text)
        elif block["type"] == "tool_use":
            # Non-streaming proxies may put the whole input here instead of in deltas.
            start = [json.dumps(block["input"])] if block.get("input") else []
            self.calls[index] = (block["id"], block["name"], start)

    def _delta(self, index: int, delta: Delta, on_text: OnText) -> None:
        """Fold a piece of a content block: text, or a tool call's input JSON."""
        if delta["type"] == "text_delta":
            self._text(delta["text"], on_text)
        elif delta["type"] == "input_json_delta" and index in self.calls:
            _, name, pieces = self.calls[index]
            pieces.append(delta["partial_json"])
            if self.on_tool_input is not None:
                self.on_tool_input(name, "".join(pieces))

    def _input(self, uncached: int, written: int | None, read: int | None) -> None:
        """Count the prompt as OpenAI does: Anthropic's input_tokens leaves out the
        tokens written to and read from its cache; all three are billed input."""
        self.input_tokens = uncached + (written or 0) + (read or 0)
        self.cached_tokens = read or 0

    def _report_usage(self) -> None:
        if self.usage is not None:
            self.usage.set(self.input_tokens, self.output_tokens, self.cached_tokens)

    def _text(self, piece: str, on_text: OnText) -> None:
        self.text.append(piece)
        on_text(piece)

    def reply(self) -> ModelReply:
        """Return the finished turn."""
        calls = tuple(ToolCall(i, n, _arguments("".join(parts)))
                      for _, (i, n, parts) in sorted(self.calls.items()))
        return ModelReply("".join(self.text), calls, self.input_tokens, self.output_tokens,
                          self.cached_tokens)


def _arguments(raw: str) -> str:
    """Normalise streamed input JSON; keep it raw when it does not parse."""
    if not raw.strip():
        return "{}"  # a call without arguments streams no JSON at all
    try:
        return json.dumps(json.loads(raw))
    except ValueError:
        return raw


def _tool(name: str, description: str, parameters: InputSchema) -> ToolParam:
    """Describe one tool in the Messages format."""
    return {"name": name, "description": description, "input_schema": parameters}


def to_wire(messages: tuple[Message, ...]) -> list[MessageParam]:
    """Translate our messages to alternating Messages API user/assistant messages."""
    groups: list[tuple[bool, list[ContentBlockParam]]] = []  # (is assistant, blocks)
    for msg in messages:
        assistant = msg.role == "assistant"
        blocks = _blocks(msg)
        if not blocks:
            continue  # the API rejects empty messages and empty text blocks
        if groups and groups[-1][0] == assistant:
            groups[-1][1].extend(blocks)
        else:
            groups.append((assistant, blocks))
    wire: list[MessageParam] = []
    for assistant, blocks in groups:
        if assistant:
            wire.append({"role": "assistant", "content": blocks})
        else:
            # tool_result blocks must open the user message that answers a tool_use.
            blocks.sort(key=lambda b: b["type"] != "tool_result")
            wire.append({"role": "user", "content": blocks})
    return wire


def _blocks(msg: Message) -> list[ContentBlockParam]:
    """Return the content blocks of one message."""
    if msg.role == "tool":
        return [_tool_result(msg)]
    blocks: list[ContentBlockParam] = []
    if msg.content:
        blocks.append({"type": "text", "text": msg.content})
    if msg.role == "assistant":
        for call in msg.tool_calls:
            blocks.append({"type": "tool_use", "id": _safe_id(call.id), "name": call.name,
                           "input": _input(call.arguments)})
    return blocks


def _tool_result(msg: Message) -> ToolResultBlockParam:
    """Render a tool result: its text, then its images, inside one tool_result block."""
    block: ToolResultBlockParam = {"type": "tool_result",
                                   "tool_use_id": _safe_id(msg.tool_call_id or "")}
    images = msg.result.images if msg.result is not None else ()
    if images:
        parts: list[TextBlockParam | ImageBlockParam] = []
        if msg.content:
            parts.append({"type": "text", "text": msg.content})
        parts.extend(_image(image) for image in images if image.mime in IMAGE_TYPES)
        block["content"] = parts
    elif msg.content:
        block["content"] = msg.content
    if msg.result is not None and msg.result.failed:
        block["is_error"] = True
    return block


def _image(image: Image) -> ImageBlockParam:
    """Render one image as a base64 image block (callers check the MIME type)."""
    media = cast("ImageMime", image.mime)
    return {"type": "image", "source": {"type": "base64", "media_type": media,
                                        "data": image.data}}


def _input(raw: str) -> dict[str, object]:
    """Parse tool arguments into the object a tool_use block needs."""
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"_raw_arguments": raw}


def _safe_id(call_id: str) -> str:
    """Make a tool call id from any provider fit Anthropic's pattern ^[a-zA-Z0-9_-]+$."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", call_id) or "call"
