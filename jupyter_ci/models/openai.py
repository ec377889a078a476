"""Adapter for OpenAI Chat Completions, and so for every OpenAI-compatible server.

Ollama, vLLM, llama.cpp and LM Studio speak the same wire format through
`OPENAI_BASE_URL`, with quirks this adapter tolerates: usage may be missing, a tool
call's id may come only in its first chunk (or never), and some servers number every
parallel call with index 0. Tool arguments are kept as the raw text the model wrote;
the agent loop parses them and reports malformed JSON back to the model. When such a
call is sent back in the history, arguments that are not a JSON object are wrapped as
``{"_raw_arguments": "<text>"}``, because compatible servers (Ollama) reject the whole
request otherwise.

`complete` streams a turn through the SDK's sync client; `acomplete` is its async twin for
the server's event loop (the model service), through `openai.AsyncOpenAI`, with the same
request, vision fallback, previews and errors, and the usage reported so far kept in a
`Usage` (cancelling the awaiting task closes the provider's stream at once). Both come from
`SdkChatModel` (sdk_client.py); here each builds its request with `_Plan` and folds chunks
with `_Turn`; only the loop differs.

The `openai` SDK is imported only when the first request is made, or by `prepare`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, ClassVar

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
from jupyter_ci.models.stream_json import Choice, ChoiceDelta, Chunk, ChunkUsage, ToolCallDelta
from jupyter_ci.models.transport import REHEARSAL_URL, rehearsal_client, sse_body

if TYPE_CHECKING:
    import openai
    from openai.types.chat import (
        ChatCompletionAssistantMessageParam,
        ChatCompletionChunk,
        ChatCompletionContentPartParam,
        ChatCompletionMessageParam,
        ChatCompletionToolMessageParam,
        ChatCompletionToolParam,
        ChatCompletionUserMessageParam,
    )
    from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
    from openai.types.shared_params import FunctionParameters


class OpenAIChatModel(SdkChatModel["openai.OpenAI", "openai.AsyncOpenAI"]):
    """A Chat Completions model reached through the `openai` SDK."""

    def _sdk(self) -> ModuleType:
        """Import `openai` and return it."""
        import openai

        return openai

    def _sdk_error(self) -> type[Exception]:
        """Return the base class of every exception `openai` raises."""
        import openai

        return openai.OpenAIError

    def _new_client(self, options: ClientOptions) -> openai.OpenAI:
        """Build the sync client."""
        import openai

        return openai.OpenAI(**options)

    def _new_async_client(self, options: ClientOptions) -> openai.AsyncOpenAI:
        """Build the async client."""
        import openai

        return openai.AsyncOpenAI(**options)

    def _rehearsal_client(self) -> openai.OpenAI:
        """Build a client that streams `_REHEARSAL_STREAM` for every request, offline."""
        import openai

        # The first request of a process imports the chat resources and builds pydantic
        # validators (~80 ms): the rehearsal pays that.
        return openai.OpenAI(api_key="rehearsal", base_url=f"{REHEARSAL_URL}/v1", max_retries=0,
                             http_client=rehearsal_client(openai.DefaultHttpxClient,
                                                          _REHEARSAL_STREAM))

    def _stream(self, client: openai.OpenAI, request: ModelRequest, on_text: OnText,
                usage: Usage | None = None) -> ModelReply:
        """Stream one turn from `client`; SDK errors are the caller's to translate."""
        import openai

        plan = self._plan(client, request)
        create = client.chat.completions.create
        stream: openai.Stream[ChatCompletionChunk]
        # The server's refusal (an HTTP error) raises in `create`, before any text.
        try:
            stream = create(**plan.kwargs(plan.images))
        except (openai.BadRequestError, openai.UnprocessableEntityError):
            if not plan.may_drop_images():
                raise
            stream = create(**plan.kwargs(images=False))
            plan.remember_text_only()
        return fold(stream, _Turn(on_tool_input=request.on_tool_input, usage=usage), on_text)

    async def _astream(self, client: openai.AsyncOpenAI, request: ModelRequest,
                       on_text: OnText, usage: Usage | None) -> ModelReply:
        """The async twin of `_stream`; leaving it, even by cancellation, closes the stream."""
        import openai

        plan = self._plan(client, request)
        create = client.chat.completions.create
        stream: openai.AsyncStream[ChatCompletionChunk]
        try:
            stream = await create(**plan.kwargs(plan.images))
        except (openai.BadRequestError, openai.UnprocessableEntityError):
            if not plan.may_drop_images():
                raise
            stream = await create(**plan.kwargs(images=False))
            plan.remember_text_only()
        return await afold(stream, _Turn(on_tool_input=request.on_tool_input, usage=usage),
                           on_text)

    def _plan(self, client: openai.OpenAI | openai.AsyncOpenAI, request: ModelRequest
              ) -> _Plan:
        """Work out what `create` is sent for `request` through `client`."""
        host = client.base_url.host
        seen = (host, str(client.base_url), self.name)
        images = seen not in TEXT_ONLY
        options: CompletionCreateParamsStreaming = {
            "model": self.name, "stream": True, "stream_options": {"include_usage": True},
            "messages": to_wire(request.system, request.messages, images)}
        # Reasoning models on api.openai.com refuse max_tokens; compatible servers may not
        # know its successor max_completion_tokens.
        if host == "api.openai.com":
            options["max_completion_tokens"] = request.max_tokens
        else:
            options["max_tokens"] = request.max_tokens
        if request.tools:
            options["tools"] = [_tool(t.name, t.description, t.parameters) for t in request.tools]
        return _Plan(request, options, seen, images)


