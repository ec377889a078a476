"""jupyter-ci's MCP server, driven by the SDK's own client over both transports.

stdio: `jupyter-ci mcp --url ...` launched by `mcp.client.stdio.stdio_client` against a live
Jupyter server; Streamable HTTP: `streamable_http_client` against the server's /jupyter-ci/mcp.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ImageContent, TextContent
from traitlets.config import Config

import jupyter_ci
from jupyter_ci.client import AsyncClient
from tests.fakellm import FakeLLM, Turn
from tests.nbrun import TEST_KEY, session_server_config

PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()"
TOOLS = {"start_session", "list_sessions", "close_session", "execute", "ask", "upload_file",
         "download_file", "list_files", "get_notebook", "list_notebooks", "read_notebook",
         "run_in_notebook", "insert_cell", "edit_cell", "run_cell"}


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM) -> Config:
    """The extension, with OpenAI pointing at the fake model server."""
    return session_server_config(monkeypatch, {"OPENAI_API_KEY": TEST_KEY,
                                               "OPENAI_BASE_URL": fake.openai_base_url})


@pytest.fixture
def server(jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
           jp_base_url: str) -> tuple[str, str]:
    """The live server's URL and token (http_server_client makes it listen)."""
    return (f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url.rstrip('/')}",
            str(jp_serverapp.identity_provider.token))


def jupyter_ci_command() -> str:
    """The `jupyter-ci` script of this environment."""
    found = Path(sys.executable).parent / "jupyter-ci"
    return str(found) if found.exists() else str(shutil.which("jupyter-ci"))


@asynccontextmanager
async def stdio(url: str, token: str) -> AsyncIterator[ClientSession]:
    """An MCP client session with `jupyter-ci mcp` on stdio (the token in its environment)."""
    env = {**os.environ, "JUPYTER_CI_TOKEN": token}
    env.pop("JUPYTER_TOKEN", None)
    params = StdioServerParameters(command=jupyter_ci_command(), args=["mcp", "--url", url],
                                   env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http(url: str, token: str) -> AsyncIterator[ClientSession]:
    """An MCP client session with the server's own /jupyter-ci/mcp."""
    headers = {"Authorization": f"token {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=300) as client, \
            streamable_http_client(f"{url}/jupyter-ci/mcp", http_client=client) as (
            read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


TRANSPORTS = {"stdio": stdio, "http": http}


def texts(result: Any) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_tools_run_code_show_images_and_errors_and_move_files(
    server: tuple[str, str], transport: str, jp_serverapp: Any
) -> None:
    url, token = server
    async with TRANSPORTS[transport](url, token) as mcp:
        # jupyter-ci's version, not the SDK's (which the server reported by default).
        assert mcp.initialize_result is not None
        assert mcp.initialize_result.server_info.name == "jupyter-ci"
        assert mcp.initialize_result.server_info.version == jupyter_ci.__version__
        listed = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        assert set(listed) == TOOLS
        assert listed["execute"].input_schema["required"] == ["code"]
        started = await mcp.call_tool("start_session", {})
        sid = started.structured_content["id"]
        two = await mcp.call_tool("execute", {"code": "print(1+1)"})
        assert not two.is_error and texts(two).strip() == "2"
        plot = await mcp.call_tool("execute", {"code": PLOT, "session_id": sid})
        images = [c for c in plot.content if isinstance(c, ImageContent)]
        assert len(images) == 1 and images[0].mime_type == "image/png"
        assert base64.b64decode(images[0].data)[:4] == b"\x89PNG"
        failed = await mcp.call_tool("execute", {"code": "1/0"})
        assert failed.is_error and "ZeroDivisionError" in texts(failed)
        await mcp.call_tool("upload_file", {"path": "d/in.bin", "is_base64": True,
                                            "content": base64.b64encode(b"\x00\xff").decode()})
        await mcp.call_tool("execute", {"code": "open('out.txt','w').write("
                                        "open('d/in.bin','rb').read().hex())"})
        assert texts(await mcp.call_tool("download_file", {"path": "out.txt"})) == "00ff"
        files = await mcp.call_tool("list_files", {})
        assert {f["path"] for f in files.structured_content["result"]} == {"d/in.bin", "out.txt"}
        notebook = texts(await mcp.call_tool("get_notebook", {}))
        assert '"nbformat": 4' in notebook and "print(1+1)" in notebook
        sessions = await mcp.call_tool("list_sessions", {})
        assert [s["id"] for s in sessions.structured_content["result"]] == [sid]
        assert not (await mcp.call_tool("close_session", {})).is_error
    assert jp_serverapp.web_app.settings["jupyter_ci_sessions"].sessions == {}


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_ask_reports_its_events_as_progress_and_returns_the_answer(
    server: tuple[str, str], transport: str, fake: FakeLLM
) -> None:
    url, token = server
    step = "print('ran', 6*7, flush=True)\nimport time\ntime.sleep(1)"
    fake.push(Turn("Let me count.", tool_calls=[("run_python", {"code": step})]),
              Turn("The answer is 42."))
    progress: list[tuple[float, str | None]] = []
    when: dict[str, float] = {}

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))
        when.setdefault(message or "", time.monotonic())

    async with TRANSPORTS[transport](url, token) as mcp:
        result = await mcp.call_tool("ask", {"prompt": "what is six times seven?"},
                                     progress_callback=on_progress)
        ended = time.monotonic()
    assert not result.is_error and "The answer is 42." in texts(result)
    # Progress streams in while the ask runs, not all at its end.
    assert ended - when["step 1 stdout: ran 42"] > 0.8
    messages = [m or "" for _, m in progress]
    assert messages[0] == "asking openai:gpt-test"
    assert "model: Let me count." in messages
    assert "step 1: running print('ran', 6*7, flush=True)" in messages
    assert "step 1 stdout: ran 42" in messages
    assert any(m.startswith("step 1 ended: ok") for m in messages)
    assert messages[-1] == "ask ended: done"
    assert [v for v, _ in progress] == sorted(v for v, _ in progress)


