"""The HTTP door runs its tools in process: each call is authorized as REST would authorize it.

Two users by token: alice may do anything; mallory may only read jupyter-ci (list sessions,
files, a notebook), as a token without the "write" scope. Mallory's MCP `execute` in alice's
session is refused in process, as REST refuses her execute, and nothing of hers runs; so are
her start_session and close_session, and her answer to a server's request (an ask's
approval). An execute naming another language than its session's is a tool error naming both.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from jupyter_server.auth import Authorizer, IdentityProvider, User
from traitlets.config import Config

from jupyter_ci.client import AsyncClient
from tests.nbrun import session_server_config
from tests.test_mcp import TRANSPORTS, texts

TOKENS = {"alice-token": "alice", "mallory-token": "mallory"}


class ByToken(IdentityProvider):
    """Users named by their token (one each), as a hub's or a proxy's tokens would be."""

    def get_user(self, handler: Any) -> User | None:
        """Return the user whose token the request carries."""
        header = handler.request.headers.get("Authorization", "")
        name = TOKENS.get(header.removeprefix("token ").strip())
        if name is None:
            return None
        handler._token_authenticated = True  # as Jupyter's own token check marks it
        return User(name)


class ReadOnlyMallory(Authorizer):
    """Mallory may read jupyter-ci, not write to it; alice may do anything."""

    def is_authorized(self, handler: Any, user: User, action: str, resource: str) -> bool:
        """Refuse mallory everything but reading."""
        return user.username != "mallory" or action == "read"


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch) -> Config:
    config: Config = session_server_config(monkeypatch, {})
    config.ServerApp.identity_provider_class = ByToken
    config.ServerApp.authorizer_class = ReadOnlyMallory
    return config


@pytest.fixture
def url(jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
        jp_base_url: str) -> str:
    return f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url.rstrip('/')}"


async def test_an_execute_is_authorized_in_process_as_rest_would(url: str) -> None:
    async with AsyncClient(url, "alice-token") as alice:
        session = await alice.session()
        async with TRANSPORTS["http"](url, "alice-token") as mcp:
            ran = await mcp.call_tool("execute", {"code": "x = 41; x",
                                                  "session_id": session.id})
            assert not ran.is_error and "41" in texts(ran), texts(ran)
        async with TRANSPORTS["http"](url, "mallory-token") as mcp:
            listed = await mcp.call_tool("list_sessions", {})  # reading: allowed, as in REST
            assert not listed.is_error and session.id in texts(listed), texts(listed)
            refused = await mcp.call_tool("execute", {"code": "x = 666",
                                                      "session_id": session.id})
            assert refused.is_error, texts(refused)
            assert "not authorized to write on resource jupyter_ci" in texts(refused)
        async with AsyncClient(url, "mallory-token") as mallory:
            rest = await mallory.http.post(f"jupyter-ci/sessions/{session.id}/execute",
                                           json={"code": "x = 666"})
            assert rest.status_code == 403, rest.text  # what REST answers her
        after = await session.execute("x")
        assert after.text == "41", after.text  # nothing of hers ran
        await session.delete()


async def test_starting_and_closing_sessions_needs_write_as_in_rest(
        url: str, jp_serverapp: Any) -> None:
    manager = jp_serverapp.web_app.settings["jupyter_ci_sessions"]
    async with AsyncClient(url, "alice-token") as alice:
        session = await alice.session()
        await session.upload("data.txt", b"alice's")
        async with TRANSPORTS["http"](url, "mallory-token") as mcp:
            # Reading, as REST lets her.
            files = await mcp.call_tool("list_files", {"session_id": session.id})
            assert not files.is_error and "data.txt" in texts(files), texts(files)
            notebook = await mcp.call_tool("get_notebook", {"session_id": session.id})
            assert not notebook.is_error and '"nbformat": 4' in texts(notebook)
            for tool, arguments in (("start_session", {}),
                                    ("close_session", {"session_id": session.id})):
                refused = await mcp.call_tool(tool, arguments)
                assert refused.is_error, (tool, texts(refused))
                assert "not authorized to write on resource jupyter_ci" in texts(refused)
            assert list(manager.sessions) == [session.id]  # none started, hers not closed
        async with AsyncClient(url, "mallory-token") as mallory:
            rest = [await mallory.http.post("jupyter-ci/sessions", json={}),
                    await mallory.http.delete(f"jupyter-ci/sessions/{session.id}")]
            assert [reply.status_code for reply in rest] == [403, 403]  # what REST answers
        async with TRANSPORTS["http"](url, "alice-token") as mcp:
            started = await mcp.call_tool("start_session", {})
            assert not started.is_error, texts(started)
            mine = started.structured_content["id"]
            listed = await mcp.call_tool("list_sessions", {})
            assert {s["id"] for s in listed.structured_content["result"]} == {session.id, mine}
            closed = await mcp.call_tool("close_session", {"session_id": session.id})
            assert not closed.is_error, texts(closed)
        assert list(manager.sessions) == []  # hers closed; the one it started ended with it


async def test_answering_the_servers_requests_needs_write(url: str) -> None:
    # An elicitation's answer approves an ask's step: REST's approvals route needs "write".
    accept = {"Accept": "application/json, text/event-stream",
              "MCP-Protocol-Version": "2025-06-18"}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}
    answer = {"jsonrpc": "2.0", "id": 7, "result": {"action": "accept", "content": {}}}
    for token, status in (("mallory-token", 403), ("alice-token", 202)):
        headers = {**accept, "Authorization": f"token {token}"}
        async with httpx.AsyncClient(headers=headers) as client:
            opened = await client.post(f"{url}/jupyter-ci/mcp", json=hello)
            assert opened.status_code == 200, opened.text
            client.headers["mcp-session-id"] = opened.headers["mcp-session-id"]
            replied = await client.post(f"{url}/jupyter-ci/mcp", json=answer)
            assert replied.status_code == status, (token, replied.text)
            # Too deep for json to tell whether it is a reply: judged as one (not a 500).
            deep = b'{"jsonrpc": "2.0", "id": 8, "result": ' + b'{"a": ' * 5000 + b"1" + \
                b"}" * 5001
            refused = await client.post(f"{url}/jupyter-ci/mcp", content=deep, headers={
                "Content-Type": "application/json"})
            assert refused.status_code == (403 if token == "mallory-token" else 400), \
                refused.text
            await client.delete(f"{url}/jupyter-ci/mcp")


async def test_an_execute_in_another_language_is_refused_naming_both(url: str) -> None:
    async with TRANSPORTS["http"](url, "alice-token") as mcp:
        refused = await mcp.call_tool("execute", {"code": "x <- 1", "language": "r"})
        assert refused.is_error
        said = texts(refused)
        assert "runs python, not r" in said and "nothing was run" in said, said
        ran = await mcp.call_tool("execute", {"code": "1 + 1", "language": "Python"})
        assert not ran.is_error and "2" in texts(ran), texts(ran)
