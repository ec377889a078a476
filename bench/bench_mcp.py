"""Measure the MCP execute round trip against the REST one, side by side in one run.

Prints ratios, not pass/fail: these machines are noisy, so each figure is compared with its
baseline measured in the same run, interleaved, on one server.

    python bench/bench_mcp.py [--rounds 30]

1. REST: `jupyter_ci.client.AsyncClient` execute of `x = 1` (what the MCP tools call);
2. MCP over the server's Streamable HTTP door (/jupyter-ci/mcp): `tools/call execute`, with
   the SDK's own client; the door's fast path runs it in process and answers it as one JSON
   body (jupyter_ci/mcp/fastpath.py). Goal: at most 1.2x REST;
3. the same door without the fast path: the SDK's own transport and tool call, the run in
   process (jupyter_ci/mcp/inprocess.py), every answer an event stream (this module is also
   the server extension that serves it, at /jupyter-ci/mcp-sdk);
4. the door with every tool over loopback REST (at /jupyter-ci/mcp-loopback): one extra
   HTTP hop;
5. MCP over stdio: `jupyter-ci mcp` as a subprocess, `tools/call execute` (two extra hops:
   the pipe, then HTTP to the server).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx2
from bench_sessions import launch
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from jupyter_ci.client import AsyncClient

Call = Callable[[], Awaitable[object]]
#: The doors this module's extension serves: every tool over loopback REST; the SDK's path.
ROUTES = {"loopback": "/jupyter-ci/mcp-loopback", "sdk": "/jupyter-ci/mcp-sdk"}
#: The goal of the in-process door: MCP execute / REST execute.
GOAL = 1.2
IN_PROCESS = "MCP execute (http, fast path)"


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Be a server extension too: the loopback door, to compare with the in-process one."""
    return [{"module": "bench_mcp"}]


def _load_jupyter_server_extension(server: Any) -> None:
    """Serve the MCP door over loopback REST, and without its fast path, at ROUTES."""
    from jupyter_server.utils import url_path_join

    from jupyter_ci.mcp.http import MCPDoor, MCPHandler

    doors = {"loopback": MCPDoor(server, server.log, in_process=False),
             "sdk": MCPDoor(server, server.log, fast=False)}
    server.web_app.add_handlers(".*$", [
        (url_path_join(server.base_url, ROUTES[name]), MCPHandler, {"door": door})
        for name, door in doors.items()])


async def timed(call: Call) -> float:
    """Return the seconds `await call()` took."""
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


async def mcp_session(stack: AsyncExitStack, transport: str, url: str, token: str
                      ) -> ClientSession:
    """Open an MCP client session over `transport` ("http", "sdk", "loopback", "stdio")."""
    if transport != "stdio":
        http = await stack.enter_async_context(httpx2.AsyncClient(
            headers={"Authorization": f"token {token}"}, timeout=300))
        route = ROUTES.get(transport, "/jupyter-ci/mcp")
        read, write = await stack.enter_async_context(streamable_http_client(
            f"{url}{route}", http_client=http))
    else:
        command = Path(sys.executable).parent / "jupyter-ci"
        params = StdioServerParameters(command=str(command), args=["mcp", "--url", url],
                                       env={**os.environ, "JUPYTER_CI_TOKEN": token})
        read, write = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def mcp_call(session: ClientSession, sid: str) -> Call:
    """Return a call of the execute tool in session `sid` (checked once)."""
    async def call() -> object:
        return await session.call_tool("execute", {"code": "x = 1", "session_id": sid})

    first = await session.call_tool("execute", {"code": "x = 1", "session_id": sid})
    assert not first.is_error, first
    return call


async def bench(url: str, token: str, rounds: int) -> None:
    """Interleave REST and the MCP doors' executes; print medians, ratios."""
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(AsyncClient(url, token))
        calls: dict[str, Call] = {}
        rest = await client.session()
        stack.push_async_callback(rest.delete)
        calls["REST execute (AsyncClient)"] = lambda: rest.execute("x = 1")
        names = {"http": IN_PROCESS, "sdk": "MCP execute (http, the SDK's path)",
                 "loopback": "MCP execute (http, loopback REST)",
                 "stdio": "MCP execute (stdio)"}
        for transport, name in names.items():
            session = await mcp_session(stack, transport, url, token)
            started = await client.session()
            stack.push_async_callback(started.delete)
            calls[name] = await mcp_call(session, started.id)
        for _ in range(5):  # warm every path
            for call in calls.values():
                await call()
        times: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(rounds):
            for name, call in calls.items():
                times[name].append(await timed(call))
    base = statistics.median(times["REST execute (AsyncClient)"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:36} {median * 1000:7.2f} ms   ratio {median / base:5.2f}x   "
              f"(p90 {sorted(values)[int(0.9 * (len(values) - 1))] * 1000:6.2f} ms)")
    ratio = statistics.median(times[IN_PROCESS]) / base
    print(f"HTTP door / REST: {ratio:.2f}x (goal <= {GOAL}x: "
          f"{'met' if ratio <= GOAL else 'missed'}); load average "
          f"{' '.join(f'{load:.2f}' for load in os.getloadavg())}")


def main() -> None:
    """Start one server and measure the five paths against it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        server, url, token = launch(root, ["--JupyterCI.session_pool=1",
                                           "--JupyterCI.max_sessions=10"],
                                    ("jupyter_ci", "bench_mcp"))
        try:
            asyncio.run(bench(url, token, args.rounds))
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()
