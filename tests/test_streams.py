"""The server's one stream writer (server/streams.py) on a real tornado server.

What REST runs and the model service rely on: events taken in one turn of the loop go out
in one write (consecutive text as one JSON line), and a peer that hangs up stops the
writing and is told to the owner once.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from tornado import httpclient, web
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from jupyter_ci.server.streams import JsonLines, ServerSentEvent, ServerSentEvents, StreamWriter

DELTAS = 200


class Counting(web.RequestHandler):
    """A handler that counts its flushes (each is a write to the socket)."""

    flushes = 0

    def flush(self, include_footers: bool = False) -> Any:
        """Count, then flush as tornado does."""
        type(self).flushes += 1
        return super().flush(include_footers)


class Burst(Counting):
    """Streams a burst of text deltas, a tool input change, then the reply."""

    async def get(self) -> None:
        """Send DELTAS deltas in one turn of the loop, then two more events."""
        writer = StreamWriter[dict[str, Any]](self, JsonLines())
        for index in range(DELTAS):
            writer.send({"text": f"{index} "})
        await asyncio.sleep(0.05)  # the burst went out meanwhile
        writer.send({"tool_input": {"name": "run_python", "at": 0, "text": "x"}})
        writer.end({"reply": {"text": "done"}})


class Ticks(web.RequestHandler):
    """Sends a server-sent event every 10 ms until its client hangs up."""

    lost: ClassVar[list[str]] = []
    #: Writes made once the writer knew its client was gone.
    late: ClassVar[list[bytes]] = []
    done: ClassVar[asyncio.Event]

    def write(self, chunk: Any) -> None:
        """Note a write after the hang-up, then write as tornado does."""
        if self.writer.lost:
            self.late.append(chunk)
        super().write(chunk)

    async def get(self) -> None:
        """Tick until the writer says the client is gone (or a hang guard)."""
        self.writer = StreamWriter[ServerSentEvent](self, ServerSentEvents(),
                                                    on_lost=lambda: self.lost.append("lost"))
        self.writer.start()
        for index in range(1000):  # 10 s at most: a hang guard, not a time bound
            self.writer.send(ServerSentEvent("tick", {"index": index}))
            await asyncio.sleep(0.01)
            if self.writer.lost:
                break
        self.writer.send(ServerSentEvent("after", {}))  # nothing is written any more
        self.writer.hang_up()  # as a flush failing late would: the owner heard already
        self.writer.end(ServerSentEvent("result", {}))
        type(self).done.set()

    def on_connection_close(self) -> None:
        """Tell the writer, as the REST and model service handlers do (its own failed
        flushes tell it too: the owner hears of it once either way)."""
        super().on_connection_close()
        self.writer.hang_up()


def serve(handlers: list[tuple[str, type[web.RequestHandler]]],
          body: Callable[[int], Awaitable[None]]) -> None:
    """Run `body(port)` against a tornado app of `handlers` on a free local port."""

    async def main() -> None:
        sockets = bind_sockets(0, "127.0.0.1")
        server = HTTPServer(web.Application(handlers))
        server.add_sockets(sockets)
        try:
            await body(sockets[0].getsockname()[1])
        finally:
            server.stop()

    asyncio.run(main())


def test_a_burst_of_text_goes_out_as_one_write_and_one_line() -> None:
    chunks: list[bytes] = []

    async def body(port: int) -> None:
        client = httpclient.AsyncHTTPClient()
        await client.fetch(f"http://127.0.0.1:{port}/", streaming_callback=chunks.append)

    Burst.flushes = 0
    serve([("/", Burst)], body)
    lines = [json.loads(line) for line in b"".join(chunks).splitlines()]
    assert lines == [{"text": "".join(f"{i} " for i in range(DELTAS))},
                     {"tool_input": {"name": "run_python", "at": 0, "text": "x"}},
                     {"reply": {"text": "done"}}]
    # The burst, then the last two events with the end: not a write per delta.
    assert Burst.flushes <= 3, Burst.flushes


def test_a_client_that_hangs_up_is_told_once_and_nothing_more_is_written() -> None:
    async def body(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        seen = b""
        while b"event: tick" not in seen:
            seen += await asyncio.wait_for(reader.read(4096), 30)
        writer.transport.get_extra_info("socket").setsockopt(
            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset, at once
        writer.close()
        await asyncio.wait_for(Ticks.done.wait(), 30)

    Ticks.lost, Ticks.late, Ticks.done = [], [], asyncio.Event()
    serve([("/", Ticks)], body)
    assert Ticks.lost == ["lost"]
    assert Ticks.late == []
