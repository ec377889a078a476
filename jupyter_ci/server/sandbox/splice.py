"""Copying bytes between two stream connections, for the egress proxy and the box's forwarders.

The host's proxy (proxy.py) and the forwarders in boxes (forward.py, zmq_forward.py) splice
connections with these; kept apart from forward.py so that a box's start does not wait on
asyncio's import (the forwarder's child imports this after the fork).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
from collections.abc import Sequence

#: Bytes read at a time when splicing.
CHUNK = 64 << 10
#: What a program in the box reads when the proxy is gone (the server stopped).
_GONE_TEXT = b"jupyter-ci: the sandbox's egress proxy is not running.\n"
GONE = (b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(_GONE_TEXT), _GONE_TEXT))
_PR_SET_PDEATHSIG = 1


async def splice(one: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                 other: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                 idle: float | None = None) -> None:
    """Copy bytes both ways until both ways are done, then close both sides.

    A way that fails (its peer gone) ends both. A clean end is a half-close: the other way
    may still carry the answer, but not stay idle for more than `idle` seconds, since a
    peer that never closes would otherwise hold the connection for ever.
    """
    moved = [0]
    ways = [asyncio.ensure_future(_pipe(one[0], other[1], moved)),
            asyncio.ensure_future(_pipe(other[0], one[1], moved))]
    try:
        done, pending = await asyncio.wait(ways, return_when=asyncio.FIRST_COMPLETED)
        while pending and all(task.result() for task in done):
            seen = moved[0]
            done, pending = await asyncio.wait(pending, timeout=idle)
            if moved[0] == seen:
                break
    finally:
        await _end(ways)
        for writer in (one[1], other[1]):
            writer.close()
        for writer in (one[1], other[1]):
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await writer.wait_closed()


async def _end(ways: Sequence[asyncio.Future[bool]]) -> None:
    """Cancel the ways still running and wait for them."""
    for task in ways:
        task.cancel()
    await asyncio.gather(*ways, return_exceptions=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                moved: list[int]) -> bool:
    """Copy `reader` to `writer`, counting bytes, and pass its end on; say if it ended well."""
    try:
        while data := await reader.read(CHUNK):
            moved[0] += len(data)
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        return False
    return True


async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes,
                 linger: float = 5.0) -> None:
    """Send a last answer and close, reading what the client still sends meanwhile.

    Closing with unread bytes (a request not read, or its body) would reset the connection,
    and the client could lose the answer; so wait for its end, `linger` seconds at most.
    """
    with contextlib.suppress(OSError, asyncio.TimeoutError):
        writer.write(data)
        writer.write_eof()
        await asyncio.wait_for(_drop(reader), linger)
    writer.close()


async def _drop(reader: asyncio.StreamReader) -> None:
    """Read and drop what the client sends, to its end."""
    while await reader.read(CHUNK):
        pass


async def _forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   path: str) -> None:
    """Splice one connection of the box's loopback to the proxy's socket."""
    try:
        upstream = await asyncio.open_unix_connection(path)
    except OSError:
        await answer(reader, writer, GONE)
        return
    await splice((reader, writer), upstream)


async def _serve(listener: socket.socket, path: str) -> None:
    """Accept connections on `listener` for ever."""
    server = await asyncio.start_server(lambda r, w: _forward(r, w, path), sock=listener)
    async with server:
        await server.serve_forever()


def serve(listener: socket.socket, path: str) -> None:
    """Splice each connection of `listener` to the proxy's socket at `path`, for ever."""
    asyncio.run(_serve(listener, path))


def die_with(parent: int) -> None:
    """End with the kernel even outside a PID namespace (Linux's parent-death signal)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(0)  # the parent ended before the signal was asked for


