"""The HTTP door's fast path (jupyter_ci/mcp/fastpath.py) answers `execute` as the SDK would.

One server, two doors: /jupyter-ci/mcp (the fast path, and lone answers as JSON) and, for
comparison, the same door with both off (/jupyter-ci/mcp-sdk: every answer the SDK's own, as
an event stream). Raw JSON-RPC over httpx shows the very answers; the SDK's own client shows
that agents see the same. Alice may do anything; mallory may only read (tests/
test_mcp_inprocess.py's users).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from jupyter_server.utils import url_path_join
from mcp.types import TextContent
from traitlets.config import Config

from jupyter_ci.client import AsyncClient
from jupyter_ci.mcp.http import MCPDoor, MCPHandler
from tests.nbrun import session_server_config
from tests.test_mcp import TRANSPORTS
from tests.test_mcp_inprocess import ByToken, ReadOnlyMallory

FAST, SDK = "/jupyter-ci/mcp", "/jupyter-ci/mcp-sdk"
VERSION = "2025-06-18"
#: The code limit of REST's body reader here (an execute past it is refused, as REST's).
MAX_CODE = 4096
#: Code that marks its start with a file, then says whether a KeyboardInterrupt stopped it.
WAITS = ("import pathlib, time\ninterrupted = False\npathlib.Path('started').touch()\n"
         "try:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    interrupted = True")


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch) -> Config:
    config: Config = session_server_config(monkeypatch, {})
    config.ServerApp.identity_provider_class = ByToken
    config.ServerApp.authorizer_class = ReadOnlyMallory
    config.JupyterCI.max_code_bytes = MAX_CODE
    return config


@pytest.fixture
def url(jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
        jp_base_url: str, io_loop: Any) -> Iterator[str]:
    """The server's URL, with the SDK-only door mounted beside the real one."""
    door = MCPDoor(jp_serverapp, jp_serverapp.log, fast=False)
    route = url_path_join(jp_base_url, SDK)
    jp_serverapp.web_app.add_handlers(".*$", [(route, MCPHandler, {"door": door})])
    yield f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url.rstrip('/')}"
    io_loop.run_sync(door.stop)


def fast_door(serverapp: Any) -> MCPDoor:
    """Return the server's own MCP door (the jupyter_ci extension's)."""
    (app,) = serverapp.extension_manager.extension_apps["jupyter_ci"]
    door: MCPDoor = app.mcp
    return door


def answered(serverapp: Any) -> int:
    """Return how many calls the fast path answered so far."""
    fast = fast_door(serverapp).fast
    return 0 if fast is None else fast.answered


@dataclass
class Raw:
    """An MCP session spoken in raw JSON-RPC over httpx (the initialize handshake done)."""

    http: httpx.AsyncClient
    url: str
    sid: str = ""
    ident: int = 0

    async def post(self, message: dict[str, Any], sid: str | None = None) -> httpx.Response:
        """POST one message in this MCP session (or with Mcp-Session-Id `sid`: "" for none)."""
        sid = self.sid if sid is None else sid
        return await self.http.post(self.url, json=message,
                                    headers={"Mcp-Session-Id": sid} if sid else {})

    async def call(self, tool: str, arguments: dict[str, Any], **params: Any
                   ) -> tuple[httpx.Response, dict[str, Any]]:
        """Call a tool; return the HTTP response and its JSON-RPC answer."""
        self.ident += 1
        reply = await self.post({"jsonrpc": "2.0", "id": self.ident, "method": "tools/call",
                                 "params": {"name": tool, "arguments": arguments, **params}})
        return reply, answer_of(reply)


def answer_of(reply: httpx.Response) -> dict[str, Any]:
    """Return the JSON-RPC answer of a POST: its JSON body, or its stream's last message."""
    if reply.headers["content-type"].startswith("application/json"):
        answer: dict[str, Any] = reply.json()
        return answer
    events = [line[5:].strip() for line in reply.text.splitlines() if line.startswith("data:")]
    last: dict[str, Any] = json.loads(events[-1])
    return last


async def started(client: AsyncClient, sid: str) -> None:
    """Wait until WAITS runs in session `sid` (its file is there)."""
    async def poll() -> None:
        while True:
            listed = await client.http.get(f"jupyter-ci/sessions/{sid}/files")
            if any(entry["path"] == "started" for entry in listed.json()):
                return
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), 60)