async def test_a_failed_ask_is_an_error_result(server: tuple[str, str]) -> None:
    url, token = server
    async with http(url, token) as mcp:
        result = await mcp.call_tool("ask", {"prompt": "hi", "model": "nosuch:model"})
    assert result.is_error


async def test_the_http_door_refuses_requests_without_the_servers_token(
    server: tuple[str, str],
) -> None:
    url, _ = server
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient() as client:
        for headers in ({}, {"Authorization": "token wrong"}):
            refused = await client.post(f"{url}/jupyter-ci/mcp", json=hello,
                                        headers={**accept, **headers})
            assert refused.status_code == 403, refused.text
            assert refused.json()["reason"]
        listening = await client.get(f"{url}/jupyter-ci/mcp", headers=accept)
        assert listening.status_code == 403
    # The SDK's client raises the refusal (a JSON-RPC error in the 403's body, so that it
    # says what is missing) from inside its task groups: find it there.
    with pytest.raises(BaseException) as caught:
        async with http(url, "wrong") as mcp:
            await mcp.list_tools()
    assert any("missing or invalid token" in m for m in mcp_errors(caught.value)), \
        repr(caught.value)


def mcp_errors(error: BaseException) -> list[str]:
    """Return the messages of the MCP errors in `error`, exception groups opened."""
    inner = getattr(error, "exceptions", None)  # an exception group (3.10: anyio's backport)
    if inner is not None:
        return [message for one in inner for message in mcp_errors(one)]
    if isinstance(error, MCPError):
        return [error.error.message]
    return mcp_errors(error.__cause__) if error.__cause__ is not None else []


