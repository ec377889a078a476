"""The HTTP MCP door under another host name: served where Jupyter serves that host (a Hub's or
Binder's name, with allow_remote_access), refused where Jupyter refuses it (DNS rebinding)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from traitlets.config import Config

from tests.nbrun import session_server_config

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "host-test", "version": "1"}}}
ACCEPT = "application/json, text/event-stream"


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Config:
    config = session_server_config(monkeypatch, {})
    config.ServerApp.allow_remote_access = request.param
    return config


async def initialize(port: int, base_url: str, token: str, host: str) -> httpx.Response:
    """Send an MCP initialize to the door with `host` as the request's Host."""
    async with httpx.AsyncClient(timeout=60) as client:
        return await client.post(
            f"http://127.0.0.1:{port}{base_url.rstrip('/')}/jupyter-ci/mcp", json=INITIALIZE,
            headers={"Host": host, "Authorization": f"token {token}", "Accept": ACCEPT})


@pytest.mark.parametrize("jp_server_config", [True], indirect=True)
async def test_a_host_jupyter_serves_reaches_the_door(
    jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
    jp_base_url: str
) -> None:
    reply = await initialize(http_server_port[-1], jp_base_url,
                             str(jp_serverapp.identity_provider.token), "hub.example.org")
    assert reply.status_code == 200, reply.text
    assert "jupyter-ci" in reply.text and reply.headers.get("mcp-session-id")


@pytest.mark.parametrize("jp_server_config", [False], indirect=True)
async def test_a_rebound_host_is_refused_as_jupyter_refuses_it(
    jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
    jp_base_url: str
) -> None:
    token = str(jp_serverapp.identity_provider.token)
    refused = await initialize(http_server_port[-1], jp_base_url, token, "evil.example.com")
    assert refused.status_code == 403 and not refused.headers.get("mcp-session-id")
    # The control: the same request under the server's own name is served.
    served = await initialize(http_server_port[-1], jp_base_url, token, "127.0.0.1")
    assert served.status_code == 200, served.text
