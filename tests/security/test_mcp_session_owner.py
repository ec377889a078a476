"""An MCP session answers only whoever opened it (issue 41, point 7).

The attack: two users reach one server (a JupyterHub's admin, a user the owner shared the
server with); Mallory learns the `Mcp-Session-Id` of Alice's MCP session (a log, a proxy, a shared
config) and sends her own calls under it, as her own user, to run code in her session. The
door tells the SDK who calls (the token a request signed in with, else the Jupyter user), and
the SDK's session manager answers anyone but the session's opener as if it did not exist. (A
client that keeps no cookie, as the MCP Inspector, is one caller across its requests:
tests/test_mcp_inspector.py.)
"""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from traitlets.config import Config

from tests.fakellm import FakeLLM
from tests.nbrun import TEST_KEY, session_server_config
from tests.test_mcp_inprocess import ByToken

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM) -> Config:
    config = session_server_config(monkeypatch, {"OPENAI_API_KEY": TEST_KEY,
                                                 "OPENAI_BASE_URL": fake.openai_base_url})
    config.ServerApp.identity_provider_class = ByToken  # alice and mallory, a token each
    return config


def rpc(method: str, ident: int, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}


INIT = rpc("initialize", 1, {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "test", "version": "1"}})


async def test_another_user_cannot_use_a_session_id_that_is_not_theirs(
    jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
    jp_base_url: str
) -> None:
    url = f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url.rstrip('/')}/jupyter-ci/mcp"

    async def post(token: str, body: dict[str, Any], sid: str | None = None) -> httpx2.Response:
        headers = {**ACCEPT, "Authorization": f"token {token}",
                   **({"Mcp-Session-Id": sid} if sid else {})}
        async with httpx2.AsyncClient(timeout=120) as client:
            return await client.post(url, json=body, headers=headers)

    opened = await post("alice-token", INIT)
    assert opened.status_code == 200, opened.text
    sid = opened.headers["mcp-session-id"]
    assert (await post("alice-token", {"jsonrpc": "2.0", "method": "notifications/initialized"},
                       sid)).status_code == 202
    listed = rpc("tools/call", 2, {"name": "list_sessions", "arguments": {}})
    # Mallory, signed in as herself, under Alice's session id: as if it did not exist.
    refused = await post("mallory-token", listed, sid)
    assert refused.status_code == 404 and "Session not found" in refused.text, refused.text
    run = rpc("tools/call", 3, {"name": "execute", "arguments": {"code": "print('mallory ran')"}})
    refused = await post("mallory-token", run, sid)
    assert refused.status_code == 404 and "mallory ran" not in refused.text, refused.text
    # Alice's own calls still work; Mallory may open a session of her own.
    mine = await post("alice-token", listed, sid)
    assert mine.status_code == 200 and "Session not found" not in mine.text, mine.text
    assert (await post("mallory-token", INIT)).headers["mcp-session-id"] != sid
