"""Finding 5: service errors are JSON in our words; bad keys are refused by name at start-up.

A key with a line break used to come back in a 502 body and the log (the HTTP library's
error quotes the header it refused); a non-ASCII key or header gave an HTML 500 with a
traceback; OPTIONS, HEAD and undecodable paths answered HTML.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from jupyter_ci.models.broker import ENV_PROVIDERS, INFO_PATH
from jupyter_ci.models.turn_wire import TURN_PATH
from jupyter_ci.server.broker.broker import Broker
from jupyter_ci.server.broker.model_service import ModelService
from tests.service_fixtures import (
    Upstream,
    bearer,
    refusal,
    service_fetch,
    told,
    turn_body,
    turn_fetch,
)

NEWLINE_KEY = "sk-test-first-half-1234\nsk-test-second-half-5678"
UNICODE_KEY = "sk-ant-t\u00e9st-\u043a\u043b\u044e\u0447-0123456789"
FRAGMENTS = ("first-half", "second-half", "t\u00e9st", "\u043a\u043b\u044e\u0447")


@pytest.mark.parametrize("server_env", [
    {"OPENAI_API_KEY": NEWLINE_KEY, "ANTHROPIC_API_KEY": UNICODE_KEY},
], indirect=True)
async def test_unusable_keys_are_refused_at_start_by_name_only(
    capfd: pytest.CaptureFixture[str], live_server: Any, jp_fetch: Any, upstream: Upstream,
    token: str, capture: Any,
) -> None:
    # The extension logs through its own handler while the server starts (capfd is first).
    started = capfd.readouterr().err + "\n".join(
        r.getMessage() for r in capture.get_records("setup"))
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        assert f"{var} is not a usable API key" in started
    # Neither provider is configured, although both have a base URL.
    assert told().kernels[ENV_PROVIDERS] == ""
    assert json.loads((await jp_fetch("jupyter-ci", "config")).body)["models"] == []
    for model in ("openai:gpt-test", "anthropic:claude-test"):
        status, lines = await turn_fetch(turn_body(model), token)
        kind, message = refusal(lines)
        assert (status, kind) == (400, "ModelConfigError")
        assert "is not a usable key" in message
        for fragment in FRAGMENTS:
            assert fragment not in json.dumps(lines, ensure_ascii=False)
            assert fragment not in capture.text and fragment not in started
    assert upstream.requests == []


def test_keys_from_a_key_file_are_checked_too() -> None:
    broker = Broker.take_from_environ({}, {"OPENAI_API_KEY": "sk-has space-inside"})
    assert "openai" not in [p.name for p in broker.configured()]
    assert any("OPENAI_API_KEY" in problem and "space-inside" not in problem
               for problem in broker.misconfigured())
    assert Broker.take_from_environ({"OPENAI_API_KEY": "  sk-ok-1234\n"}).providers[
        "openai"].configured


@pytest.mark.parametrize("with_token", [False, True])
@pytest.mark.parametrize(("method", "path", "without_token"), [
    # The turn route judges the credential first (before a byte of the body), …
    ("OPTIONS", TURN_PATH, 403),
    ("GET", TURN_PATH, 403),
    ("PUT", TURN_PATH, 403),
    ("DELETE", TURN_PATH, 403),
    # … _info serves GET only; methods tornado does not know are refused before any handler.
    ("POST", INFO_PATH, 405),
    ("OPTIONS", INFO_PATH, 405),
    ("HEAD", INFO_PATH, 405),
    ("TRACE", TURN_PATH, 405),
    ("PROPFIND", INFO_PATH, 405),
])
async def test_every_service_error_is_json(
    live_server: Any, upstream: Upstream, token: str, method: str, path: str,
    without_token: int, with_token: bool, capture: Any,
) -> None:
    body = b"{}" if method in ("POST", "PUT") else None
    response = await service_fetch(path, bearer(token) if with_token else None, body,
                                   method=method)
    assert response.code == (405 if with_token else without_token)
    assert response.headers["Content-Type"] == "application/json"
    if method != "HEAD":  # HEAD answers carry no body, by HTTP's rules
        error = json.loads(response.body)["error"]
        assert error["message"] and "Traceback" not in error["message"]
    assert upstream.requests == []


async def test_a_bug_in_the_service_answers_json_without_details(
    live_server: Any, token: str, monkeypatch: pytest.MonkeyPatch, capture: Any
) -> None:
    async def broken(*args: Any) -> None:
        raise RuntimeError("internal detail: Authorization: Bearer sk-test-should-not-show")

    monkeypatch.setattr(ModelService, "turn", broken)
    response = await service_fetch(TURN_PATH, bearer(token), json.dumps(turn_body()).encode())
    assert response.code == 500
    assert response.headers["Content-Type"] == "application/json"
    assert "internal detail" not in response.body.decode()
    error = json.loads(response.body)["error"]
    assert error["type"] == "ModelUnavailable"
    assert "cannot handle this request (HTTP 500" in error["message"]


@pytest.mark.parametrize("server_env", [{"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}],
                         indirect=True)
@pytest.mark.parametrize("ci_config", [{"retries": 0}])
async def test_provider_failures_are_told_without_the_key(
    live_server: Any, token: str, capture: Any
) -> None:
    status, lines = await turn_fetch(turn_body("anthropic:claude-test"), token)
    kind, message = refusal(lines)
    assert (status, kind) == (502, "ModelUnavailable")
    assert message.startswith("Could not connect to Anthropic at http://127.0.0.1:9 ")
    hint = lines[0]["error"]["hint"]
    # The hint names where the URL was set (the server's environment) and no local server.
    assert "it was set by ANTHROPIC_BASE_URL" in hint and "ollama" not in hint.lower()
    for text in ("Traceback", "Authorization", "x-api-key", "Request URL"):
        assert text not in message


def test_a_base_url_with_an_impossible_port_is_named_at_start() -> None:
    broker = Broker.take_from_environ({"ANTHROPIC_BASE_URL": "http://127.0.0.1:99999"})
    assert any("ANTHROPIC_BASE_URL has no valid port (1-65535)" in problem
               for problem in broker.misconfigured())
