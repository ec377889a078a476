"""An ask is activity: a long ask without steps is not culled as soon as it ends (issue 24.14)."""

from __future__ import annotations

import asyncio

import pytest
from traitlets.config import Config

from tests.fakellm import FakeLLM, Turn
from tests.fakellm_wire import Hang
from tests.nbrun import TEST_KEY, session_server_config
from tests.test_session_ask import ask
from tests.test_sessions import Fetch, call, new_session


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM) -> Config:
    """The fake model as OpenAI; sessions culled after one idle second."""
    config = session_server_config(monkeypatch, {
        "OPENAI_API_KEY": TEST_KEY, "OPENAI_BASE_URL": fake.openai_base_url})
    config.JupyterCI.session_idle_timeout = 1.0
    return config


async def test_a_long_ask_without_steps_counts_as_activity(jp_fetch: Fetch, fake: FakeLLM) -> None:
    sid = (await new_session(jp_fetch))["id"]
    fake.push(Hang(1.5), Turn("Thought long."))  # the first call hangs, the retry answers
    events = await ask(jp_fetch, sid, prompt="think", model="openai:gpt-test")
    assert events[-1][1]["answer"] == "Thought long."
    await asyncio.sleep(0.6)  # a few rounds of the culler (every 0.25 s with this timeout)
    assert (await call(jp_fetch, "GET", sid))[0] == 200
