"""The one small interface every model adapter implements."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from jupyter_ci.agent.types import ModelReply, ModelRequest, OnText

__all__ = ["AsyncChatModel", "ChatModel", "Endpoint", "OnText", "Preparable", "SeesImages",
           "Usage"]


class SeesImages(Protocol):
    """A model that says whether it is shown images (`vision = auto` asks it)."""

    @property
    def sees_images(self) -> bool:
        """Tell whether this model takes images, as its provider's table says of its name."""
        ...


class ChatModel(SeesImages, Protocol):
    """A chat model that can call tools, addressed as `provider:model`."""

    @property
    def id(self) -> str:
        """Return the `provider:model` id."""
        ...

    def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        """Stream one turn, calling `on_text` with text as it arrives; return the whole turn.

        Raises `ModelUnavailable` (unreachable, retries exhausted, provider error) or
        `ModelConfigError` (key rejected, unknown model).
        """
        ...


@dataclass
class Usage:
    """The tokens a provider has reported so far for one turn (kept when a stream is cut)."""

    input_tokens: int = 0
    output_tokens: int = 0
    #: Whether the provider reported any usage yet (a cut stream may have reported none).
    reported: bool = False
    #: Of `input_tokens`, those read from the provider's prompt cache.
    cached_tokens: int = 0

    def set(self, input_tokens: int | None, output_tokens: int | None,
            cached_tokens: int | None = None) -> None:
        """Take a cumulative report; a field the provider left out keeps its value."""
        self.reported = True
        if input_tokens is not None:
            self.input_tokens = input_tokens
        if output_tokens is not None:
            self.output_tokens = output_tokens
        if cached_tokens is not None:
            self.cached_tokens = cached_tokens

    @property
    def total(self) -> int:
        """Return input plus output tokens."""
        return self.input_tokens + self.output_tokens


class AsyncChatModel(SeesImages, Protocol):
    """A chat model the server streams from its event loop (the model service)."""

    @property
    def id(self) -> str:
        """Return the `provider:model` id."""
        ...

    async def acomplete(self, request: ModelRequest, on_text: OnText,
                        usage: Usage | None = None) -> ModelReply:
        """Stream one turn without blocking the loop; keep reported usage in `usage`.

        Cancelling the awaiting task closes the provider's stream at once. Raises like
        `ChatModel.complete`.
        """
        ...


@runtime_checkable
class Renamable(Protocol):
    """An adapter that serves any model of its provider through the same clients."""

    def named(self, name: str) -> AsyncChatModel:
        """Return this adapter for the model `name`, sharing its clients and pools."""
        ...


@runtime_checkable
class Preparable(Protocol):
    """An adapter that can load its SDK ahead of its first request."""

    def prepare(self) -> None:
        """Import the SDK and build the client, sending nothing; safe from another thread."""
        ...


@dataclass(frozen=True)
class UrlSetting:
    """Where a base URL was set and how to change it, for the errors of one that fails."""

    #: Names the place ("set by OPENAI_BASE_URL in the Jupyter server's environment");
    #: "" when none was set: the provider's own URL (its cloud).
    origin: str = ""
    #: Where to set or change it ("in the environment that starts JupyterLab, then
    #: restart it"); "" when the caller knows no better than the variable's name.
    how: str = ""


@dataclass(frozen=True)
class Endpoint:
    """Where and how an adapter reaches its provider."""

    api_key: str = field(repr=False)  # never in a log line or traceback
    base_url: str | None = None
    timeout: float = 120.0
    max_retries: int = 3
    #: A Unix socket to connect through instead of base_url's host and port (the model
    #: service of a server started with --sock, or a box's); base_url still gives the path.
    socket: str | None = None
    #: Where base_url was set (the provider's own URL when its origin is "").
    url_setting: UrlSetting = UrlSetting()