@asynccontextmanager
async def raw(url: str, route: str, token: str, client_info: bool = True
              ) -> AsyncIterator[Raw]:
    """An initialized raw MCP session on `route`, ended (DELETE) on exit (client_info=False:
    an initialize that fails, and no notifications/initialized: a session never opened)."""
    headers = {"Authorization": f"token {token}", "MCP-Protocol-Version": VERSION,
               "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(headers=headers, timeout=120) as http:
        session = Raw(http, f"{url}{route}")
        opened = await session.post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                     "params": {"protocolVersion": VERSION, "capabilities": {},
                                                **({"clientInfo": {"name": "raw", "version": "0"}}
                                                   if client_info else {})}})
        assert opened.status_code == 200, opened.text
        session.sid = opened.headers["mcp-session-id"]
        if client_info:  # else not sent: it would open the session on its own
            ready = await session.post({"jsonrpc": "2.0",
                                        "method": "notifications/initialized"})
            assert ready.status_code == 202, ready.text
        yield session
        await http.delete(session.url, headers={"Mcp-Session-Id": session.sid})


CASES: list[dict[str, Any]] = [
    {"code": "x = 41; x + 1"},
    {"code": "print('hi'); import sys; print('oops', file=sys.stderr)"},
    {"code": "1/0"},
    {"code": "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()"},
    {"code": "x <- 1", "language": "r"},  # refused before it runs: the SDK's path answers
    {"code": "x", "timeout": -1},  # arguments the tool's model refuses: the SDK's too
    {"code": "#" * (MAX_CODE + 1)},  # past REST's limit: refused as REST refuses it
]
RUN_HERE = [0, 1, 2, 3]


async def test_a_fast_execute_answers_what_the_sdks_path_answers(
        url: str, jp_serverapp: Any) -> None:
    async with AsyncClient(url, "alice-token") as alice:
        mine, theirs = await alice.session(), await alice.session()
        async with raw(url, FAST, "alice-token") as fast, raw(url, SDK, "alice-token") as sdk:
            for case in CASES:
                before = answered(jp_serverapp)
                got, answer = await fast.call("execute", {**case, "session_id": mine.id})
                expected, wanted = await sdk.call("execute", {**case, "session_id": theirs.id})
                assert answer == wanted, case
                assert (got.status_code, expected.status_code) == (200, 200)
                assert got.headers["content-type"] == "application/json"
                assert expected.headers["content-type"].startswith("text/event-stream")
                ran_here = CASES.index(case) in RUN_HERE
                assert answered(jp_serverapp) == before + ran_here, case
                assert answer["result"]["isError"] == (CASES.index(case) not in (0, 1, 3))
        for session in (mine, theirs):
            await session.delete()


async def test_the_sdks_client_gets_the_same_result_either_way(url: str,
                                                               jp_serverapp: Any) -> None:
    async with TRANSPORTS["http"](url, "alice-token") as mcp:
        await mcp.call_tool("start_session", {})
        before = answered(jp_serverapp)
        # No session named: the connection's default (started above).
        fast = await mcp.call_tool("execute", {"code": "y = 6 * 7; y"})
        assert answered(jp_serverapp) == before + 1
        # Progress asked for: the SDK's path, which could report it.
        seen: list[float] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            seen.append(done)

        slow = await mcp.call_tool("execute", {"code": "y"}, progress_callback=progress)
        assert answered(jp_serverapp) == before + 1
        assert fast.model_dump() == slow.model_dump()
        assert [c.text for c in fast.content if isinstance(c, TextContent)] == ["Out: 42"]


async def test_a_missing_or_wrong_session_id_is_refused_as_the_sdk_refuses_it(
        url: str, jp_serverapp: Any) -> None:
    async with AsyncClient(url, "alice-token") as alice:
        session = await alice.session()
        await session.execute("x = 1")
        call = {"name": "execute", "arguments": {"code": "x = 666", "session_id": session.id}}
        before = answered(jp_serverapp)
        for session_id in ("", "0123456789abcdef0123456789abcdef"):
            refusals = []
            for route in (FAST, SDK):
                async with raw(url, route, "alice-token") as mcp:
                    reply = await mcp.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                            "params": call}, session_id)
                    refusals.append((reply.status_code, reply.json()))
            assert refusals[0] == refusals[1], refusals
            assert refusals[0][0] == (400 if not session_id else 404), refusals
        assert answered(jp_serverapp) == before
        assert (await session.execute("x")).text == "1"  # nothing of it ran
        await session.delete()


