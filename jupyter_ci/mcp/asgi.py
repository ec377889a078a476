"""A tornado handler that serves an ASGI app: the bridge from Jupyter Server to the MCP SDK.

Jupyter Server is tornado; the SDK's Streamable HTTP transport is ASGI. The handler builds the
ASGI scope from the tornado request, hands the (already read) body to `receive`, then reports
`http.disconnect` once the client hangs up, and streams each `http.response.body` back with a
flush, so server-sent events reach the client as they are sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from jupyter_server.base.handlers import APIHandler
from tornado import httputil

from jupyter_ci.mcp.framing import Framer, accepts_json, request_id

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
#: Bytes written and not yet sent past which a stream's chunk is sent at once.
FLUSH_BYTES = 1 << 16
#: Seconds a stream's chunk may wait for the next (the stream's end) to go in one write.
COALESCE_S = 0.0

#: The scope's key holding the tornado handler of the request (its user, its authorizer).
HANDLER = "jupyter_ci.handler"


def asgi_scope(request: httputil.HTTPServerRequest, root_path: str = "") -> Scope:
    """Build the ASGI HTTP scope of a tornado request."""
    host, _, port = (request.host or "localhost").rpartition(":")
    server = (host, int(port)) if host and port.isdigit() else (request.host, None)
    client_ip = request.remote_ip or "127.0.0.1"
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": request.version.removeprefix("HTTP/") or "1.1",
        "method": request.method,
        "scheme": request.protocol,
        "path": request.path,
        "raw_path": request.path.encode(),
        "query_string": request.query.encode(),
        "root_path": root_path,
        "headers": [(name.lower().encode("latin-1"), value.encode("latin-1"))
                    for name, value in request.headers.get_all()],
        "client": (client_ip, 0),
        "server": server,
    }


class ASGIHandler(APIHandler):
    """Serve one request with an ASGI app (subclasses add Jupyter's auth to each method)."""

    app: ASGIApp
    _disconnected: asyncio.Event | None = None
    _started = False
    _flushing: asyncio.TimerHandle | None = None
    #: Whether a POST's event stream that holds only its response goes as JSON (framing.py).
    json_replies = False
    _framer: Framer | None = None
    _held: Message | None = None

    def asgi_extra(self) -> dict[str, Any]:
        """Return what this request's scope adds to the request's own (nothing here)."""
        return {}

    async def serve(self) -> None:
        """Run the app on this request, streaming its response."""
        self._disconnected = asyncio.Event()
        body_sent = False

        async def receive() -> Message:
            nonlocal body_sent
            if not body_sent:
                body_sent = True
                return {"type": "http.request", "body": self.request.body or b"",
                        "more_body": False}
            assert self._disconnected is not None
            await self._disconnected.wait()
            return {"type": "http.disconnect"}

        scope = {**asgi_scope(self.request), **self.asgi_extra()}
        scope[HANDLER] = self  # in process, the app authorizes each call with it
        self._framer = self._framing()
        await self.app(scope, receive, self._send)
        if self._held is not None and self._framer is not None:  # it stopped mid-stream
            self._start(self._held)
            self._held = None
            self.write(bytes(self._framer.buffered))
        if not self._finished:
            self.finish(set_content_type=self._headers.get("Content-Type", "text/plain"))

    def _framing(self) -> Framer | None:
        """Return the framer of this request's answer, if it may come as JSON."""
        if not self.json_replies or self.request.method != "POST" or \
                not accepts_json(self.request.headers.get("Accept", "")):
            return None
        ident = request_id(self.request.body)
        return None if ident is None else Framer(ident)

    async def _send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            if self._framer is not None and message["status"] == 200 and \
                    _content_type(message) == "text/event-stream":
                self._held = message  # sent with the first event that is not the answer
                return
            self._start(message)
        elif message["type"] == "http.response.body":
            await self._body(message)

    def _start(self, message: Message, content_type: str | None = None) -> None:
        self._started = True
        self.set_status(int(message["status"]))
        self.clear_header("Content-Type")
        for name, value in message.get("headers", []):
            key, text = bytes(name).decode("latin-1"), bytes(value).decode("latin-1")
            if key.lower() == "content-length":
                continue  # tornado sets it (or chunks) itself
            if content_type is not None and key.lower() == "content-type":
                text = content_type
            self.add_header(key, text)

    async def _body(self, message: Message) -> None:
        if self._finished or self.request.connection is None:
            return
        if self._held is not None and not self._release(message):
            return
        chunk = bytes(message.get("body", b""))
        if chunk:
            self.write(chunk)
        if message.get("more_body", False):
            # Sent at the loop's next turn, not now: a reply's event and the stream's end,
            # which follows it at once, go as one write (one wake-up of the client), and a
            # large stream still waits for its client (flushed now past FLUSH_BYTES).
            if sum(map(len, self._write_buffer)) > FLUSH_BYTES:
                await self._flush()
            elif self._flushing is None:
                self._flushing = asyncio.get_running_loop().call_later(
                    COALESCE_S, lambda: asyncio.ensure_future(self._flush()))
            return
        self._cancel_flush()
        self.finish(set_content_type=self._headers.get("Content-Type", "text/plain"))

    def _release(self, message: Message) -> bool:
        """Hold a stream back while it may be a lone answer; tell whether to send it on."""
        assert self._framer is not None and self._held is not None
        more = message.get("more_body", False)
        if self._framer.feed(bytes(message.get("body", b""))) and more:
            return False
        start, self._held = self._held, None
        answer = None if more else self._framer.reply()
        if answer is not None:  # the whole stream was the answer: one JSON body
            self._start(start, "application/json")
            self.finish(answer)
            return False
        self._start(start)
        message["body"] = bytes(self._framer.buffered)  # from the stream's start
        return True

    async def _flush(self) -> None:
        self._cancel_flush()
        if self._finished or self.request.connection is None:
            return
        try:
            await self.flush()
        except Exception:  # the client hung up: on_connection_close tells the app
            self._hung_up()

    def _cancel_flush(self) -> None:
        if self._flushing is not None:
            self._flushing.cancel()
            self._flushing = None

    def on_connection_close(self) -> None:
        """Tell the app the client went away (it ends the stream it serves)."""
        super().on_connection_close()
        self._hung_up()

    def on_finish(self) -> None:
        """A finished response has no client left to wait for."""
        self._hung_up()

    def _hung_up(self) -> None:
        if self._disconnected is not None:
            self._disconnected.set()


def _content_type(message: Message) -> str:
    """Return the media type an ASGI response start names (lower case, no parameters)."""
    for name, value in message.get("headers", []):
        if bytes(name).lower() == b"content-type":
            return bytes(value).decode("latin-1").split(";")[0].strip().lower()
    return ""
