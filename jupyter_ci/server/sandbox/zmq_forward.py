"""What runs first in the box of a kernel that speaks ZMQ over TCP only (Deno's).

    python -m jupyter_ci.server.sandbox.zmq_forward --conn <private>/kernel.json \\
        --tcp <private>/kernel-tcp.json -- <kernel argv, naming kernel-tcp.json>

A box has its own network namespace (only its own loopback) and no way out of it, so the
kernel's ZMQ sockets cannot be reached over TCP from the host. The host's client connects
over ipc instead, as it does to every boxed kernel: to `<ip>-<port>` Unix sockets in the
kernel's private folder, which is bound into the box at the same path. This forwarder
binds those sockets in the box, writes the kernel a second connection file (same key,
transport tcp on the box's loopback, ports free there), forks one child that splices each
ipc connection to the kernel's TCP port (ZMTP is the same byte stream on both), and becomes
the kernel with `execvp`, so the kernel keeps the process id bubblewrap started. The child
is one process with one thread, out of the kernel's process group, and dies with the box.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

from jupyter_ci.server.sandbox.splice import die_with, splice

#: The channels of a connection file, by the key of their port.
CHANNELS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
#: Seconds a connection waits for the kernel to listen on its TCP port (it starts slowly).
KERNEL_START_S = 120.0
_RETRY_S = 0.05


def free_ports(count: int) -> list[int]:
    """Return `count` ports of the box's loopback nobody listens on (the box's own network)."""
    held = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(sock)
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in held]
    finally:
        for sock in held:
            sock.close()


def port_of(info: Mapping[str, object], key: str) -> int:
    """Return a channel's port in a connection file (a number, or its digits)."""
    port = info[key]
    if not isinstance(port, int | str):
        raise ValueError(f"the connection file's {key} is not a port: {port!r}")
    return int(port)


def tcp_connection(info: Mapping[str, object], ports: list[int]) -> dict[str, object]:
    """Return the kernel's connection info: the ipc one's key, over TCP on `ports`."""
    return {**info, "transport": "tcp", "ip": "127.0.0.1",
            **dict(zip(CHANNELS, ports, strict=True))}


def bind_ipc(info: Mapping[str, object]) -> dict[int, socket.socket]:
    """Listen on the ipc path of each channel (`<ip>-<port>`), replacing stale sockets."""
    listeners: dict[int, socket.socket] = {}
    for key in CHANNELS:
        path = f"{info['ip']}-{info[key]}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        os.chmod(path, 0o600)
        sock.listen(64)
        listeners[port_of(info, key)] = sock
    return listeners


async def _connect_kernel(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to the kernel's port, waiting for it to listen (it may still be starting)."""
    deadline = time.monotonic() + KERNEL_START_S
    while True:
        try:
            return await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(_RETRY_S)


async def _to_port(port: int, reader: asyncio.StreamReader,
                   writer: asyncio.StreamWriter) -> None:
    """Splice one ipc connection of the host's client to the kernel's TCP port."""
    try:
        kernel = await _connect_kernel(port)
    except OSError:
        writer.close()  # ZMQ's client connects again
        return
    await splice((reader, writer), kernel)


async def _serve(routes: dict[socket.socket, int]) -> None:
    """Accept on every ipc socket for ever, each to its TCP port."""
    servers = [await asyncio.start_unix_server(functools.partial(_to_port, port), sock=sock)
               for sock, port in routes.items()]
    await asyncio.gather(*(server.serve_forever() for server in servers))


def _child(routes: dict[socket.socket, int], parent: int) -> NoReturn:
    """Serve the forwarder in the forked child; never return to the kernel's code."""
    import signal

    try:
        # Out of the kernel's process group and deaf to ^C, like forward.py's child: the
        # forwarder lives as long as the box.
        os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        die_with(parent)
        asyncio.run(_serve(routes))
    finally:
        os._exit(0)


def main(argv: list[str] | None = None) -> NoReturn:
    """Write the TCP connection file, start the forwarder, and become the kernel."""
    parser = argparse.ArgumentParser(prog="python -m jupyter_ci.server.sandbox.zmq_forward")
    parser.add_argument("--conn", required=True, help="the ipc connection file (host side)")
    parser.add_argument("--tcp", required=True, help="the TCP connection file to write")
    parser.add_argument("command", nargs="+", help="the kernel's command (after --)")
    args = parser.parse_args(argv)
    info: Mapping[str, object] = json.loads(Path(args.conn).read_text())
    ports = free_ports(len(CHANNELS))
    tcp = Path(args.tcp)
    tcp.write_text(json.dumps(tcp_connection(info, ports)))
    tcp.chmod(0o600)
    listeners = bind_ipc(info)
    routes = {listeners[port_of(info, key)]: port
              for key, port in zip(CHANNELS, ports, strict=True)}
    kernel = os.getpid()
    if os.fork() == 0:
        _child(routes, kernel)
    # Sockets are not inherited across exec: the kernel holds none of the ipc ones.
    os.execvp(args.command[0], args.command)


if __name__ == "__main__":
    main()