async def test_stdio_without_a_token_says_so(server: tuple[str, str]) -> None:
    url, _ = server
    async with stdio(url, "") as mcp:
        result = await mcp.call_tool("execute", {"code": "1"})
    assert result.is_error and "token" in texts(result)


async def test_stdio_closes_the_sessions_it_started_when_its_client_goes(
    server: tuple[str, str], jp_serverapp: Any
) -> None:
    url, token = server
    sessions = jp_serverapp.web_app.settings["jupyter_ci_sessions"].sessions
    async with stdio(url, token) as mcp:
        assert texts(await mcp.call_tool("execute", {"code": "6*7"})).endswith("42")
        assert len(sessions) == 1
    for _ in range(50):
        if not sessions:
            break
        await asyncio.sleep(0.1)
    assert sessions == {}



async def left(sessions: dict[str, Any], kept: set[str]) -> set[str]:
    """Wait until only `kept` sessions are left (a 60 s hang guard: kernels shutting down)."""
    deadline = time.monotonic() + 60
    while set(sessions) != kept and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return set(sessions)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_sessions_an_mcp_connection_started_end_with_it(
    server: tuple[str, str], jp_serverapp: Any, transport: str
) -> None:
    url, token = server
    sessions = jp_serverapp.web_app.settings["jupyter_ci_sessions"].sessions
    client = AsyncClient(url, token)
    other = await client.session()  # not the connection's own: it stays
    try:
        async with TRANSPORTS[transport](url, token) as mcp:
            assert texts(await mcp.call_tool("execute", {"code": "6*7"})).endswith("42")
            assert not (await mcp.call_tool("start_session", {})).is_error
            assert not (await mcp.call_tool("execute", {"code": "1", "session_id": other.id})
                        ).is_error
            assert len(sessions) == 3
        assert await left(sessions, {other.id}) == {other.id}
    finally:
        await other.delete()
        await client.http.aclose()


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_sdks_client_keeps_its_default_session_between_calls(
    server: tuple[str, str], jp_serverapp: Any, transport: str
) -> None:
    """mcp.Client opens with the connectionless 2026-07-28 protocol where it can."""
    url, token = server
    sessions = jp_serverapp.web_app.settings["jupyter_ci_sessions"].sessions
    target: Any
    if transport == "http":
        http = httpx2.AsyncClient(headers={"Authorization": f"token {token}"}, timeout=300)
        target = streamable_http_client(f"{url}/jupyter-ci/mcp", http_client=http)
    else:
        env = {**os.environ, "JUPYTER_CI_TOKEN": token}
        target = StdioServerParameters(command=jupyter_ci_command(),
                                       args=["mcp", "--url", url], env=env)
    async with Client(target) as mcp:
        assert not (await mcp.call_tool("execute", {"code": "x = 41"})).is_error
        assert texts(await mcp.call_tool("execute", {"code": "print(x + 1)"})) == "42"
        assert len(sessions) == 1
    assert await left(sessions, set()) == set()


async def test_a_stdio_server_stopped_by_sigterm_ends_its_sessions(
    server: tuple[str, str], jp_serverapp: Any
) -> None:
    # As an MCP host that quits may stop its servers: a signal, not a closed stdin.
    url, token = server
    sessions = jp_serverapp.web_app.settings["jupyter_ci_sessions"].sessions
    env = {**os.environ, "JUPYTER_CI_TOKEN": token}
    process = await asyncio.create_subprocess_exec(
        jupyter_ci_command(), "mcp", "--url", url, env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "execute", "arguments": {"code": "6*7"}}}]
    for message in messages:
        process.stdin.write(json.dumps(message).encode() + b"\n")
    await process.stdin.drain()
    replies = [json.loads(await asyncio.wait_for(process.stdout.readline(), 120))
               for _ in range(2)]
    assert "42" in json.dumps(replies[1]) and len(sessions) == 1
    process.terminate()
    await asyncio.wait_for(process.wait(), 60)
    assert await left(sessions, set()) == set()
