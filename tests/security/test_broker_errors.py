"""Finding 5: broker errors are JSON in our words; bad keys are refused by name at start-up.

A key with a line break used to come back in a 502 body and the log (the HTTP library's
error quotes the header it refused); a non-ASCII key or header gave an HTML 500 with a
traceback; OPTIONS, HEAD and undecodable paths answered HTML.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPResponse

from jupyter_ci import providers
from jupyter_ci.models.broker import ENV_PROVIDERS, ENV_URL
from jupyter_ci.server.broker import Broker
from tests.test_server import CHAT, Upstream, bearer, broker_fetch

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
    assert os.environ[ENV_PROVIDERS] == ""
    assert json.loads((await jp_fetch("jupyter-ci", "config")).body)["models"] == []
    for path, headers in (("openai/chat/completions", bearer(token)),
                          ("anthropic/v1/messages", {"x-api-key": token})):
        response = await broker_fetch(path, headers, CHAT)
        assert response.code == 401
        assert response.headers["Content-Type"] == "application/json"
        message = json.loads(response.body)["error"]["message"]
        assert "is not a usable key" in message
        for fragment in FRAGMENTS:
            assert fragment not in response.body.decode()
            assert fragment not in capture.text and fragment not in started
    assert upstream.requests == []


def test_keys_from_a_key_file_are_checked_too() -> None:
    broker = Broker.take_from_environ({}, {"OPENAI_API_KEY": "sk-has space-inside"})
    assert broker.configured() == [] or "openai" not in [p.name for p in broker.configured()]
    assert any("OPENAI_API_KEY" in problem and "space-inside" not in problem
               for problem in broker.misconfigured())
    assert Broker.take_from_environ({"OPENAI_API_KEY": "  sk-ok-1234\n"}).providers[
        "openai"].configured


async def _send(method: str, path: str, headers: dict[str, str] | None = None) -> HTTPResponse:
    """Send any method to the broker; return the response, even an error."""
    base_url = os.environ[ENV_URL]
    try:
        return await AsyncHTTPClient().fetch(
            f"{base_url}{path}", method=method, headers=headers, request_timeout=20,
            allow_nonstandard_methods=True, body=None)
    except HTTPClientError as err:
        assert err.response is not None
        return err.response


@pytest.mark.parametrize("with_token", [False, True])
@pytest.mark.parametrize(("method", "path", "status"), [
    ("OPTIONS", "/openai/chat/completions", 403),
    ("HEAD", "/openai/models", 403),
    ("TRACE", "/openai/models", 405),
    ("PROPFIND", "/anthropic/v1/models", 405),
    ("GET", "/openai/models/%ff%fe", 400),
    ("GET", "/%ff/models", 404),
    ("GET", "", 404),
    ("GET", "/", 404),
])
async def test_every_broker_error_is_json(
    live_server: Any, upstream: Upstream, token: str, method: str, path: str, status: int,
    with_token: bool, capture: Any,
) -> None:
    response = await _send(method, path, bearer(token) if with_token else None)
    # Without a token, everything the broker serves is refused first (405: before auth).
    assert response.code == (status if with_token or status == 405 else 403)
    assert response.headers["Content-Type"] == "application/json"
    if method != "HEAD":  # HEAD answers carry no body, by HTTP's rules
        error = json.loads(response.body)["error"]
        assert error["message"] and "Traceback" not in error["message"]
    assert upstream.requests == []


async def test_a_bug_in_the_broker_answers_json_without_details(
    live_server: Any, token: str, monkeypatch: pytest.MonkeyPatch, capture: Any
) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("internal detail: Authorization: Bearer sk-test-should-not-show")

    monkeypatch.setattr(Broker, "outgoing", broken)
    response = await broker_fetch("openai/chat/completions", bearer(token), CHAT)
    assert response.code == 500
    assert response.headers["Content-Type"] == "application/json"
    assert "internal detail" not in response.body.decode()
    assert "cannot handle this request (HTTP 500" in json.loads(response.body)["error"]["message"]


# A base URL with an impossible port or another scheme no longer reaches the relay: it
# leaves its provider unconfigured at start (tests/security/test_input_attacks.py).
@pytest.mark.parametrize(("server_env", "failure"), [
    ({"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, "the connection failed"),
], indirect=["server_env"])
async def test_upstream_failures_are_told_in_our_words(
    live_server: Any, token: str, failure: str, capture: Any
) -> None:
    response = await broker_fetch("anthropic/v1/messages", {"x-api-key": token}, CHAT)
    assert response.code == 502
    message = json.loads(response.body)["error"]["message"]
    assert message.startswith("The jupyter-ci broker could not reach ")
    assert message.endswith(f": {failure}.")
    # None of httpx's or the OS's own text (which may quote URLs and headers).
    for library_text in ("Errno", "refused", "Invalid port", "Request URL", "protocol"):
        assert library_text not in message


def test_a_base_url_with_an_impossible_port_is_named_at_start() -> None:
    broker = Broker.take_from_environ({"ANTHROPIC_BASE_URL": "http://127.0.0.1:99999"})
    assert any("ANTHROPIC_BASE_URL has no valid port (1-65535)" in problem
               for problem in broker.misconfigured())


def test_error_types_are_the_providers_own() -> None:
    from jupyter_ci.server.errors import ForbiddenRoute
    from jupyter_ci.server.handlers import error_reply

    assert providers.PROVIDERS["anthropic"].error_format == "anthropic"
    status, body = error_reply("anthropic", ForbiddenRoute("no"))
    assert (status, body) == (403, {"type": "error",
                                    "error": {"type": "permission_error", "message": "no"}})
