"""What runs first in a box whose network is an allowlist: a loopback port to the egress proxy.

    python .../jupyter_ci/server/sandbox/forward.py --socket /run/jupyter-ci/proxy.sock \\
        --port 3128 -- <kernel argv...>

The box has only its own loopback, and programs find a proxy by `HTTP(S)_PROXY`, a TCP
address. So this binds 127.0.0.1:<port> in the box, forks one child that splices each
connection to the proxy's Unix socket (bound into the box), and becomes the kernel with
`execvp`: the kernel keeps the process id bubblewrap started, so interrupts still find it,
and the forwarder, below it, dies with the box (its PID namespace ends with the kernel).
The child is one process with one thread: it spends almost nothing of the box's limits.

It is run as a file, and imports nothing but what binding and forking need: every
millisecond here is one of the kernel's start (asyncio and the package load in the child,
after the fork, beside the kernel's own start).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from typing import NoReturn

#: This file, as a box's command names it.
FILE = os.path.abspath(__file__)


def _child(listener: socket.socket, path: str, parent: int) -> NoReturn:
    """Serve the forwarder in the forked child; never return to the kernel's code."""
    try:
        # Out of the kernel's process group, and deaf to ^C: a kernel that signals its group
        # (ipykernel interrupts it when it leads one, and ends it at shutdown) means the
        # user's subprocesses; the forwarder lives as long as the box.
        os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        from jupyter_ci.server.sandbox.splice import die_with, serve

        die_with(parent)
        serve(listener, path)
    finally:
        os._exit(0)


def listen(port: int) -> socket.socket:
    """Bind the box's loopback port (before the kernel starts: no request finds it closed)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    return listener


def main(argv: list[str] | None = None) -> NoReturn:
    """Start the forwarder in a child and become the command after `--`."""
    args = sys.argv[1:] if argv is None else argv
    try:
        split = args.index("--")
        options = dict(zip(args[:split:2], args[1:split:2], strict=True))
        path, port, command = options["--socket"], int(options.get("--port", 3128)), \
            args[split + 1:]
    except (ValueError, KeyError):
        sys.exit("usage: forward.py --socket PATH [--port N] -- COMMAND...")
    if not command:
        sys.exit("forward.py: no command after --")
    listener = listen(port)
    kernel = os.getpid()
    if os.fork() == 0:
        _child(listener, path, kernel)
    # Sockets are not inherited across exec: the kernel does not hold the port.
    os.execvp(command[0], command)


if __name__ == "__main__":
    # Run as a file, this folder comes first on sys.path: no module of it may shadow another.
    sys.path = [p for p in sys.path if os.path.abspath(p) != os.path.dirname(FILE)]
    main()
