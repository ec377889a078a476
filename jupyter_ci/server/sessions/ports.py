"""What sessions need of the model service, as a protocol: the app injects the broker's service.

The sessions package imports nothing of the broker's (an import contract checks it); the
broker's ModelService fits ModelPort structurally, and mypy checks that where app.py injects it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from jupyter_ci.agent.types import ModelReply, OnText
from jupyter_ci.models.turn_wire import Turn

#: Receives one event of a streamed turn ({"text": ...}, tool input, ...).
TurnEvents = Callable[[dict[str, object]], None]


class ModelPort(Protocol):
    """The model service as a session's asks use it: models, turns and the asks' budget."""

    async def model(self, model_id: str) -> object:
        """Prepare the model's adapter, or raise the AskError saying why it cannot serve."""
        ...

    async def turn(self, holder: str, turn: Turn, emit: TurnEvents) -> ModelReply:
        """Stream one turn, charged to `holder`'s budget; cancelling stops the provider."""
        ...

    def warn(self, message: str) -> None:
        """Log a problem that does not end a turn."""
        ...

    def open_budget(self, holder: str) -> None:
        """Start counting the tokens of `holder` (a session's asks)."""
        ...

    def close_budget(self, holder: str) -> None:
        """Forget `holder`'s budget (its session is gone)."""
        ...

    def held_keys(self) -> list[str]:
        """Return the provider keys the server holds, for an ask to redact."""
        ...


def ask_token_id(sid: str) -> str:
    """Name the budget holder of a session's asks (closed with the session)."""
    return f"ask:{sid}"


def as_text_sink(on_text: OnText) -> TurnEvents:
    """Adapt a plain text callback (a REST ask's view) to the service's events."""

    def emit(event: dict[str, object]) -> None:
        if isinstance(text := event.get("text"), str):
            on_text(text)

    return emit
