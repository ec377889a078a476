"""What `run_tool_call` gives the model when the kernel died, or had to be restarted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_ci.client import AsyncClient, Execution
from jupyter_ci.client.formats import tool_result
from jupyter_ci.server.sessions import executor

DEAF = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n"


@pytest.fixture
def jp_server_config() -> Config:
    return Config({"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
                   "JupyterCI": {"session_pool": 0, "session_sandbox": "never"}})


@pytest.fixture
def server(jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
           jp_base_url: str) -> tuple[str, str]:
    """The live server's URL and token (http_server_client makes it listen)."""
    return (f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url}",
            str(jp_serverapp.identity_provider.token))


def call(code: str) -> dict[str, Any]:
    return {"id": "call_1", "type": "function", "function": {
        "name": "python", "arguments": json.dumps({"code": code})}}


async def test_a_dead_kernel_is_said_to_the_model_with_what_to_do(
    server: tuple[str, str],
) -> None:
    url, token = server
    async with AsyncClient(url, token) as client, await client.session() as py:
        died = await py.run_tool_call(call("import os\nos._exit(1)"))
        after = await py.run_tool_call({"type": "tool_use", "id": "toolu_1", "name": "python",
                                        "input": {"code": "1"}})
    text = died[0]["content"]
    assert "KernelDied" in text and "variables" in text and "restart" in text, text
    assert after["is_error"] is True
    assert "the kernel died" in after["content"][0]["text"], after


def test_a_dead_result_without_outputs_is_not_empty() -> None:
    block = tool_result("anthropic", "t1", Execution("dead"))
    assert block["is_error"] is True
    assert block["content"][0]["text"].startswith("KernelDied: the kernel died"), block


async def test_a_restart_after_a_deaf_run_tells_the_model_its_variables_are_gone(
    server: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(executor, "INTERRUPT_GRACE_S", 2.0)
    url, token = server
    async with AsyncClient(url, token) as client, await client.session() as py:
        messages = await py.run_tool_call(call(DEAF), timeout=1)
        after = await py.run_tool_call(call("print('still here')"))
    text = messages[0]["content"]
    assert "kernel restarted, variables lost" in text, text
    assert "intact" not in text
    assert after[0]["content"] == "still here"