@dataclass(frozen=True)
class _Plan:
    """What one turn sends to `chat.completions.create`, but `stream=True`."""

    request: ModelRequest
    #: `create`'s arguments, with the images of tool results sent if `images`.
    options: CompletionCreateParamsStreaming
    #: The model's entry in TEXT_ONLY: (host, base URL, model).
    seen: tuple[str, str, str]
    #: Whether images are sent (the model has not refused them yet).
    images: bool

    def kwargs(self, images: bool) -> CompletionCreateParamsStreaming:
        """Return `create`'s arguments, the tool results' images sent or described."""
        if images == self.images:
            return self.options
        params = self.options.copy()
        params["messages"] = to_wire(self.request.system, self.request.messages, images)
        return params

    def may_drop_images(self) -> bool:
        """Tell whether a refused request is worth sending again without its images."""
        return self.images and has_images(self.request.messages)

    def remember_text_only(self) -> None:
        """Send this model no images again (it took the request without them)."""
        # A text-only model behind a compatible server (vLLM, Ollama) refuses image parts.
        TEXT_ONLY.add(self.seen)


#: (host, base URL, model) of models that refused images: not sent any while this process runs.
TEXT_ONLY: set[tuple[str, str, str]] = set()
#: Stands for the images of a tool result sent to a model that takes no images.
NO_IMAGES_NOTE = "[image not shown: this model does not accept images]"


def has_images(messages: tuple[Message, ...]) -> bool:
    """Tell whether any tool result of the conversation carries images."""
    return any(m.result is not None and m.result.images for m in messages)


def _chunk(delta: ChoiceDelta | None, finish: str | None = None,
           usage: ChunkUsage | None = None) -> tuple[None, Chunk]:
    """Write one canned `chat.completion.chunk` for the rehearsal."""
    choices: list[Choice] = ([] if delta is None else
                             [{"index": 0, "delta": delta, "finish_reason": finish}])
    return None, {"id": "r", "object": "chat.completion.chunk", "created": 0, "model": "r",
                  "choices": choices, "usage": usage}


_REHEARSAL_STREAM = sse_body(
    _chunk({"role": "assistant", "content": "ok"}),
    _chunk({"tool_calls": [{"index": 0, "id": "c", "type": "function",
                            "function": {"name": "run_python", "arguments": "{}"}}]},
           "tool_calls"),
    _chunk(None, usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}),
    (None, "[DONE]"),
)


def _has_arguments(chunk: Chunk) -> bool:
    """Tell whether a chunk carries a piece of tool-call arguments."""
    return any((d.get("function") or {}).get("arguments")
               for c in (chunk.get("choices") or [])[:1]
               for d in (c.get("delta") or {}).get("tool_calls") or [])


