"""The MCP `ask` with approval: each step goes to the MCP client as an elicitation (the SDK's
own client, over stdio and the server's Streamable HTTP), and a client that cannot elicit is
refused with nothing run."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitRequestParams, ElicitResult, TextContent
from traitlets.config import Config

from tests.fakellm import FakeLLM, Turn
from tests.nbrun import TEST_KEY, session_server_config
from tests.test_mcp import jupyter_ci_command

STEP = "x = 6 * 7\nprint('ran', x)"


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


class Asked:
    """An elicitation callback answering with scripted contents; it keeps what it was shown."""

    def __init__(self, *answers: dict[str, Any] | str) -> None:
        self.answers = list(answers)
        self.shown: list[ElicitRequestParams] = []

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        self.shown.append(params)
        answer = self.answers.pop(0)
        if isinstance(answer, str):  # "decline" or "cancel"
            return ElicitResult(action=answer)  # type: ignore[arg-type]
        return ElicitResult(action="accept", content=answer)


@asynccontextmanager
async def connect(transport: str, url: str, token: str, asked: Asked | None
                  ) -> AsyncIterator[ClientSession]:
    """An MCP client session over `transport`, eliciting through `asked` if given."""
    if transport == "stdio":
        env = {**os.environ, "JUPYTER_CI_TOKEN": token}
        env.pop("JUPYTER_TOKEN", None)
        params = StdioServerParameters(command=jupyter_ci_command(),
                                       args=["mcp", "--url", url], env=env)
        async with stdio_client(params) as (read, write), ClientSession(
                read, write, elicitation_callback=asked) as session:
            await session.initialize()
            yield session
        return
    headers = {"Authorization": f"token {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=300) as client, \
            streamable_http_client(f"{url}/jupyter-ci/mcp", http_client=client) as (
            read, write), ClientSession(read, write, elicitation_callback=asked) as session:
        await session.initialize()
        yield session


def texts(result: Any) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_mcp_ask_is_approved_through_elicitation(
    server: tuple[str, str], fake: FakeLLM, transport: str
) -> None:
    url, token = server
    fake.push(Turn(tool_calls=[("run_python", {"code": STEP})]), Turn("x is 42."))
    asked = Asked({"decision": "run"})
    async with connect(transport, url, token, asked) as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
        modes = json.dumps(tools["ask"].input_schema["properties"]["approve"])
        assert all(mode in modes for mode in ("never", "first", "plan", "each"))
        result = await mcp.call_tool("ask", {"prompt": "compute x", "approve": "each"})
        state = await mcp.call_tool("execute", {"code": "print(x)"})
    assert not result.is_error and "x is 42." in texts(result)
    assert texts(state).strip() == "42"
    [shown] = asked.shown
    assert STEP in shown.message and "step 1" in shown.message.lower()
    decision = shown.requested_schema["properties"]["decision"]
    assert decision["enum"] == ["run", "edit", "skip", "stop"]
    assert "code" in shown.requested_schema["properties"]


async def test_an_edit_elicited_runs_the_edit_and_decline_stops(
    server: tuple[str, str], fake: FakeLLM
) -> None:
    url, token = server
    fake.push(Turn(tool_calls=[("run_python", {"code": "x = 1"})]),
              Turn(tool_calls=[("run_python", {"code": "y = 2"})]), Turn("never reached"))
    asked = Asked({"decision": "edit", "code": "x = 10"}, "decline")
    async with connect("http", url, token, asked) as mcp:
        result = await mcp.call_tool("ask", {"prompt": "two steps", "approve": "each"})
        state = await mcp.call_tool("execute", {"code": "print(x, 'y' in globals())"})
    assert len(asked.shown) == 2
    assert "stopped" in texts(result)
    assert texts(state).strip() == "10 False"
    assert "x = 10" in json.dumps(fake.requests[-1].messages)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_client_without_elicitation_is_refused_and_nothing_runs(
    server: tuple[str, str], fake: FakeLLM, transport: str
) -> None:
    url, token = server
    fake.push(Turn(tool_calls=[("run_python", {"code": STEP})]), Turn("never reached"))
    async with connect(transport, url, token, None) as mcp:
        result = await mcp.call_tool("ask", {"prompt": "compute x", "approve": "each"})
        state = await mcp.call_tool("execute", {"code": "print('x' in globals())"})
    assert result.is_error and "elicitation" in texts(result) and "nothing ran" in texts(result)
    assert fake.calls() == 0  # refused before the ask began
    assert texts(state).strip() == "False"


async def test_the_servers_minimum_asks_and_a_client_that_cannot_answer_is_told(
    server: tuple[str, str], fake: FakeLLM, jp_serverapp: Any
) -> None:
    jp_serverapp.web_app.settings["jupyter_ci"].approval_minimum = "first"
    url, token = server
    fake.push(Turn(tool_calls=[("run_python", {"code": STEP})]), Turn("never reached"))
    async with connect("http", url, token, None) as mcp:
        result = await mcp.call_tool("ask", {"prompt": "compute x"})
        state = await mcp.call_tool("execute", {"code": "print('x' in globals())"})
    assert result.is_error and "elicitation" in texts(result)
    assert "server's approval setting" in texts(result)
    assert texts(state).strip() == "False"


async def test_a_plan_is_elicited_with_its_own_form_and_edited(
    server: tuple[str, str], fake: FakeLLM
) -> None:
    url, token = server
    fake.push(Turn("1. Compute x"), Turn(tool_calls=[("run_python", {"code": STEP})]),
              Turn("x is 42."))
    asked = Asked({"decision": "edit", "plan": ""}, {"decision": "edit",
                                                      "plan": "1. Compute x as 6 * 7"})
    async with connect("http", url, token, asked) as mcp:
        result = await mcp.call_tool("ask", {"prompt": "compute x", "approve": "plan"})
    assert not result.is_error and "x is 42." in texts(result)
    first, again = asked.shown
    assert "1. Compute x" in first.message
    properties = first.requested_schema["properties"]
    assert properties["decision"]["enum"] == ["run", "edit", "stop"] and "plan" in properties
    assert again.message.startswith("An edit needs the new plan")  # asked again, not run
    assert "1. Compute x as 6 * 7" in json.dumps(fake.requests[1].messages)


async def test_a_stdio_client_on_the_connectionless_protocol_is_told_it_cannot_approve(
    server: tuple[str, str], fake: FakeLLM
) -> None:
    """mcp.Client opens stdio in MCP 2026-07-28, where a server sends the client no requests
    (no elicitation) even when it offers to answer them."""
    url, token = server
    fake.push(Turn(tool_calls=[("run_python", {"code": STEP})]), Turn("never reached"))
    asked = Asked({"decision": "run"})
    env = {**os.environ, "JUPYTER_CI_TOKEN": token}
    params = StdioServerParameters(command=jupyter_ci_command(), args=["mcp", "--url", url],
                                   env=env)
    async with Client(params, elicitation_callback=asked) as mcp:
        result = await mcp.call_tool("ask", {"prompt": "compute x", "approve": "each"})
        state = await mcp.call_tool("execute", {"code": "print('x' in globals())"})
    assert result.is_error and "elicitation" in texts(result) and "nothing ran" in texts(result)
    assert fake.calls() == 0 and not asked.shown
    assert texts(state).strip() == "False"
