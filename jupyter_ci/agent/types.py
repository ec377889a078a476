"""Plain data exchanged between the agent loop, model adapters and executors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from jupyter_ci.wire.frozen import frozen
from jupyter_ci.wire.nbformat import NbOutput

Role = Literal["user", "assistant", "tool"]
RunStatus = Literal["ok", "error", "timeout", "died", "interrupted"]
#: A run's status, or "invalid" (the tool call could not be run) or "not_run" (ask ended).
ToolStatus = Literal["ok", "error", "timeout", "died", "interrupted", "invalid", "not_run"]

#: One nbformat v4 output (stream, display_data, execute_result, error): narrow on output_type.
Output = NbOutput
#: Called with each piece of model text as it streams in.
OnText = Callable[[str], None]
#: Called as a tool call's arguments stream in: (tool name, the raw JSON text so far).
OnToolInput = Callable[[str, str], None]


@frozen
class ToolCall:
    """A tool call as the model sent it; `arguments` is the raw JSON text, unparsed."""

    id: str
    name: str
    arguments: str


@frozen
class Image:
    """An image for the model: base64 data, its MIME type and, when known, its size in pixels."""

    mime: str
    data: str = field(repr=False)
    width: int = 0
    height: int = 0


@frozen
class FileInfo:
    """A file a code run created or changed."""

    path: str
    size: int
    mime: str


@frozen
class ToolResult:
    """What the model is told about one tool call, built once and rendered per provider."""

    status: ToolStatus
    text: str
    images: tuple[Image, ...] = ()
    files: tuple[FileInfo, ...] = ()

    @property
    def failed(self) -> bool:
        """Tell whether the code ran and failed (an error or a timeout)."""
        return self.status in ("error", "timeout", "died", "interrupted")


@frozen
class Message:
    """One conversation message in a provider-neutral form; tool messages carry `result`."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    result: ToolResult | None = None

    @classmethod
    def tool(cls, call_id: str, result: ToolResult) -> Message:
        """Build the message answering tool call `call_id`."""
        return cls("tool", result.text, tool_call_id=call_id, result=result)


@frozen
class ToolSpec:
    """A tool offered to the model, with a JSON-schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, object]


@frozen
class ModelRequest:
    """Everything a model adapter needs for one turn."""

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    max_tokens: int = 4096
    #: The ask's prompt as the user wrote it, without context: what recordings key on.
    prompt: str = ""
    #: Adapters that stream call it with a tool call's arguments as they arrive (a preview).
    on_tool_input: OnToolInput | None = field(default=None, compare=False, repr=False)


@frozen
class ModelReply:
    """What the model answered in one turn: text, tool calls and token usage.

    `input_tokens` counts every prompt token, those read from the provider's prompt cache
    included; `cached_tokens` says how many of them were (agent/cost.py prices them).
    `cost_usd` is what the call cost when the server's model service priced it (what it
    charged the budgets): an ask sums it rather than pricing the reply a second time.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None


@frozen
class ErrorInfo:
    """An exception raised by executed code; traceback lines are ANSI-free."""

    ename: str
    evalue: str
    traceback: tuple[str, ...] = ()
    #: The module an import could not find (ModuleNotFoundError's `name`), when known.
    module: str | None = None


@dataclass
class CodeResult:
    """The outcome of running one piece of code in a kernel."""

    status: RunStatus
    outputs: list[Output] = field(default_factory=list)
    duration_s: float = 0.0
    execution_count: int | None = None
    error: ErrorInfo | None = None
    #: Files in the working directory the run created or changed.
    files: list[FileInfo] = field(default_factory=list)
    #: The directory held more than a walk reads (jupyter_ci.workdir): `files` may miss some.
    files_cut: bool = False
    #: Displays shown before this run that it updated (`handle.update`), as they are now.
    updated: list[Output] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Tell whether the code ran to the end without raising."""
        return self.status == "ok"
