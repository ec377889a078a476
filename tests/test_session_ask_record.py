"""A REST ask through the model service is recorded like %%ask (c.JupyterCI.record_dir)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from traitlets.config import Config

from tests.fakellm import FakeLLM, Turn
from tests.nbrun import TEST_KEY, session_server_config
from tests.test_session_ask import ask, code
from tests.test_sessions import Fetch, new_session


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "recorded"


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM, folder: Path) -> Config:
    config = session_server_config(monkeypatch, {
        "OPENAI_API_KEY": TEST_KEY, "OPENAI_BASE_URL": fake.openai_base_url})
    config.JupyterCI.record_dir = str(folder)
    return config


async def test_a_rest_ask_is_recorded_turn_by_turn_without_the_key(
        jp_fetch: Fetch, fake: FakeLLM, folder: Path) -> None:
    fake.push(code("print(6 * 7)"), Turn("It is **42**."))
    sid = (await new_session(jp_fetch))["id"]
    events = await ask(jp_fetch, sid, prompt="multiply six by seven")
    assert events[-1][1]["status"] == "done"
    [written] = list(folder.iterdir())
    recorded = json.loads(written.read_text())
    assert recorded["prompt"] == "multiply six by seven"
    assert recorded["model"] == "openai:gpt-test"
    assert [t["text"] for t in recorded["turns"]] == ["", "It is **42**."]
    assert TEST_KEY not in written.read_text()
