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
from jupyter_ci.server.sandbox import forward
from jupyter_ci.server.sandbox.allowlist import Allowlist, Rule, parse_rule, split_authority
from jupyter_ci.server.sandbox.box import SOCKET_DIR, python_paths
from jupyter_ci.server.sandbox.environ import ENV_BROKER_SOCKET, published
from jupyter_ci.server.sandbox.proxy import EgressProxy, Log

#: The box's loopback port of the forwarder (the usual proxy port).
PORT = 3128
#: Where the box finds the proxy's socket.
INSIDE = f"{SOCKET_DIR}/proxy.sock"
#: The setting that lists the hosts of every notebook's box.
NOTEBOOK_SETTING = "c.JupyterCI.notebook_network"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_proxies: dict[Allowlist, EgressProxy] = {}
#: The proxies of notebooks' boxes, one per kernel: their allowlists grow as the user allows.
_kernels: dict[str, EgressProxy] = {}


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
    return _egress(proxy_socket(_allowlist(entries, env), folder, log), env)


def kernel_egress(kernel_id: str, entries: Sequence[str], env: dict[str, str], private: Path,
                  log: Log, hint: str) -> Egress:
    """Return the egress of one kernel's box, with a proxy of its own whose list can grow.

    `hint` says, in each refusal, how the user allows the host (`{host}` is the entry).
    """
    proxy = EgressProxy(_allowlist(entries, env), private / "proxy.sock", log=log, hint=hint,
                        setting=NOTEBOOK_SETTING)
    with _lock:
        old = _kernels.pop(kernel_id, None)
        if old is not None:  # a restart: the new box gets a new socket
            _thread_loop().call_soon_threadsafe(old.close)
        asyncio.run_coroutine_threadsafe(proxy.start(), _thread_loop()).result(timeout=30)
        _kernels[kernel_id] = proxy
    return _egress(proxy.path, env)


def allow(kernel_id: str, entries: Sequence[str]) -> bool:
    """Let a running kernel's box reach `entries` too; False if it has no proxy of its own."""
    with _lock:
        proxy = _kernels.get(kernel_id)
        if proxy is None:
            return False
        grown = proxy.allowlist
        for entry in entries:
            grown = grown.with_rule(parse_rule(entry))
        proxy.allowlist = grown  # whole: a connection reads it once
        for entry in entries:
            if entry in proxy.refusals:
                proxy.refusals.remove(entry)
        return True


def refusals(kernel_id: str) -> list[str]:
    """Return the hosts a kernel's box was refused lately (oldest first)."""
    with _lock:
        proxy = _kernels.get(kernel_id)
        return list(proxy.refusals) if proxy is not None else []


def entries(kernel_id: str) -> list[str]:
    """Return what a kernel's box may reach, as allowlist entries (the broker's URL aside)."""
    with _lock:
        proxy = _kernels.get(kernel_id)
        rules = proxy.allowlist.rules if proxy is not None else ()
    return [rule.entry() for rule in rules if not rule.any_address]


def close_kernel(kernel_id: str) -> None:
    """Stop the proxy of a kernel that ended for good."""
    with _lock:
        proxy = _kernels.pop(kernel_id, None)
    if proxy is not None and _loop is not None:
        _loop.call_soon_threadsafe(proxy.close)


def _allowlist(entries: Sequence[str], env: dict[str, str]) -> Allowlist:
    """Parse `entries`, with the broker's URL when the box reaches the broker that way."""
    allowlist = Allowlist.parse(entries)
    broker = broker_rule(env)
    return allowlist if broker is None else allowlist.with_rule(broker)


def _egress(socket: Path, env: dict[str, str]) -> Egress:
    """Return the variables and forwarder of a box whose proxy listens on `socket`."""
    url = f"http://127.0.0.1:{PORT}"
    # Nothing bypasses the proxy: the box's own loopback holds nothing of the host's.
    variables = {**dict.fromkeys(PROXY_VARIABLES, url), "NO_PROXY": "", "no_proxy": ""}
    argv = [sys.executable, forward.FILE, "--socket", INSIDE, "--port", str(PORT), "--"]
    return Egress(socket, variables, argv, python_paths(sys.executable, env))


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
    for proxy in [*_proxies.values(), *_kernels.values()]:
        with contextlib.suppress(OSError):
            proxy.path.unlink()