async def test_what_the_sdks_transport_refuses_is_refused_as_it_refuses_it(
        url: str, jp_serverapp: Any) -> None:
    async with AsyncClient(url, "alice-token") as alice:
        session = await alice.session()
        await session.execute("x = 1")
        call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
            "name": "execute", "arguments": {"code": "x = 666", "session_id": session.id}}}
        before, refusals = answered(jp_serverapp), []
        for route in (FAST, SDK):
            seen: list[tuple[int, Any]] = []
            async with raw(url, route, "alice-token") as mcp:
                for headers in ({"Accept": "application/json"},
                                {"Content-Type": "text/plain"}):
                    reply = await mcp.http.post(mcp.url, content=json.dumps(call), headers={
                        "Mcp-Session-Id": mcp.sid, "Content-Type": "application/json",
                        **headers})
                    seen.append((reply.status_code, reply.text))  # one is not JSON-RPC
            # A session whose initialize failed (no clientInfo): the SDK keeps it (its answer
            # came as a 200 stream), and refuses its calls.
            async with raw(url, route, "alice-token", client_info=False) as mcp:
                reply = await mcp.post(call)
                seen.append((reply.status_code, answer_of(reply)))
            refusals.append(seen)
        assert refusals[0] == refusals[1], refusals
        # The Content-Type is refused by the SDK's DNS-rebinding guard, before its transport.
        assert [status for status, _ in refusals[0]] == [406, 400, 200], refusals
        assert refusals[0][2][1]["error"]["code"] == -32602, refusals  # INVALID_PARAMS
        assert answered(jp_serverapp) == before
        assert (await session.execute("x")).text == "1"
        await session.delete()


async def test_a_read_only_users_execute_is_refused_and_runs_nothing(
        url: str, jp_serverapp: Any) -> None:
    async with AsyncClient(url, "alice-token") as alice:
        session = await alice.session()
        await session.execute("x = 1")
        call = {"code": "x = 666", "session_id": session.id}
        before = answered(jp_serverapp)
        async with raw(url, FAST, "mallory-token") as fast, \
                raw(url, SDK, "mallory-token") as sdk:
            refused, wanted = (await fast.call("execute", call))[1], \
                (await sdk.call("execute", call))[1]
        assert refused == wanted and refused["result"]["isError"], refused
        assert "not authorized to write on resource jupyter_ci" in json.dumps(refused)
        assert answered(jp_serverapp) == before
        assert (await session.execute("x")).text == "1"
        await session.delete()


@pytest.mark.parametrize("route", [FAST, SDK])
async def test_a_cancelled_call_interrupts_its_run(url: str, route: str) -> None:
    async with AsyncClient(url, "alice-token") as alice, \
            raw(url, route, "alice-token") as mcp:
        session = await alice.session()
        call = asyncio.ensure_future(mcp.call("execute", {"code": WAITS,
                                                          "session_id": session.id}))
        await started(alice, session.id)
        cancelled = await mcp.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                    "params": {"requestId": mcp.ident}})
        assert cancelled.status_code == 202, cancelled.text
        _, answer = await call
        assert answer["error"] == {"code": -32800, "message": "Request cancelled"}, answer
        assert (await session.execute("interrupted")).text == "True"
        await session.delete()


async def test_the_mcp_sessions_end_interrupts_its_fast_calls(
        url: str, jp_serverapp: Any) -> None:
    async with AsyncClient(url, "alice-token") as alice, \
            raw(url, FAST, "alice-token") as mcp:
        session = await alice.session()
        call = asyncio.ensure_future(mcp.call("execute", {"code": WAITS,
                                                          "session_id": session.id}))
        await started(alice, session.id)
        fast = fast_door(jp_serverapp).fast
        assert fast is not None and any(fast.running.values())
        ended = await mcp.http.delete(mcp.url, headers={"Mcp-Session-Id": mcp.sid})
        assert ended.status_code == 200, ended.text
        _, answer = await call
        assert answer["error"]["message"] == "Connection closed", answer
        assert (await session.execute("interrupted")).text == "True"
        await session.delete()
