"""A session's kernel reads busy and idle in Jupyter's /api/kernels, with no second watch of its
messages (server/sessions/activity.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from traitlets.config import Config

from tests.nbrun import session_server_config
from tests.test_sessions import Fetch, new_session, run


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch) -> Config:
    """The extension with its sessions, no provider needed."""
    config: Config = session_server_config(monkeypatch, {})
    return config


async def kernel_model(jp_fetch: Fetch, kernel_id: str) -> dict[str, Any]:
    """Return Jupyter's own description of a kernel."""
    response = await jp_fetch("api", "kernels", kernel_id)
    model: dict[str, Any] = json.loads(response.body)
    return model


async def test_a_session_kernel_says_busy_while_it_runs_and_idle_after(
        jp_fetch: Fetch, jp_serverapp: Any) -> None:
    session = await new_session(jp_fetch)
    kernel_id = session["kernel_id"]
    kernel = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    assert getattr(kernel, "_activity_stream", None) is None  # no second decoding of each message
    before = await kernel_model(jp_fetch, kernel_id)
    assert before["execution_state"] == "idle"
    running = asyncio.ensure_future(run(jp_fetch, session["id"], "import time; time.sleep(1)"))
    await asyncio.sleep(0.5)
    assert (await kernel_model(jp_fetch, kernel_id))["execution_state"] == "busy"
    assert (await running)["status"] == "ok"
    after = await kernel_model(jp_fetch, kernel_id)
    assert after["execution_state"] == "idle"
    assert after["last_activity"] > before["last_activity"]
    restarted = await jp_fetch("jupyter-ci", "sessions", session["id"], "restart",
                               method="POST", body=b"")
    assert restarted.code == 200
    assert (await run(jp_fetch, session["id"], "1 + 1"))["status"] == "ok"
    assert (await kernel_model(jp_fetch, kernel_id))["execution_state"] == "idle"
