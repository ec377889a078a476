"""`jupyter-ci mcp`: serve jupyter-ci's MCP tools on stdio, against a running Jupyter server.

    jupyter-ci mcp --url http://localhost:8888            # token from $JUPYTER_CI_TOKEN
    claude mcp add jupyter-ci -e JUPYTER_CI_TOKEN=... -- jupyter-ci mcp --url http://...

The tools go through the server's REST sessions API; sessions this process started are
closed when its client disconnects, or when SIGTERM or SIGHUP stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any

import anyio
import httpx
from mcp.server.mcpserver import Context, MCPServer

from jupyter_ci.client import (
    AsyncClient,
    AsyncSession,
    Client,
    CodeInterpreterError,
    Session,
)
from jupyter_ci.mcp.rest import RestBackend
from jupyter_ci.mcp.tools import Connection, build_server

#: Where the token is read from when --token is not given (kept off the command line).
TOKEN_VARS = ("JUPYTER_CI_TOKEN", "JUPYTER_TOKEN")
URL_VAR = "JUPYTER_CI_URL"
#: Signals that stop the server after it closed its sessions (SIGHUP: its terminal went).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                     if hasattr(signal, name))
#: Seconds each session's deletion may take when a signal stops the server.
STOP_S = 10.0


class StdioBackend(RestBackend):
    """One REST client for the process, with the token it was started with."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url, self.token = url, token
        self._client = AsyncClient(url, token)
        #: The process is the connection (in either protocol era): one default session.
        self.process = Connection()

    def client(self, ctx: Context[Any, Any]) -> AsyncClient:
        """Return the process's client."""
        return self._client

    def connection(self) -> Connection:
        """Return the process's state."""
        return self.process

    def end_now(self) -> None:
        """Close the sessions this process started, blocking (from a signal handler)."""
        started = sorted(self.process.started)
        with Client(self.url, self.token, timeout=STOP_S) as client:
            for sid in started:
                with contextlib.suppress(CodeInterpreterError, httpx.HTTPError):
                    Session(client.http, {"id": sid}).delete()

    async def closed(self, connection: Connection) -> None:
        """Close the sessions this connection started, then the connection pool."""
        # At once: a client that closed stdin sends SIGTERM 2 s later (the MCP SDK's).
        await asyncio.gather(*(self._end(sid) for sid in sorted(connection.started)))
        await self._client.http.aclose()

    async def _end(self, sid: str) -> None:
        # A server that went first took its sessions with it.
        with contextlib.suppress(CodeInterpreterError, httpx.HTTPError):
            await AsyncSession(self._client.http, {"id": sid}).delete()


def parser() -> argparse.ArgumentParser:
    """Return the command line's parser."""
    top = argparse.ArgumentParser(prog="jupyter-ci", description="jupyter-ci's commands.")
    commands = top.add_subparsers(dest="command", required=True)
    mcp = commands.add_parser("mcp", help="Serve jupyter-ci's MCP tools on stdio.",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    mcp.add_argument("--url", default=os.environ.get(URL_VAR, "http://localhost:8888"),
                     help=f"The Jupyter server's URL (default: ${URL_VAR}, else "
                     "http://localhost:8888).")
    mcp.add_argument("--token", default=None,
                     help="The server's token (default: $JUPYTER_CI_TOKEN, else "
                     "$JUPYTER_TOKEN); prefer the variable, which other users cannot see.")
    return top


def token_from(given: str | None, environ: dict[str, str] | os._Environ[str]) -> str | None:
    """Return the token given, else the first variable of TOKEN_VARS that is set."""
    return given or next((environ[v] for v in TOKEN_VARS if environ.get(v)), None)


def main(argv: Sequence[str] | None = None) -> None:
    """Run `jupyter-ci mcp` (stdio) until the client disconnects."""
    args = parser().parse_args(argv)
    token = token_from(args.token, os.environ)
    if not token:
        print("jupyter-ci mcp: no token: set $JUPYTER_CI_TOKEN (or pass --token); "
              "`jupyter server list` shows the server's.", file=sys.stderr)
    backend = StdioBackend(args.url, token)
    for signum in STOP_SIGNALS:
        signal.signal(signum, functools.partial(_stopped, backend))
    anyio.run(_serve, build_server(backend), backend)


async def _serve(server: MCPServer[Any], backend: StdioBackend) -> None:
    """Serve on stdio until the client closes it; then end the sessions this process started."""
    try:
        await server.run_stdio_async()
    finally:
        await backend.closed(backend.process)


def _stopped(backend: StdioBackend, signum: int, _: FrameType | None) -> None:
    """Close this process's sessions, then die of the signal as if it were not caught."""
    # A host that quits may signal its MCP servers rather than close their stdin (and the
    # SDK's own client signals one that has not exited 2 s after): the sessions go too.
    signal.signal(signum, signal.SIG_DFL)
    backend.end_now()
    os.kill(os.getpid(), signum)


if __name__ == "__main__":
    main()
