"""The model service's turn as it crosses the wire: our own request, never a provider's.

A kernel under Jupyter Server POSTs a `TurnRequest` to the server's model service (route
names.TURN_PATH); the server answers with one JSON object per line: `TextLine`s as text
streams, `ToolInputLine`s as a tool call's arguments stream (the raw arguments so far are
the earlier ones cut at `at`, then `text`), then one `ReplyLine` or `ErrorLine`. The server
reads a request strictly (an unknown field refused: nothing reaches a provider unchecked);
a kernel reads the reply lines leniently (a newer server may add a field).
models/turn_wire.py converts these to and from the agent's types.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from jupyter_ci.wire.codec import OMIT_IF
from jupyter_ci.wire.frozen import frozen

Role = Literal["user", "assistant", "tool"]
#: A code run's status, or "invalid" (the call could not be run) or "not_run" (ask ended).
ToolStatus = Literal["ok", "error", "timeout", "died", "interrupted", "invalid", "not_run"]
#: Image types a request may carry (what both providers accept).
ImageType = Literal["image/png", "image/jpeg", "image/gif", "image/webp"]


@frozen
class TurnToolCall:
    """A tool call as the model sent it."""

    id: str = ""
    #: Not empty.
    name: str = ""
    #: The raw JSON text the model wrote, unparsed.
    arguments: str = ""


@frozen
class TurnImage:
    """An image a tool result shows the model."""

    mime: ImageType
    #: Base64, not empty.
    data: str
    #: In pixels; 0 when unknown.
    width: int = 0
    height: int = 0


@frozen
class TurnFile:
    """A file a code run created or changed."""

    path: str = ""
    #: In bytes.
    size: int = 0
    mime: str = ""


@frozen
class TurnResult:
    """What the model is told about one tool call."""

    status: ToolStatus
    text: str = ""
    images: tuple[TurnImage, ...] = ()
    files: tuple[TurnFile, ...] = ()


@frozen
class TurnMessage:
    """One message of the conversation; a tool message carries its `result`."""

    role: Role
    content: str = ""
    tool_calls: tuple[TurnToolCall, ...] = field(default=(), metadata={OMIT_IF: ()})
    tool_call_id: str | None = field(default=None, metadata={OMIT_IF: None})
    result: TurnResult | None = field(default=None, metadata={OMIT_IF: None})


@frozen(kw_only=True)
class TurnRequest:
    """POST names.TURN_PATH: one turn of an ask, for a `provider:model`."""

    #: `provider:model`, not empty.
    model: str
    system: str = ""
    #: The ask's prompt as the user wrote it, without context.
    prompt: str = ""
    #: The reply's token limit, at least 1 (more than the server's limit is lowered to it);
    #: absent: the server's limit (null is refused).
    max_tokens: int | None = None
    #: The names of the tools offered: the service holds their schemas.
    tools: tuple[str, ...] = ()
    #: Not empty.
    messages: tuple[TurnMessage, ...]


@frozen
class TextLine:
    """A piece of the model's text as it streams."""

    text: str


@frozen
class ToolInput:
    """A tool call's raw arguments so far: the earlier ones cut at `at`, then `text`."""

    name: str
    at: int
    text: str


@frozen
class ToolInputLine:
    """A tool call's arguments as they stream (a preview)."""

    tool_input: ToolInput


@frozen
class TurnReply:
    """The finished turn: text, tool calls, token usage and, when priced, its cost."""

    text: str = ""
    #: The whole prompt, cached tokens included.
    input_tokens: int = 0
    output_tokens: int = 0
    #: Of the input tokens, those read from the provider's prompt cache.
    cached_tokens: int = 0
    tool_calls: tuple[TurnToolCall, ...] = ()
    #: In USD, what the service charged the budgets; absent when it did not price the call.
    cost_usd: float | None = field(default=None, metadata={OMIT_IF: None})


@frozen
class ReplyLine:
    """The last line of a turn that ended with a reply."""

    reply: TurnReply


@frozen
class TurnError:
    """Why a turn ended without a reply (also the body of a refusal before the stream)."""

    #: The ask error: ModelUnavailable, ModelConfigError, LimitReached or BadModelReply.
    type: str
    message: str
    #: What to do about it; may be empty.
    hint: str = ""


@frozen
class ErrorLine:
    """The last line of a turn that ended with an error."""

    error: TurnError
