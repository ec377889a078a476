"""The channels of a gateway kernel's client, read on the server's event loop.

jupyter_server's `GatewayKernelClient` reads its kernel's websocket (websocket-client) in a
thread, and its channel queues make their asyncio readers poll with `asyncio.sleep(0)`: the
server's event loop spins at a full core while a run waits, and the reading thread must win
the GIL from it (5 ms switch interval) to hand each message over. Here the websocket is
tornado's, read by a task on the loop, and each queue wakes its reader when a message comes.
Each message is also acknowledged at once (server/nodelay.py): the gateway's side holds its
next message back until then, 40 ms per execute otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterable
from queue import Empty
from typing import Any

from jupyter_server.gateway.managers import ChannelQueue, HBChannelQueue
from tornado.httpclient import HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

from jupyter_ci.server.nodelay import quick_ack

#: The largest kernel message taken (tornado's default, 10 MiB, would close the websocket on
#: a big output: a plot, a long print; websocket-client, upstream's, has no limit).
MAX_MESSAGE_BYTES = 2**31


class LoopWebSocket:
    """A kernel's websocket to the gateway, as the channel queues use it (`send`, `close`)."""

    def __init__(self, ws: WebSocketClientConnection) -> None:
        self.ws = ws

    def send(self, message: str) -> None:
        """Send one message (on the event loop's thread, as every caller is)."""
        self.ws.write_message(message)

    def close(self) -> None:
        """Close the websocket; its reader ends."""
        self.ws.close()

    def socket(self) -> Any:
        """Return the TCP socket under the websocket (None once closed)."""
        return getattr(getattr(self.ws.protocol, "stream", None), "socket", None)


async def connect(request: HTTPRequest) -> LoopWebSocket:
    """Open a kernel's websocket on the gateway, messages sent without Nagle's wait."""
    ws = await websocket_connect(request, max_message_size=MAX_MESSAGE_BYTES)
    stream = getattr(ws.protocol, "stream", None)
    if stream is not None:
        stream.set_nodelay(True)
    return LoopWebSocket(ws)


class WakingChannelQueue(ChannelQueue):
    """A gateway channel's queue whose asyncio readers sleep until a message is put in it."""

    def __init__(self, channel_name: str, channel_socket: Any, log: Any,
                 loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(channel_name, channel_socket, log)
        self._loop = loop
        self._arrived = asyncio.Event()

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        """Queue a message and wake the reader."""
        super().put(item, block, timeout)
        self.wake()

    def wake(self) -> None:
        """Wake a reader waiting on the event loop (from any thread)."""
        try:
            here = asyncio.get_running_loop() is self._loop
        except RuntimeError:  # another thread
            here = False
        if here:
            self._arrived.set()
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: no reader is left
            self._loop.call_soon_threadsafe(self._arrived.set)

    async def _async_get(self, timeout: float | None = None) -> Any:
        """Return the next message; raise `queue.Empty` after `timeout` seconds."""
        if timeout is not None and timeout < 0:
            raise ValueError("'timeout' must be a non-negative number")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._arrived.clear()  # before looking, so a message put after is not missed
            with contextlib.suppress(Empty):
                return self.get(block=False)
            if self.response_router_finished:
                raise RuntimeError("Response router had finished")
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise Empty
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), left)


class WakingHBChannelQueue(WakingChannelQueue, HBChannelQueue):
    """The heartbeat channel's waking queue."""


def waking_queues(channel_socket: Any, log: Any, loop: asyncio.AbstractEventLoop
                  ) -> dict[str, WakingChannelQueue]:
    """Return a waking queue for each of a kernel's five channels."""
    return {name: (WakingHBChannelQueue if name == "hb" else WakingChannelQueue)(
        name, channel_socket, log, loop) for name in ("shell", "iopub", "stdin", "hb", "control")}


def finish(queues: Iterable[ChannelQueue]) -> None:
    """Tell the queues' readers that no more messages come."""
    for queue in queues:
        queue.response_router_finished = True
        if isinstance(queue, WakingChannelQueue):
            queue.wake()


async def route(socket: LoopWebSocket, queues: dict[str, WakingChannelQueue], log: Any,
                ended: Callable[[], None]) -> None:
    """Put each message of the websocket into its channel's queue until the websocket ends."""
    try:
        while (raw := await socket.ws.read_message()) is not None:
            quick_ack(socket.socket())
            message = json.loads(raw)
            queue = queues.get(message.get("channel"))
            if queue is not None:
                queue.put_nowait(message)
    except Exception as exc:  # a message that is not a kernel message's JSON: the end
        log.warning("jupyter-ci: a gateway kernel's websocket failed (%s: %s)",
                    type(exc).__name__, exc)
    finally:
        finish(queues.values())
        ended()
