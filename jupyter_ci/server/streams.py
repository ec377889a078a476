"""One writer for the server's event streams, in two encodings.

REST runs and asks stream server-sent events (`text/event-stream`); the model service
streams a turn's reply to a kernel as JSON lines (`application/x-ndjson`). Both take events
as they come from code that must not wait for the client, so the writer owns what they
share: the framing (an encoding), coalescing (events taken in one turn of the loop go out
in one write and one flush: a write per text delta would cost the loop more than reading
it from the provider), keep-alives while a stream is quiet, and the peer hanging up (the
writer stops writing and tells its owner once, so the work done for it can stop).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from tornado import web
from tornado.iostream import StreamClosedError

from jupyter_ci.models.turn_wire import NDJSON, line

E = TypeVar("E")
E_in = TypeVar("E_in", contravariant=True)


class Encoding(Protocol[E_in]):
    """How events become bytes on one stream: what is pending since the last write."""

    content_type: str
    #: Headers of the response besides its content type.
    headers: tuple[tuple[str, str], ...]
    #: Sent after a quiet while, if the format has comments (b"": never).
    keepalive: bytes

    def add(self, event: E_in) -> None:
        """Take one event."""

    def drain(self) -> bytes:
        """Return what was taken since the last drain."""


class ServerSentEvent(NamedTuple):
    """One server-sent event: its name and its data (sent as JSON)."""

    name: str
    data: Any


class ServerSentEvents:
    """Server-sent events, each `event: <name>` with its data as one JSON line."""

    content_type = "text/event-stream"
    # No proxy (nginx) or cache holds events back.
    headers: tuple[tuple[str, str], ...] = (("Cache-Control", "no-cache"),
                                            ("X-Accel-Buffering", "no"))
    keepalive = b": keep-alive\n\n"

    def __init__(self) -> None:
        self._frames: list[bytes] = []

    def add(self, event: ServerSentEvent) -> None:
        """Take one event."""
        self._frames.append(f"event: {event.name}\ndata: {json.dumps(event.data)}\n\n".encode())

    def drain(self) -> bytes:
        """Return the events taken since the last drain."""
        data = b"".join(self._frames)
        self._frames.clear()
        return data


class JsonLines:
    """JSON lines of the model service's reply stream, consecutive text merged into one.

    Each write carries what arrived since the last, and the text that arrived meanwhile
    as one event (a reader cannot tell the difference). Tool input keeps a line per change,
    as the provider streamed it.
    """

    content_type = NDJSON
    headers: tuple[tuple[str, str], ...] = (("Cache-Control", "no-store"),)
    keepalive = b""

    def __init__(self) -> None:
        self._lines: list[bytes] = []
        self._text: list[str] = []

    def add(self, event: Mapping[str, Any]) -> None:
        """Take one event of the reply stream."""
        if isinstance(text := event.get("text"), str) and len(event) == 1:
            self._text.append(text)
            return
        self._close_text()
        self._lines.append(line(event))

    def drain(self) -> bytes:
        """Return the lines of every event taken since the last drain."""
        self._close_text()
        data = b"".join(self._lines)
        self._lines.clear()
        return data

    def _close_text(self) -> None:
        if self._text:
            self._lines.append(line({"text": "".join(self._text)}))
            self._text.clear()


def _nothing() -> None:
    """Do nothing (an owner that needs no word of a hang-up)."""


class StreamWriter(Generic[E]):
    """One response's events, written as they come and sent at the loop's next turn."""

    def __init__(self, handler: web.RequestHandler, encoding: Encoding[E], *,
                 on_lost: Callable[[], None] = _nothing, keepalive: float = 0.0,
                 nodelay: bool = False, finish: Callable[[], object] | None = None) -> None:
        """Write on `handler`; `on_lost` runs once if its peer hangs up; a keep-alive goes
        out after `keepalive` seconds of quiet (0: none); `finish` ends the response."""
        self.handler, self.encoding, self.on_lost = handler, encoding, on_lost
        self.keepalive, self.nodelay = keepalive, nodelay
        self.finish: Callable[[], object] = finish or handler.finish
        #: Whether the headers are set (the first event came, or `start` was called).
        self.started = False
        #: Whether the peer hung up (nothing is written any more).
        self.lost = False
        self._ended = False
        self._scheduled = False
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Set the response's headers (sent with the first write), once."""
        if self.started:
            return
        self.started = True
        self.handler.set_header("Content-Type", self.encoding.content_type)
        for name, value in self.encoding.headers:
            self.handler.set_header(name, value)
        stream = getattr(self.handler.request.connection, "stream", None)
        if self.nodelay and stream is not None:
            # Else (Nagle) an event written before the last one's ACK waits for a delayed ACK.
            stream.set_nodelay(True)
        if self.keepalive > 0 and self.encoding.keepalive:
            self._last = asyncio.get_running_loop().time()
            self._arm(self.keepalive)

    def send(self, event: E) -> None:
        """Take one event; send it, with any others taken meanwhile, at the loop's next turn."""
        if self.lost or self._ended:
            return
        self.start()
        self.encoding.add(event)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._write)

    def end(self, last: E | None = None) -> None:
        """Send what is pending (and `last`) with the end of the response (one write)."""
        if last is not None and not self.lost:
            self.start()
            self.encoding.add(last)
        self._ended = True
        self._disarm()
        if self._open():  # else tornado ends the request of a closed connection
            self.handler.write(self.encoding.drain())
            self.finish()

    def hang_up(self) -> None:
        """Stop writing for a peer that hung up; tell the owner (once)."""
        if self.lost:
            return
        self.lost = True
        self._disarm()
        self.on_lost()

    def _open(self) -> bool:
        """Say whether the response can still be written to."""
        return not self.lost and self.handler.request.connection is not None \
            and not self.handler._finished

    def _write(self) -> None:
        """Write and flush what was taken since the last write."""
        self._scheduled = False
        if not self._ended:  # else end() wrote the rest
            self._put(self.encoding.drain())

    def _put(self, data: bytes) -> None:
        if self._open():
            self._last = asyncio.get_running_loop().time()
            self.handler.write(data)
            self.handler.flush().add_done_callback(self._flushed)

    def _flushed(self, future: asyncio.Future[None]) -> None:
        """A write that failed means the peer is gone: stop what runs for it."""
        if not future.cancelled() and isinstance(future.exception(), StreamClosedError):
            self.hang_up()

    def _arm(self, delay: float) -> None:
        self._timer = asyncio.get_running_loop().call_later(delay, self._keep_alive)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _keep_alive(self) -> None:
        """Send a keep-alive if nothing went out for `keepalive` seconds, so that proxies and
        clients' read timeouts do not cut a long quiet stream."""
        if self._ended or not self._open():
            return
        quiet = asyncio.get_running_loop().time() - self._last
        if quiet >= self.keepalive and not self._scheduled:
            self._put(self.encoding.keepalive)
            quiet = 0.0
        self._arm(max(self.keepalive - quiet, 0.0))