@dataclass
class _Call:
    """A tool call being assembled from streamed deltas."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Turn:
    """The text, tool calls and usage of one streamed turn, assembled chunk by chunk.

    Not the SDK's `chat.completions.stream` helper: it raises on finish_reason "length"
    and trusts every server to number its tool-call deltas properly. Chunks come as their
    decoded JSON (`ChatCompletionChunk`'s fields), not the SDK's models (sdk_client.as_json).
    """

    text: list[str] = field(default_factory=list)
    calls: list[_Call] = field(default_factory=list)
    slots: dict[int, _Call] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    #: Of the input tokens, those read from OpenAI's prompt cache (they are billed less).
    cached_tokens: int = 0
    #: Called with the last call's arguments so far whenever a chunk brings some.
    on_tool_input: OnToolInput | None = None
    #: Where each usage report goes as it arrives (kept when the stream is cut).
    usage: Usage | None = None
    #: Whether a finish_reason came: a stream that ends without one was cut off.
    finished: bool = False
    end_mark: ClassVar[str] = "a finish_reason"

    def add(self, chunk: Chunk, on_text: OnText) -> None:
        """Fold one chunk into the turn; report usage and arguments as they come."""
        choices, usage = chunk.get("choices"), chunk.get("usage")
        if not isinstance(choices, list) and usage is None:
            raise TypeError("a chunk without choices")  # JSON, but not a chunk
        if usage is not None:
            self._usage(usage)
        for choice in (choices or [])[:1]:  # a usage-only chunk may have choices: null
            self.finished = self.finished or bool(choice.get("finish_reason"))
            delta = choice.get("delta") or {}
            piece = delta.get("content") or delta.get("refusal")
            if piece:
                self.text.append(piece)
                on_text(piece)
            for call_delta in delta.get("tool_calls") or []:
                self._call_delta(call_delta)
        if self.on_tool_input is not None and self.calls and _has_arguments(chunk):
            call = self.calls[-1]
            self.on_tool_input(call.name, "".join(call.arguments))

    def _usage(self, usage: ChunkUsage) -> None:
        """Keep a usage report (cumulative), and pass it on."""
        self.input_tokens = usage.get("prompt_tokens") or 0
        self.output_tokens = usage.get("completion_tokens") or 0
        details = usage.get("prompt_tokens_details")  # absent on compatible servers
        self.cached_tokens = (details.get("cached_tokens") or 0) if details else 0
        if self.usage is not None:
            self.usage.set(self.input_tokens, self.output_tokens, self.cached_tokens)

    def _call_delta(self, delta: ToolCallDelta) -> None:
        """Fold one tool call's delta into the call it continues (or a new one)."""
        fn = delta.get("function") or {}
        call = self._slot(delta.get("index"), delta.get("id"))
        call.id = call.id or delta.get("id") or ""
        call.name = call.name or fn.get("name") or ""
        if arguments := fn.get("arguments"):
            call.arguments.append(arguments)

    def _slot(self, index: int | None, call_id: str | None) -> _Call:
        """Find the call a delta continues; a new id at a used index starts a new call."""
        if index is None:  # servers that do not number calls continue the last one
            current = self.calls[-1] if self.calls else None
        else:
            current = self.slots.get(index)
        if current is None or (call_id and current.id and call_id != current.id):
            current = _Call()
            self.calls.append(current)
            if index is not None:
                self.slots[index] = current
        return current

    def reply(self) -> ModelReply:
        """Return the finished turn."""
        calls = tuple(
            # Some servers never send ids, but tool results must name the call they answer.
            ToolCall(c.id or f"call_{uuid.uuid4().hex[:24]}", c.name, "".join(c.arguments))
            for c in self.calls
        )
        return ModelReply("".join(self.text), calls, self.input_tokens, self.output_tokens,
                          self.cached_tokens)


def _tool(name: str, description: str, parameters: FunctionParameters
          ) -> ChatCompletionToolParam:
    """Describe one tool in the Chat Completions format."""
    return {"type": "function",
            "function": {"name": name, "description": description, "parameters": parameters}}


def to_wire(system: str, messages: tuple[Message, ...], images: bool = True
            ) -> list[ChatCompletionMessageParam]:
    """Translate the system prompt and our messages to Chat Completions messages.

    With `images` false, each tool result's images become a note in its text instead.
    """
    wire: list[ChatCompletionMessageParam] = []
    if system:
        wire.append({"role": "system", "content": system})
    # Tool messages cannot carry images: they follow, in a user message, the tool messages
    # of their turn.
    pending: list[Image] = []
    for msg in messages:
        if pending and msg.role != "tool":
            wire.append(_images_message(pending))
            pending = []
        if msg.role == "user":
            wire.append({"role": "user", "content": msg.content})
        elif msg.role == "tool":
            wire.append(_tool_message(msg, images))
            if images and msg.result is not None:
                pending.extend(msg.result.images)
        else:
            wire.append(_assistant_message(msg))
    if pending:
        wire.append(_images_message(pending))
    return wire


def _tool_message(msg: Message, images: bool) -> ChatCompletionToolMessageParam:
    """Render a tool result's text; with `images` false, a note stands for its images."""
    content = msg.content
    if msg.result is not None and msg.result.images and not images:
        content = f"{content}\n{NO_IMAGES_NOTE}" if content else NO_IMAGES_NOTE
    return {"role": "tool", "tool_call_id": msg.tool_call_id or "", "content": content}


def _assistant_message(msg: Message) -> ChatCompletionAssistantMessageParam:
    """Render an assistant turn: its text, then its tool calls."""
    if not msg.tool_calls:
        return {"role": "assistant", "content": msg.content}
    return {
        "role": "assistant",
        "content": msg.content or None,
        "tool_calls": [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": wire_arguments(c.arguments)}}
            for c in msg.tool_calls
        ],
    }


def _images_message(images: list[Image]) -> ChatCompletionUserMessageParam:
    """Show the images of the tool results just above as a user message."""
    parts: list[ChatCompletionContentPartParam] = [
        {"type": "text", "text": "Images shown by the code above:"}]
    parts.extend({"type": "image_url",
                  "image_url": {"url": f"data:{image.mime};base64,{image.data}"}}
                 for image in images)
    return {"role": "user", "content": parts}


def wire_arguments(raw: str) -> str:
    """Return raw arguments if they are a JSON object, else wrap them in one."""
    if not raw.strip():
        return "{}"
    try:
        if isinstance(json.loads(raw), dict):
            return raw
    except ValueError:
        pass
    return json.dumps({"_raw_arguments": raw})
