"""A REST ask never falls back to c.JupyterCI.fallback_model: that is a demo notebook's."""

from __future__ import annotations

import pytest
from traitlets.config import Config

from tests.nbrun import session_server_config
from tests.test_sessions import Fetch, call, new_session


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch) -> Config:
    """No provider key, no model, and a fallback a notebook would replay."""
    config = session_server_config(monkeypatch, {})
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    config.JupyterCI.model = ""
    config.JupyterCI.fallback_model = "replay:recordings"
    return config


async def test_a_rest_ask_with_no_model_says_what_to_set_instead_of_replaying(
        jp_fetch: Fetch) -> None:
    sid = (await new_session(jp_fetch))["id"]
    status, reply = await call(jp_fetch, "POST", sid, "ask", body={"prompt": "hi"})
    assert status == 400, reply
    assert "No model is configured" in reply["message"] and "replay" not in reply["message"]
