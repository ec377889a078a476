"""Standing instructions reach a REST ask's system prompt, redacted like the rest."""

from __future__ import annotations

import pytest
from traitlets.config import Config

from tests.fakellm import FakeLLM, Turn
from tests.nbrun import TEST_KEY, session_server_config
from tests.test_session_ask import ask
from tests.test_sessions import Fetch, new_session

SECRET = "sk-abcdefghijklmnopqrstuvwx123456"


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM) -> Config:
    """The fake model as OpenAI, and standing instructions holding a secret."""
    config = session_server_config(monkeypatch, {
        "OPENAI_API_KEY": TEST_KEY, "OPENAI_BASE_URL": fake.openai_base_url})
    config.JupyterCI.instructions = f"Answer in French.\napi_key = {SECRET}"
    return config


async def test_a_rest_ask_follows_the_servers_standing_instructions(
    jp_fetch: Fetch, fake: FakeLLM
) -> None:
    fake.push(Turn("Bonjour."))
    sid = (await new_session(jp_fetch))["id"]
    events = await ask(jp_fetch, sid, prompt="hello", model="openai:gpt-test")
    assert events[-1][1]["answer"] == "Bonjour."
    system = fake.requests[0].messages[0]["content"]
    assert "## The user's standing instructions" in system and "Answer in French." in system
    assert SECRET not in system
