"""Over MCP, a session whose kernel died says which MCP tool to go on with (not the Python
client's `Session.restart()`, which an MCP client cannot call), and that tool works."""

from __future__ import annotations

from typing import Any

import pytest
from traitlets.config import Config

from jupyter_ci.mcp.results import RESTART_SESSION
from tests.nbrun import session_server_config
from tests.test_mcp import TRANSPORTS, texts


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch) -> Config:
    config: Config = session_server_config(monkeypatch, {})
    # The server's restarter would revive the killed kernel, and on a loaded machine could
    # do so before the run sees it dead (the run then waits for its timeout): not here.
    config.KernelRestarter.time_to_dead = 120.0
    return config


@pytest.fixture
def server(jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
           jp_base_url: str) -> tuple[str, str]:
    return (f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url.rstrip('/')}",
            str(jp_serverapp.identity_provider.token))


async def test_a_dead_kernel_names_the_mcp_tool_to_go_on_with(server: tuple[str, str]
                                                              ) -> None:
    async with TRANSPORTS["http"](*server) as mcp:
        died = await mcp.call_tool("execute", {"code": "import os; os._exit(1)"})
        again = await mcp.call_tool("execute", {"code": "1 + 1"})  # the same dead session
        for result in (died, again):
            assert result.is_error
            said = texts(result)
            assert "Session.restart()" not in said, said
            assert RESTART_SESSION in said and "start_session" in said, said
        # What it says works: a new default session runs the code.
        assert not (await mcp.call_tool("start_session", {})).is_error
        after = await mcp.call_tool("execute", {"code": "1 + 1"})
        assert not after.is_error and "2" in texts(after), texts(after)
