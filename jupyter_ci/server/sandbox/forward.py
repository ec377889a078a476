"""What runs first in a box whose network is an allowlist: a loopback port to the egress proxy.

    python -m jupyter_ci.server.sandbox.forward --socket /run/jupyter-ci/proxy.sock \\
        --port 3128 -- <kernel argv...>

The box has only its own loopback, and programs find a proxy by `HTTP(S)_PROXY`, a TCP
address. So this binds 127.0.0.1:<port> in the box, forks one child that splices each
connection to the proxy's Unix socket (bound into the box), and becomes the kernel with
`execvp`: the kernel keeps the process id bubblewrap started, so interrupts still find it,
and the forwarder, below it, dies with the box (its PID namespace ends with the kernel).
The child is one process with one thread: it spends almost nothing of the box's limits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import os
import signal
import socket
from collections.abc import Sequence
from typing import NoReturn

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


def _child(listener: socket.socket, path: str, parent: int) -> NoReturn:
    """Serve the forwarder in the forked child; never return to the kernel's code."""
    try:
        # Out of the kernel's process group, and deaf to ^C: a kernel that signals its group
        # (ipykernel interrupts it when it leads one, and ends it at shutdown) means the
        # user's subprocesses; the forwarder lives as long as the box.
        os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        die_with(parent)
        asyncio.run(_serve(listener, path))
    finally:
        os._exit(0)


def die_with(parent: int) -> None:
    """End with the kernel even outside a PID namespace (Linux's parent-death signal)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(0)  # the parent ended before the signal was asked for


def listen(port: int) -> socket.socket:
    """Bind the box's loopback port (before the kernel starts: no request finds it closed)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    return listener


def main(argv: list[str] | None = None) -> NoReturn:
    """Start the forwarder in a child and become the command after `--`."""
    parser = argparse.ArgumentParser(prog="python -m jupyter_ci.server.sandbox.forward")
    parser.add_argument("--socket", required=True, help="the egress proxy's Unix socket")
    parser.add_argument("--port", type=int, default=3128, help="the loopback port to serve")
    parser.add_argument("command", nargs="+", help="the command to run (after --)")
    args = parser.parse_args(argv)
    listener = listen(args.port)
    kernel = os.getpid()
    if os.fork() == 0:
        _child(listener, args.socket, kernel)
    # Sockets are not inherited across exec: the kernel does not hold the port.
    os.execvp(args.command[0], args.command)


if __name__ == "__main__":
    main()
