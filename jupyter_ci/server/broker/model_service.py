"""The model service: the server's one path to models, for %%ask kernels and REST asks alike.

A caller gives our own request for one turn (turn_wire.Turn); the service reads the model
the turn names as one id (resolve.canonical_model_id: what is priced, budgeted and sent is
the same model), picks the provider's adapter with the key it holds (one per provider, key
and URL, whatever model names are sent: adapters and their connection pools would otherwise
pile up per name), refuses a model without a price while a money budget is set, reserves the
turn's tokens (and, priced by that model, their cost) in the budget, streams the turn
through the SDK's async client on the server's event loop (no thread per call), and settles
the budget on the usage it read itself. Kernels never send provider requests, so no route,
tool, field or header of a provider's API is theirs to choose. Cancelling the awaiting task
(a kernel that hangs up or is interrupted, a REST client gone, a session deleted) closes the
provider's stream at once and charges what the provider reported so far, or the reservation
when it reported nothing.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from logging import Logger
from typing import Protocol, cast

from jupyter_ci import secret_rules
from jupyter_ci.agent.cost import PriceTable, Rates
from jupyter_ci.agent.errors import (
    AskError,
    BadModelReply,
    ModelConfigError,
    ModelUnavailable,
)
from jupyter_ci.agent.prompts import EDIT_CELL, RUN_PYTHON
from jupyter_ci.agent.types import ModelReply, ModelRequest, ToolSpec
from jupyter_ci.models.base import (
    AsyncChatModel,
    Endpoint,
    Preparable,
    Renamable,
    UrlSetting,
    Usage,
)
from jupyter_ci.models.resolve import (
    PANEL_HINT,
    PLACEHOLDER_KEY,
    adapter_factory,
    canonical_model_id,
    parse_model_id,
)
from jupyter_ci.models.turn_wire import Turn, tool_input_event
from jupyter_ci.providers import ProviderSpec
from jupyter_ci.server.broker.broker import Broker, Provider
from jupyter_ci.server.broker.budget import Reservation
from jupyter_ci.server.broker.errors import BrokerError
from jupyter_ci.server.broker.meter import Meter, ServerMeter

#: The tools a turn may offer the model: running code and editing a cell (by name; schemas
#: are ours).
TOOLS: dict[str, ToolSpec] = {RUN_PYTHON.name: RUN_PYTHON, EDIT_CELL.name: EDIT_CELL}
#: Rough bytes per token, to guess the usage of a server that reports none.
BYTES_PER_TOKEN = 4
#: Tokens one image may cost, at most (both providers scale a large image down first).
IMAGE_TOKENS = 2000
#: Tokens of framing a message may add (roles, separators), at most.
FRAMING_TOKENS = 16
#: Sends one event of a turn to its caller (a line to a kernel; nothing for a REST ask).
EmitLine = Callable[[dict[str, object]], None]


class Upstream(Protocol):
    """Where every model is reached when this server holds no key (the Hub's service)."""

    def model(self, model_id: str) -> AsyncChatModel:
        """Return the model `model_id` as the upstream serves it."""
        ...

    def secrets(self) -> list[str]:
        """Return the credentials the upstream is called with, for REST asks to redact."""
        ...


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
    #: What each model's calls cost, for the money budget (c.JupyterCI.prices).
    prices: PriceTable = field(default_factory=PriceTable)
    #: One adapter per (provider, base URL, key): turns for other models use it renamed.
    _adapters: dict[tuple[str, str, str, UrlSetting], Renamable] = field(default_factory=dict)
    #: Who judges and charges turns (the Hub's service: each user's policy); None: the
    #: broker's budgets (`ServerMeter`).
    custom_meter: Meter | None = None
    #: Where turns go instead of a provider (a user's server under JupyterHub); None: the
    #: providers, with the broker's keys.
    upstream: Upstream | None = None
    #: Turns streaming now (a server with one is active, whatever its kernels say).
    in_flight: int = 0

    @property
    def meter(self) -> Meter:
        """Return who judges and charges turns (the server's budgets unless one was given)."""
        if self.custom_meter is None:
            self.custom_meter = ServerMeter(self.broker.budget)
        return self.custom_meter

    async def model(self, model_id: str, holder: str | None = None) -> AsyncChatModel:
        """Return the adapter of `model_id` with the key the server holds now.

        Refuses what the meter refuses `holder` (None: any caller), such as a model without
        a price while a money budget is set: its calls could not be counted against it.
        """
        spec, name = parse_model_id(model_id)
        if spec.in_process:
            raise ModelConfigError(f"{model_id} runs in the kernel, not in the server.",
                                   "Use it with %%ask outside a server, or pick a provider.")
        self.meter.admit(holder, f"{spec.name}:{name}", self.prices.rates(f"{spec.name}:{name}"))
        if self.upstream is not None:
            return self.upstream.model(f"{spec.name}:{name}")
        return await self._adapter(spec, name)

    async def _adapter(self, spec: ProviderSpec, name: str) -> AsyncChatModel:
        """Return the provider's adapter (built once per key and URL) for the model `name`."""
        provider = self._provider(spec, name)
        key = (spec.name, provider.base_url, provider.api_key, provider.url_setting)
        found = self._adapters.get(key)
        if found is None:
            endpoint = Endpoint(provider.api_key or PLACEHOLDER_KEY, provider.base_url,
                                self.timeout, self.retries, url_setting=provider.url_setting)
            adapter = adapter_factory(spec)(spec, name, endpoint)
            # The SDK's import, first validators (~0.5 s) and client happen off the loop.
            await asyncio.to_thread(_ready, adapter)
            if not isinstance(adapter, Renamable):
                return cast(AsyncChatModel, adapter)  # bound to its model: not kept
            found = self._adapters.setdefault(key, adapter)
        return found.named(name)

    def _provider(self, spec: ProviderSpec, model: str) -> Provider:
        """Return the provider as the broker holds it, or say what to configure."""
        try:
            return self.broker.provider(spec.name)
        except BrokerError as err:
            held = self.broker.providers.get(spec.name)
            # No key and no URL for a local model's name: the URL was forgotten, not a key.
            local = "" if held is None or held.explicit_url else spec.local_model_hint(
                model, held.url_setting.how)
            raise ModelConfigError(err.message, f"{local} {PANEL_HINT}".strip()) from None

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
                except Exception as err:  # an ask that needs it will say what is wrong
                    self.warn(f"could not prepare {model_id}: {type(err).__name__}: {err}")
        freeze_heap()

    async def turn(self, holder: str, turn: Turn, emit: EmitLine) -> ModelReply:
        """Stream one turn for `holder` (a kernel, a session's ask); return it with its cost."""
        model_id = canonical_model_id(turn.model)  # priced, budgeted and called as one
        model, rates = await self.model(model_id, holder), self.prices.rates(model_id)
        tokens = reserve_for(turn.request)
        reservation = self.meter.reserve(holder, model_id, tokens,
                                         _cost(rates, tokens, turn.request.max_tokens))
        usage = Usage()
        spent: ModelReply | None = None  # what is charged; None: the whole reservation
        self.in_flight += 1
        try:
            reply = await model.acomplete(_streaming(turn.request, emit),
                                          lambda text: emit({"text": text}), usage)
            reported = usage.reported or reply.input_tokens + reply.output_tokens
            spent = reply if reported else _guessed(turn.request, reply)
            if rates is None or (self.upstream is not None and reply.cost_usd is not None):
                return reply  # unpriced, or priced by the upstream that charged it
            return replace(reply, cost_usd=rates.cost(spent))
        except asyncio.CancelledError:
            # Hung up: the provider bills what it streamed; with no report, the reservation.
            spent = _reported(usage) if usage.reported else None
            raise
        except AskError as err:
            spent = _reported(usage)  # a refused request costs nothing; a cut stream what it said
            self._note(model_id, err)
            raise
        except Exception as err:
            # Below the SDK (a stream cut mid-event, a reply nested past the parser's depth):
            # told by its class only, as its text may quote the provider's URL or headers.
            spent = _reported(usage)
            self.warn(f"{model_id!r}: the provider's reply failed ({type(err).__name__})")
            raise ModelUnavailable(
                f"{model_id}'s reply failed while it streamed ({type(err).__name__}).",
                "Try again; if it keeps failing, try another model.") from None
        finally:
            self.in_flight -= 1
            self._settle(reservation, spent, rates)

    def _note(self, model_id: str, error: AskError) -> None:
        """Log a reply that was not the provider's wire format: the operator's to fix (a base
        URL that points at a web page, a proxy in the way); the message is already redacted."""
        if isinstance(error, BadModelReply):
            self.warn(f"{model_id!r}: {error.message}")

    def _settle(self, reservation: Reservation, spent: ModelReply | None,
                rates: Rates | None) -> None:
        """Charge what a turn used (None: its reservation), in tokens and in USD."""
        usd = rates.cost(spent) if rates is not None and spent is not None else 0.0
        self.meter.settle(reservation, spent, usd)

    def warn(self, message: str) -> None:
        """Log a problem that does not end a turn."""
        if self.log is not None:
            self.log.warning("jupyter-ci: %s", message)

    def open_budget(self, holder: str) -> None:
        """Start counting the tokens of `holder` (a session's asks; kernels open at start)."""
        self.meter.open(holder)

    def close_budget(self, holder: str) -> None:
        """Forget `holder`'s budget (its session is gone)."""
        self.meter.close(holder)

    def held_keys(self) -> list[str]:
        """Return the provider keys the server holds, for a REST ask to redact."""
        held = [p.api_key for p in self.broker.providers.values() if p.api_key]
        return held + (self.upstream.secrets() if self.upstream is not None else [])

    def forget(self) -> None:
        """Drop adapters built with keys that were replaced (the panel's keys form)."""
        held = {(p.base_url, p.api_key, p.url_setting) for p in self.broker.providers.values()}
        for key in [k for k in self._adapters if k[1:] not in held]:
            del self._adapters[key]


def freeze_heap() -> None:
    """Tune the garbage collector for streaming: freeze the startup heap, collect less often.

    Under 200 streaming turns the collector held the loop for up to 0.4-1 s at a time: each
    full collection walked the whole server (Jupyter, its extensions, the SDKs and their
    pydantic schemas), so what the server holds once started is frozen out of them (still
    freed when its last reference goes; only cycles among it are never collected). And
    most young collections were set off by a turn's passing bursts of allocations (700
    objects, CPython's default, is one chunk's parse or one request's build), not by
    garbage: a threshold of `GC_THRESHOLD` leaves those out. Once a process, and the
    threshold only when nobody changed it from the default.
    """
    if not _FROZEN:
        _FROZEN.append(True)
        gc.collect()  # what startup left as garbage is freed, not frozen
        gc.freeze()
        young, *older = gc.get_threshold()
        if young == 700:
            gc.set_threshold(GC_THRESHOLD, *older)


#: Net new objects that set off a young collection in the server (CPython's default: 700).
GC_THRESHOLD = 7000
_FROZEN: list[bool] = []


def _ready(adapter: object) -> None:
    """Import the adapter's SDK, rehearse a turn offline and build its async clients."""
    if isinstance(adapter, Preparable):
        adapter.prepare()
    build = getattr(adapter, "async_clients", None)
    if build is not None:
        build()


def reserve_for(request: ModelRequest) -> int:
    """Bound what a turn may cost: a token per byte of its text (no byte-level tokenizer
    makes more), a fixed count per image (providers scale images down and bill by pixels),
    the tools' schemas and some framing per message, plus its reply limit."""
    tools = sum(len(json.dumps(t.parameters)) + len(t.description) for t in request.tools)
    images = sum(len(m.result.images) for m in request.messages if m.result is not None)
    return (_size(request) + tools + FRAMING_TOKENS * (len(request.messages) + 1)
            + IMAGE_TOKENS * images + request.max_tokens)


def _guessed(request: ModelRequest, reply: ModelReply) -> ModelReply:
    """Guess what went each way for a server that reports no usage."""
    sent = _size(request) // BYTES_PER_TOKEN
    total = (_size(request) + _reply_size(reply)) // BYTES_PER_TOKEN
    return ModelReply(input_tokens=sent, output_tokens=total - sent)


def _cost(rates: Rates | None, tokens: int, reply_tokens: int) -> float:
    """Price a reservation: its reply limit as output, the rest as uncached input."""
    if rates is None:
        return 0.0
    return rates.cost(ModelReply(input_tokens=max(tokens - reply_tokens, 0),
                                 output_tokens=reply_tokens))


def _reported(usage: Usage) -> ModelReply:
    """Return what a provider reported so far as a reply's usage."""
    return ModelReply(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                      cached_tokens=usage.cached_tokens)


def _size(request: ModelRequest) -> int:
    """Count the UTF-8 bytes of a request's text (system, messages, tool calls)."""
    text = request.system + "".join(
        m.content + "".join(c.name + c.arguments for c in m.tool_calls)
        for m in request.messages)
    return len(text.encode("utf-8", "surrogatepass"))


def _reply_size(reply: ModelReply) -> int:
    """Count the UTF-8 bytes of a reply's text and tool calls."""
    text = reply.text + "".join(c.name + c.arguments for c in reply.tool_calls)
    return len(text.encode("utf-8", "surrogatepass"))


def _streaming(request: ModelRequest, emit: EmitLine) -> ModelRequest:
    """Return `request` with its tool input streamed to `emit` as changes of the arguments."""
    sent, also = [""], request.on_tool_input

    def on_tool_input(name: str, raw: str) -> None:
        if also is not None:
            also(name, raw)  # the driver's own preview (a REST ask in this process)
        emit(tool_input_event(name, sent[0], raw))
        sent[0] = raw

    return replace(request, on_tool_input=on_tool_input)
