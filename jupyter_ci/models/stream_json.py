"""The providers' stream events as the SDK adapters read them: their decoded JSON.

The adapters fold each event's JSON, not the SDK's model of it (sdk_client.as_json), so the
SDKs' classes (`ChatCompletionChunk`, `RawMessageStreamEvent`) do not describe the values;
these do, for the fields the adapters read and their rehearsals write. Every key may be
absent (compatible servers leave fields out) and the adapters read them tolerantly; a value
of another shape is a reply that is not the provider's wire format (bad_reply.py).
"""

from __future__ import annotations

from typing import TypedDict

# --- OpenAI Chat Completions: `chat.completion.chunk` ------------------------------------


class FunctionDelta(TypedDict, total=False):
    """A piece of a tool call's function: its name (first), then pieces of its arguments."""

    name: str | None
    arguments: str | None


class ToolCallDelta(TypedDict, total=False):
    """A piece of one tool call of a chunk."""

    index: int | None
    id: str | None
    type: str
    function: FunctionDelta | None


class ChoiceDelta(TypedDict, total=False):
    """What a chunk's choice adds: text, a refusal, tool call pieces."""

    role: str
    content: str | None
    refusal: str | None
    tool_calls: list[ToolCallDelta] | None


class Choice(TypedDict, total=False):
    """A chunk's choice (the adapter reads the first)."""

    index: int
    delta: ChoiceDelta | None
    finish_reason: str | None


class PromptTokensDetails(TypedDict, total=False):
    """Of the prompt tokens, those read from the prompt cache."""

    cached_tokens: int | None


class ChunkUsage(TypedDict, total=False):
    """The usage a chunk reports (cumulative; the last chunk, with stream_options)."""

    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails | None


class Chunk(TypedDict, total=False):
    """One `chat.completion.chunk`."""

    id: str
    object: str
    created: int
    model: str
    choices: list[Choice] | None
    usage: ChunkUsage | None


# --- Anthropic Messages: the raw message stream events ----------------------------------


class MessageUsage(TypedDict, total=False):
    """Token counts of message_start and message_delta."""

    #: Always in message_start; in message_delta on some API versions, and may be null there
    #: (read with `.get`).
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int | None
    cache_read_input_tokens: int | None


class StartedMessage(TypedDict, total=False):
    """The message message_start opens."""

    id: str
    type: str
    role: str
    model: str
    content: list[ContentBlock]
    stop_reason: str | None
    stop_sequence: str | None
    usage: MessageUsage


class ContentBlock(TypedDict, total=False):
    """A content block as content_block_start opens it: text, or a tool_use."""

    type: str
    text: str
    id: str
    name: str
    input: dict[str, object]


class Delta(TypedDict, total=False):
    """A content block's delta (text_delta, input_json_delta), or message_delta's delta."""

    type: str
    text: str
    partial_json: str
    stop_reason: str | None
    stop_sequence: str | None


class StreamEvent(TypedDict, total=False):
    """One event of the Messages stream; `type` says which of its keys it has."""

    type: str
    index: int
    message: StartedMessage
    content_block: ContentBlock
    delta: Delta
    usage: MessageUsage
