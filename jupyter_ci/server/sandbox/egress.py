"""What a box whose network is an allowlist gets: the process's egress proxy and its forwarder.

The process that hosts the provisioner (a Jupyter server, a Kernel Gateway, nbclient) runs
one proxy per allowlist, started at the first box that needs it, on an event loop of its own
in a daemon thread: it serves while a synchronous kernel manager's loop is idle, and its
copying never waits behind the server's own work. Its socket is removed at exit.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from jupyter_ci.models.broker import ENV_URL
from jupyter_ci.server.sandbox.allowlist import Allowlist, Rule, split_authority
from jupyter_ci.server.sandbox.box import SOCKET_DIR, python_paths
from jupyter_ci.server.sandbox.environ import ENV_BROKER_SOCKET, published
from jupyter_ci.server.sandbox.proxy import EgressProxy, Log

#: The box's loopback port of the forwarder (the usual proxy port).
PORT = 3128
#: Where the box finds the proxy's socket.
INSIDE = f"{SOCKET_DIR}/proxy.sock"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_proxies: dict[Allowlist, EgressProxy] = {}


@dataclass(frozen=True)
class Egress:
    """What a box whose network is an allowlist gets beyond an ordinary box."""

    #: The proxy's socket on the host (bound into the box at INSIDE).
    socket: Path
    #: Variables that send the box's HTTP(S) through the forwarder.
    env: dict[str, str]
    #: The forwarder's command, put before the kernel's.
    argv: list[str]
    #: The forwarder's interpreter and package, read-only in the box.
    readonly: tuple[Path, ...]


def egress(entries: Sequence[str], env: dict[str, str], folder: Path, log: Log) -> Egress:
    """Return the egress of a box allowed `entries`, starting this process's proxy if needed.

    When the kernel reaches the broker by its URL (a gateway on another machine gives no
    socket), that URL's host and port are allowed too. Raises ValueError on a bad entry.
    """
    allowlist = Allowlist.parse(entries)
    broker = broker_rule(env)
    if broker is not None:
        allowlist = allowlist.with_rule(broker)
    url = f"http://127.0.0.1:{PORT}"
    # Nothing bypasses the proxy: the box's own loopback holds nothing of the host's.
    variables = {**dict.fromkeys(PROXY_VARIABLES, url), "NO_PROXY": "", "no_proxy": ""}
    argv = [sys.executable, "-m", "jupyter_ci.server.sandbox.forward", "--socket", INSIDE,
            "--port", str(PORT), "--"]
    return Egress(proxy_socket(allowlist, folder, log), variables, argv,
                  python_paths(sys.executable, env))


def broker_rule(env: dict[str, str]) -> Rule | None:
    """Return the entry of the broker's URL when the box reaches it that way, not a socket."""
    socket = published(env, ENV_BROKER_SOCKET)
    if socket and os.path.exists(socket):
        return None
    url = urlsplit(env.get(ENV_URL, ""))
    if url.scheme not in ("http", "https"):
        return None
    found = split_authority(url.netloc.rpartition("@")[2])
    if found is None:
        return None
    # The server published this URL itself: whatever address it names is meant.
    port = found[1] or (443 if url.scheme == "https" else 80)
    return Rule(found[0], port, any_address=True)


def proxy_socket(allowlist: Allowlist, folder: Path, log: Log) -> Path:
    """Return the socket of this process's proxy for `allowlist`, started at first use.

    It tells its refusals to `log`, the log of the first box's kernel manager (the server's).
    """
    with _lock:
        proxy = _proxies.get(allowlist)
        if proxy is None:
            key = hashlib.sha256(repr(allowlist.rules).encode()).hexdigest()[:8]
            proxy = EgressProxy(allowlist, folder / f"proxy-{os.getpid()}-{key}.sock", log=log)
            asyncio.run_coroutine_threadsafe(proxy.start(), _thread_loop()).result(timeout=30)
            _proxies[allowlist] = proxy
        return proxy.path


def _thread_loop() -> asyncio.AbstractEventLoop:
    """Return the proxies' event loop, running in a daemon thread (started once)."""
    global _loop
    if _loop is None:
        _loop = asyncio.new_event_loop()
        threading.Thread(target=_loop.run_forever, name="jupyter-ci-egress",
                         daemon=True).start()
        atexit.register(_remove_sockets)
    return _loop


def _remove_sockets() -> None:
    """Remove the proxies' sockets as the process exits."""
    for proxy in _proxies.values():
        with contextlib.suppress(OSError):
            proxy.path.unlink()
