"""The server's side of tests/test_model_hints.py: a REST ask, and the model service a
notebook's %%ask goes through, say the same of a local model's name sent to OpenAI's cloud,
and name where a failing base URL was set: the server's environment, its key file, the panel.

tests/fakellm.py stands for OpenAI's cloud: the provider table's default URL points at it,
so a server started with no OPENAI_BASE_URL sends there, through the real SDK.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError
from traitlets.config import Config

from jupyter_ci import providers
from jupyter_ci.models.broker import MANAGED
from tests.fakellm import Fail, FakeLLM
from tests.service_fixtures import (
    OPENAI_KEY,
    PROVIDER_VARS,
    live_server,
    refusal,
    token,
    turn_body,
    turn_fetch,
)
from tests.test_models import closed_port
from tests.test_session_ask import ask
from tests.test_sessions import Fetch, new_session

__all__ = ["live_server", "token"]

OLLAMA_URL = "OPENAI_BASE_URL=http://localhost:11434/v1"
PANEL = "jupyter-ci panel"
NOWHERE = f"http://127.0.0.1:{closed_port()}/v1"


@pytest.fixture
def server_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """Provider variables the server starts with: an OpenAI key, no URL (indirect to change)."""
    return getattr(request, "param", {"OPENAI_API_KEY": OPENAI_KEY})


@pytest.fixture
def ci_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The c.JupyterCI section (indirect to add to it)."""
    return {"session_pool": 0, "retries": 0, **getattr(request, "param", {})}


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM, server_env: dict[str, str],
                     ci_config: dict[str, Any], tmp_path: Path) -> Config:
    """Enable the extension; OpenAI's cloud is the fake; only `server_env` is set."""
    cloud = dataclasses.replace(providers.PROVIDERS["openai"], default_url=fake.openai_base_url)
    monkeypatch.setitem(providers.PROVIDERS, "openai", cloud)
    for var in (*PROVIDER_VARS, *MANAGED, "JUPYTER_CI_KEY_FILE"):
        monkeypatch.delenv(var, raising=False)
    for var, value in server_env.items():
        monkeypatch.setenv(var, value)
    # No keys.json of the user's (the default key file) may be read.
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    return Config({"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
                   "JupyterCI": ci_config})


async def failed_ask(jp_fetch: Fetch, model: str) -> dict[str, str]:
    """Ask in a new REST session with `model`; return the error (a 400's, or the result's)."""
    sid = (await new_session(jp_fetch))["id"]
    try:
        result = (await ask(jp_fetch, sid, prompt="hello", model=model))[-1][1]
    except HTTPClientError as refused:  # refused before the ask starts (no key for it)
        assert refused.code == 400 and refused.response is not None
        error: dict[str, str] = json.loads(refused.response.body)
        error.setdefault("hint", error["message"])  # the message holds it, after a line break
    else:
        assert result["status"] == "failed", result
        error = result["error"]
    assert OPENAI_KEY not in json.dumps(error)
    return error


async def test_a_rest_ask_sending_a_local_name_to_the_cloud_is_told_about_local_servers(
    jp_fetch: Fetch, fake: FakeLLM
) -> None:
    fake.push(Fail(404))
    error = await failed_ask(jp_fetch, "openai:llama3.1")
    assert error["type"] == "ModelConfigError" and "'llama3.1' (HTTP 404)" in error["message"]
    assert "'llama3.1' looks like the name of a local model" in error["hint"]
    assert OLLAMA_URL in error["hint"] and PANEL in error["hint"]
    fake.push(Fail(404))
    error = await failed_ask(jp_fetch, "openai:o4-mini")
    assert "'o4-mini' (HTTP 404)" in error["message"] and "local" not in json.dumps(error)
    assert fake.calls() == 2


@pytest.mark.parametrize("server_env", [{}], indirect=True)
async def test_a_rest_ask_with_no_key_for_a_local_name_is_told_about_the_url(
    jp_fetch: Fetch, fake: FakeLLM
) -> None:
    error = await failed_ask(jp_fetch, "openai:qwen2.5-coder:7b")
    assert "no key for openai" in error["message"]
    assert "'qwen2.5-coder:7b' looks like the name of a local model" in error["hint"]
    assert OLLAMA_URL in error["hint"] and "needs no key" in error["hint"]
    error = await failed_ask(jp_fetch, "openai:gpt-4.1")
    assert "looks like" not in error["hint"] and PANEL in error["hint"]
    assert fake.calls() == 0


async def unreachable(token: str) -> str:
    """Send a turn (as a notebook's %%ask does) to a URL nothing answers; return the error."""
    status, lines = await turn_fetch(turn_body("openai:llama3.1"), token)
    kind, message = refusal(lines)
    assert (status, kind) == (502, "ModelUnavailable")
    assert message.startswith(f"Could not connect to OpenAI at {NOWHERE} (")
    assert "looks like" not in message
    return f"{message}\n{lines[0]['error']['hint']}"


@pytest.mark.parametrize("server_env", [{"OPENAI_BASE_URL": NOWHERE}], indirect=True)
async def test_a_url_from_the_servers_environment_is_named(live_server: Any, token: str) -> None:
    text = await unreachable(token)
    assert "set by OPENAI_BASE_URL in the Jupyter server's environment" in text
    assert "where JupyterLab starts" in text


@pytest.mark.parametrize("server_env", [{}], indirect=True)
async def test_a_url_set_in_the_panel_is_named(
    jp_fetch: Fetch, live_server: Any, token: str
) -> None:
    response = await jp_fetch("jupyter-ci", "keys", method="POST", body=json.dumps(
        {"provider": "openai", "key": "", "base_url": NOWHERE}))
    assert "could not reach" in json.loads(response.body)["check"]["message"]
    text = await unreachable(token)
    assert f"set in the {PANEL}" in text


KEY_FILE = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"jupyter-ci-hints-{os.getpid()}.json")


@pytest.fixture
def key_file() -> Any:
    """A private key file holding only a base URL nothing answers at."""
    fd = os.open(KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump({"OPENAI_BASE_URL": NOWHERE}, file)
    yield KEY_FILE
    os.unlink(KEY_FILE)


@pytest.mark.parametrize("server_env", [{}], indirect=True)
@pytest.mark.parametrize("ci_config", [{"key_file": KEY_FILE}], indirect=True)
async def test_a_url_from_the_key_file_is_named(
    key_file: str, live_server: Any, token: str
) -> None:
    text = await unreachable(token)
    assert f"read from the key file {key_file} (c.JupyterCI.key_file" in text
