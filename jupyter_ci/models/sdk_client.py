"""The frame the two SDK adapters share: lazy clients from an `Endpoint`, and the turn.

An adapter (openai.py, anthropic.py) subclasses `SdkChatModel` and writes only what differs:
its SDK, imported there alone and only when a turn or `prepare` needs it (importing it is
slow); its client classes; its offline rehearsal client; how one turn streams. The frame
builds the sync client (%%ask outside a server) and the async one (the server's model
service; several, each with its own connection pool) with the same endpoint settings, turns
what the SDK raises into ask errors, and folds a stream of events, each as its decoded JSON
(the SDKs' models of events cost more to build than all the rest of a turn), into a reply
with `fold` and `afold`, which refuse a reply that is not the provider's wire format
(bad_reply.py).
"""

from __future__ import annotations

import copy
import itertools
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, closing
from types import ModuleType, TracebackType
from typing import Any, Generic, Protocol, Self, TypedDict, TypeVar

from jupyter_ci.agent.errors import AskError
from jupyter_ci.agent.types import ModelReply, ModelRequest
from jupyter_ci.models.bad_reply import AsyncBody, Body, ReplyProblem, Watch, bad_reply
from jupyter_ci.models.base import Endpoint, OnText, Usage
from jupyter_ci.models.sdk_errors import ask_error
from jupyter_ci.models.transport import REHEARSAL_REQUEST
from jupyter_ci.providers import ProviderSpec


class SyncClient(Protocol):
    """What the frame uses of an SDK's sync client."""

    @property
    def base_url(self) -> object:
        """Return the URL requests go to."""
        ...

    def close(self) -> None:
        """Close the client's connections."""
        ...


class AsyncClient(Protocol):
    """What the frame uses of an SDK's async client."""

    @property
    def base_url(self) -> object:
        """Return the URL requests go to."""
        ...


C = TypeVar("C", bound=SyncClient)
A = TypeVar("A", bound=AsyncClient)
E = TypeVar("E")
E_co = TypeVar("E_co", covariant=True)
E_contra = TypeVar("E_contra", contravariant=True)


#: Async clients (connection pools) per model in a server (see `async_clients`).
ASYNC_POOLS = 8


class ClientOptions(TypedDict):
    """The settings both SDKs' clients (sync and async) take from an `Endpoint`."""

    api_key: str
    base_url: str | None
    #: Seconds per attempt.
    timeout: float
    max_retries: int


def sdk_options(endpoint: Endpoint) -> ClientOptions:
    """Return the SDK client settings `endpoint` gives, the same for sync and async clients."""
    return {"api_key": endpoint.api_key, "base_url": endpoint.base_url,
            "timeout": endpoint.timeout, "max_retries": endpoint.max_retries}


class SdkChatModel(ABC, Generic[C, A]):
    """A `provider:model` reached through its provider's SDK, sync or async."""

    def __init__(self, spec: ProviderSpec, name: str, endpoint: Endpoint) -> None:
        self.spec = spec
        self.name = name
        self.endpoint = endpoint
        self._client: C | None = None
        #: Shared with the copies `named` makes, as is the count that takes them in turn.
        self._async_clients: list[A] = []
        self._turns = itertools.count(1)

    @property
    def id(self) -> str:
        """Return the `provider:model` id."""
        return f"{self.spec.name}:{self.name}"

    @property
    def sees_images(self) -> bool:
        """Tell whether this model takes images, as its provider's table says of its name."""
        return self.spec.sees_images(self.name)

    def named(self, name: str) -> Self:
        """Return this adapter for another model of its provider: the same clients and pools.

        A server keeps one adapter per provider, key and URL, however many model names
        its callers send (each adapter holds ASYNC_POOLS connection pools).
        """
        if name == self.name:
            return self
        other = copy.copy(self)  # shallow: the clients, their list and the turn count shared
        other.name = name
        return other

    def client(self) -> C:
        """Return the SDK client, created on first use (importing the SDK is slow)."""
        if self._client is None:
            client = self._new_client(sdk_options(self.endpoint))
            # No lock: `prepare`, in another thread, may build one too; either will do.
            if self._client is None:
                self._client = client
        return self._client

    def async_client(self) -> A:
        """Return the async SDK client, created on first use; used from one event loop."""
        return self.async_clients()[0]

    def async_clients(self) -> list[A]:
        """Return the async clients, created on first use, each with its connection pool.

        httpcore walks every connection of its pool (probing idle sockets) each time a
        request starts or ends: with one pool for 200 streams that held the server's loop
        about 1 ms per turn. Turns take the clients in turn, so each pool holds a few dozen.
        """
        while len(self._async_clients) < ASYNC_POOLS:
            self._async_clients.append(self._new_async_client(sdk_options(self.endpoint)))
        return self._async_clients

    def prepare(self) -> None:
        """Import the SDK, build the client and stream one canned turn offline."""
        self.client()
        # The first turn of a process builds the SDK's pydantic validators (50-80 ms); a
        # turn through a mock transport pays that now, sending nothing.
        with closing(self._rehearsal_client()) as client:
            self._stream(client, REHEARSAL_REQUEST, lambda _: None)

    def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        """Stream one turn, calling `on_text` with text as it arrives; return the whole turn."""
        client = self.client()
        try:
            return self._stream(client, request, on_text)
        except self._sdk_error() as err:
            # from None: the SDK's own message may quote a response that echoes the key.
            raise self._error(err, client) from None
        except ReplyProblem as problem:
            raise self._bad_reply(problem, client) from None

    async def acomplete(self, request: ModelRequest, on_text: OnText,
                        usage: Usage | None = None) -> ModelReply:
        """Stream one turn without blocking the loop, as `complete` does; keep usage in `usage`.

        Cancelling the awaiting task closes the provider's stream at once.
        """
        clients = self.async_clients()
        client = clients[next(self._turns) % len(clients)]
        try:
            return await self._astream(client, request, on_text, usage)
        except self._sdk_error() as err:
            raise self._error(err, client) from None
        except ReplyProblem as problem:
            raise self._bad_reply(problem, client) from None

    def _error(self, err: Exception, client: C | A) -> AskError:
        """Return the ask error for an SDK exception of a turn sent through `client`."""
        url = str(client.base_url).rstrip("/")
        return ask_error(err, self._sdk(), self.spec, url, self.name, self.endpoint)

    def _bad_reply(self, problem: ReplyProblem, client: C | A) -> AskError:
        """Return the ask error for a reply through `client` that is not the wire format."""
        return bad_reply(problem, self.spec, str(client.base_url), self.endpoint.timeout,
                         [self.endpoint.api_key])

    @abstractmethod
    def _sdk(self) -> ModuleType:
        """Import the SDK and return it."""

    @abstractmethod
    def _sdk_error(self) -> type[Exception]:
        """Return the base class of every exception the SDK raises."""

    @abstractmethod
    def _new_client(self, options: ClientOptions) -> C:
        """Build the SDK's sync client with `sdk_options`."""

    @abstractmethod
    def _new_async_client(self, options: ClientOptions) -> A:
        """Build the SDK's async client with `sdk_options`."""

    @abstractmethod
    def _rehearsal_client(self) -> C:
        """Build a sync client that answers every request with a canned turn, offline."""

    @abstractmethod
    def _stream(self, client: C, request: ModelRequest, on_text: OnText,
                usage: Usage | None = None) -> ModelReply:
        """Stream one turn from `client`; SDK errors are the caller's to translate."""

    @abstractmethod
    async def _astream(self, client: A, request: ModelRequest, on_text: OnText,
                       usage: Usage | None) -> ModelReply:
        """The async twin of `_stream`; leaving it, even by cancellation, closes the stream."""


