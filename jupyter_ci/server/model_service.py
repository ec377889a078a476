"""The model service: the server's one path to models, for %%ask kernels and REST asks alike.

A caller gives our own request for one turn (turn_wire.Turn); the service picks the
provider's adapter with the key it holds, reserves the turn's tokens in the budget, streams
the turn through the SDK's async client on the server's event loop (no thread per call),
and settles the budget on the usage it read itself. Kernels never send provider requests,
so no route, tool, field or header of a provider's API is theirs to choose. Cancelling the
awaiting task (a kernel that hangs up or is interrupted, a REST client gone, a session
deleted) closes the provider's stream at once and charges what the provider reported so
far, or the reservation when it reported nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from logging import Logger
from typing import Any, cast

from jupyter_ci import secret_rules
from jupyter_ci.agent.errors import AskError, LimitReached, ModelConfigError
from jupyter_ci.agent.prompts import RUN_PYTHON
from jupyter_ci.agent.types import ModelReply, ModelRequest, OnText, ToolSpec
from jupyter_ci.models.base import AsyncChatModel, Endpoint, Usage
from jupyter_ci.models.resolve import (
    PANEL_HINT,
    PLACEHOLDER_KEY,
    adapter_factory,
    parse_model_id,
)
from jupyter_ci.models.turn_wire import Turn, tool_input_event
from jupyter_ci.server.broker import Broker, Provider
from jupyter_ci.server.errors import BrokerError

#: The tools a turn may offer the model: the one code tool (by name; schemas are ours).
TOOLS: dict[str, ToolSpec] = {RUN_PYTHON.name: RUN_PYTHON}
#: Rough bytes of request per input token, for a reservation made before the provider counts.
BYTES_PER_TOKEN = 4
#: Sends one event of a turn to its caller (a line to a kernel; nothing for a REST ask).
Emit = Callable[[dict[str, Any]], None]


@dataclass
class ModelService:
    """Provider adapters holding the server's keys, shared by every kernel and session."""

    broker: Broker
    timeout: float = 120.0
    retries: int = 3
    #: The most tokens one reply may ask for (c.JupyterCI.max_reply_tokens).
    max_reply_tokens: int = 4096
    log: Logger | None = None
    #: The server's default model (c.JupyterCI.model), prepared first.
    default_model: str = ""
    _adapters: dict[tuple[str, str, str, str], AsyncChatModel] = field(default_factory=dict)

    async def model(self, model_id: str) -> AsyncChatModel:
        """Return the adapter of `model_id` with the key the server holds now."""
        spec, name = parse_model_id(model_id)
        if spec.in_process:
            raise ModelConfigError(f"{model_id} runs in the kernel, not in the server.",
                                   "Use it with %%ask outside a server, or pick a provider.")
        provider = self._provider(spec.name)
        key = (spec.name, name, provider.base_url, provider.api_key)
        found = self._adapters.get(key)
        if found is None:
            endpoint = Endpoint(provider.api_key or PLACEHOLDER_KEY, provider.base_url,
                                self.timeout, self.retries)
            adapter = adapter_factory(spec)(spec, name, endpoint)
            # The SDK's import, first validators (~0.5 s) and client happen off the loop.
            await asyncio.to_thread(_ready, adapter)
            found = self._adapters.setdefault(key, cast(AsyncChatModel, adapter))
        return found

    def _provider(self, name: str) -> Provider:
        """Return the provider as the broker holds it, or say what to configure."""
        try:
            return self.broker.provider(name)
        except BrokerError as err:
            raise ModelConfigError(err.message, PANEL_HINT) from None

    async def warm(self) -> None:
        """Load the SDKs of the configured providers before the first ask needs them."""
        # And write the redaction rules' cache, which kernels load at %load_ext.
        await asyncio.to_thread(secret_rules.rules)
        models = [p.spec.default_model_id for p in self.broker.configured()]
        for model_id in dict.fromkeys([self.default_model, *models]):
            if model_id:
                try:
                    await self.model(model_id)
                except ModelConfigError:
                    continue  # no key for it yet: the ask that uses it says what to do
                except (AskError, ImportError) as err:  # the first ask will say it again
                    self.warn(f"could not prepare {model_id}: {err}")

    async def turn(self, holder: str, turn: Turn, emit: Emit) -> ModelReply:
        """Stream one turn for `holder` (a kernel id, or a session's ask holder)."""
        model = await self.model(turn.model)
        reservation = self.broker.budget.reserve(holder, reserve_for(turn.request))
        if isinstance(reservation, str):
            raise LimitReached(reservation, "")
        usage, charged = Usage(), 0
        try:
            reply = await model.acomplete(_streaming(turn.request, emit),
                                          lambda text: emit({"text": text}), usage)
            charged = reply.input_tokens + reply.output_tokens
            if not usage.reported and not charged:
                # A server that reports no usage: count what went each way.
                charged = reservation.tokens - turn.request.max_tokens + _reply_tokens(reply)
            return reply
        except asyncio.CancelledError:
            # Hung up: the provider bills what it streamed; with no report, the reservation.
            charged = usage.total if usage.reported else reservation.tokens
            raise
        except AskError:
            charged = usage.total  # a refused request costs nothing; a cut stream what it said
            raise
        finally:
            self.broker.budget.settle(reservation, charged)

    def warn(self, message: str) -> None:
        """Log a problem that does not end a turn."""
        if self.log is not None:
            self.log.warning("jupyter-ci: %s", message)

    def forget(self) -> None:
        """Drop adapters built with keys that were replaced (the panel's keys form)."""
        held = {(p.base_url, p.api_key) for p in self.broker.providers.values()}
        for key in [k for k in self._adapters if (k[2], k[3]) not in held]:
            del self._adapters[key]


def _ready(adapter: object) -> None:
    """Import the adapter's SDK, rehearse a turn offline and build its async client."""
    for step in ("prepare", "async_client"):
        method = getattr(adapter, step, None)
        if method is not None:
            method()


def reserve_for(request: ModelRequest) -> int:
    """Estimate the most a turn may cost: its request's size in tokens, plus its reply limit."""
    size = len(request.system) + sum(
        len(m.content) + sum(len(c.arguments) for c in m.tool_calls)
        + (sum(len(i.data) for i in m.result.images) if m.result else 0)
        for m in request.messages)
    return size // BYTES_PER_TOKEN + request.max_tokens


def _reply_tokens(reply: ModelReply) -> int:
    """Estimate the tokens of a reply from its length (for servers that report none)."""
    size = len(reply.text) + sum(len(c.arguments) for c in reply.tool_calls)
    return size // BYTES_PER_TOKEN


def _streaming(request: ModelRequest, emit: Emit) -> ModelRequest:
    """Return `request` with its tool input streamed to `emit` as changes of the arguments."""
    sent, also = [""], request.on_tool_input

    def on_tool_input(name: str, raw: str) -> None:
        if also is not None:
            also(name, raw)  # the driver's own preview (a REST ask in this process)
        emit(tool_input_event(name, sent[0], raw))
        sent[0] = raw

    return replace(request, on_tool_input=on_tool_input)


def as_text_sink(on_text: OnText) -> Emit:
    """Adapt a plain text callback (a REST ask's view) to the service's events."""

    def emit(event: dict[str, Any]) -> None:
        if isinstance(text := event.get("text"), str):
            on_text(text)

    return emit
