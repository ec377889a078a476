"""The MCP Inspector's CLI against jupyter-ci's MCP server, over stdio and Streamable HTTP.

The Inspector is installed from tests/mcp-inspector (a pinned version) by
scripts/setup-env.sh's test mode; where it is not installed, these tests are skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from tests.nbrun import session_server_config
from tests.test_mcp import jupyter_ci_command

HERE = Path(__file__).parent / "mcp-inspector"
INSPECTOR = HERE / "node_modules" / ".bin" / "mcp-inspector"
# The test set-up installs it: in CI a missing Inspector fails these tests, never skips them.
pytestmark = pytest.mark.skipif(
    not os.environ.get("CI") and (not INSPECTOR.exists() or shutil.which("npx") is None),
    reason="the MCP Inspector is not installed (cd tests/mcp-inspector && npm ci)")


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch) -> Config:
    return session_server_config(monkeypatch, {})


@pytest.fixture
def server(jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
           jp_base_url: str) -> tuple[str, str]:
    return (f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url.rstrip('/')}",
            str(jp_serverapp.identity_provider.token))


async def inspector(*args: str, env: dict[str, str] | None = None) -> Any:
    """Run `npx @modelcontextprotocol/inspector --cli ...` (the local, pinned install)."""
    process = await asyncio.create_subprocess_exec(
        "npx", "--no-install", "@modelcontextprotocol/inspector", "--cli", *args, cwd=HERE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})})
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()[-2000:]
    return json.loads(out)


def stdio_args(url: str) -> list[str]:
    return [jupyter_ci_command(), "mcp", "--url", url]


async def test_the_inspector_lists_the_tools_and_calls_execute_over_stdio(
    server: tuple[str, str],
) -> None:
    url, token = server
    env = {"JUPYTER_CI_TOKEN": token}
    listed = await inspector(*stdio_args(url), "--method", "tools/list", env=env)
    assert "execute" in {tool["name"] for tool in listed["tools"]}
    called = await inspector(*stdio_args(url), "--method", "tools/call", "--tool-name",
                             "execute", "--tool-arg", "code=print(1+1)", env=env)
    assert called["content"][0]["text"].strip() == "2" and not called.get("isError")


async def test_the_inspector_calls_execute_over_the_servers_http_door(
    server: tuple[str, str],
) -> None:
    url, token = server
    http = [f"{url}/jupyter-ci/mcp", "--transport", "http",
            "--header", f"Authorization: token {token}"]
    listed = await inspector(*http, "--method", "tools/list")
    assert "ask" in {tool["name"] for tool in listed["tools"]}
    called = await inspector(*http, "--method", "tools/call", "--tool-name", "execute",
                             "--tool-arg", "code=print(1+1)")
    assert called["content"][0]["text"].strip() == "2" and not called.get("isError")