class Assembly(Protocol[E_contra]):
    """A turn assembled from the events of its stream (each adapter's `_Turn`)."""

    @property
    def finished(self) -> bool:
        """Tell whether the provider's end of a turn came (a stream may stop before it)."""
        ...

    @property
    def end_mark(self) -> str:
        """Name the provider's end of a turn, for the message of a stream cut before it."""
        ...

    def add(self, event: E_contra, on_text: OnText) -> None:
        """Fold one event into the turn."""
        ...

    def reply(self) -> ModelReply:
        """Return the finished turn."""
        ...


class EventStream(Protocol[E_co]):
    """An SDK's sync stream of events: iterated, and closed on leaving `with`."""

    @property
    def response(self) -> Body: ...

    def __iter__(self) -> Iterator[E_co]: ...

    def __enter__(self) -> object: ...

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None, /) -> object: ...


class AsyncEventStream(Protocol[E_co]):
    """An SDK's async stream of events: iterated, and closed on leaving `async with`."""

    @property
    def response(self) -> AsyncBody: ...

    def __aiter__(self) -> AsyncIterator[E_co]: ...

    async def __aenter__(self) -> object: ...

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None, /) -> object: ...


#: An event as the adapters fold it: its decoded JSON.
Event = Any


def fold(stream: EventStream[object], turn: Assembly[Event], on_text: OnText) -> ModelReply:
    """Fold every event of `stream` into `turn`, closing the stream; return the turn.

    Raises `ReplyProblem` for a reply that is not the provider's wire format.
    """
    watch: Watch[Any] = Watch(turn)
    with stream:
        for event in watch.events(as_json(stream), stream.response):
            watch.add(plain(event), on_text)
    return watch.reply()


async def afold(stream: AsyncEventStream[object], turn: Assembly[Event], on_text: OnText
                ) -> ModelReply:
    """The async twin of `fold`; leaving it, even by cancellation, closes the stream."""
    watch: Watch[Any] = Watch(turn)
    async with stream, aclosing(watch.aevents(aiter(as_json(stream)), stream.response)) \
            as events:
        async for event in events:
            watch.add(plain(event), on_text)
    return watch.reply()


S = TypeVar("S")


def as_json(stream: S) -> S:
    """Have an SDK stream yield each event's decoded JSON, not the SDK's model of it.

    Both SDKs build that model in pure Python (`construct_type`): ~0.2 ms an event, so 200
    replies streaming through the server at 100 events a second each would need four cores
    for it alone. Their streams skip the model for `object` (`_process_response_data`); the
    adapters read the JSON themselves, as tolerant of missing fields as before.
    """
    if hasattr(stream, "_cast_to"):
        stream._cast_to = object  # the SDKs' own attribute
    return stream


def plain(event: object) -> Event:
    """Return an event as its JSON: as is, or dumped from the model of an SDK that no longer
    skips building it (slower, but read the same)."""
    dump = getattr(event, "model_dump", None)
    return dump(mode="json", exclude_unset=True) if callable(dump) else event
