"""Finding 2: a broker token buys model calls only, on the provider's path, with few headers.

Each test is the attack model-written code in a kernel could make with its broker token,
against a real Jupyter server with the extension and a fake provider that records what
reached it; without the allowlists the fake sees the request (or the header).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from jupyter_ci.models.broker import ENV_URL
from tests.test_server import CHAT, Upstream, bearer, broker_fetch


def _refusal(response: Any) -> tuple[str, str]:
    """Return the error type and message of a JSON refusal in either provider format."""
    assert response.headers["Content-Type"] == "application/json"
    error = json.loads(response.body)["error"]
    return error["type"], error["message"]


@pytest.mark.parametrize(("method", "path"), [
    ("DELETE", "openai/files/file-abc123"),
    ("GET", "openai/files"),
    ("POST", "openai/files"),
    ("POST", "openai/batches"),
    ("POST", "openai/fine_tuning/jobs"),
    ("GET", "openai/organization/admin_api_keys"),
    ("GET", "openai/organization/users"),
    ("DELETE", "openai/models/ft:gpt-4o:acme:x:1"),
    ("DELETE", "anthropic/v1/files/file_abc"),
    ("GET", "anthropic/v1/organizations/me"),
    ("GET", "anthropic/v1/organizations/api_keys"),
    ("POST", "anthropic/v1/messages/batches"),
    ("GET", "anthropic/v1/messages"),
    ("POST", "openai/chat/completions/extra"),
    ("POST", "openai/"),
])
async def test_routes_outside_the_allowlist_are_refused(
    live_server: Any, upstream: Upstream, token: str, method: str, path: str, capture: Any
) -> None:
    body = b"{}" if method == "POST" else None
    response = await broker_fetch(path, bearer(token), body, method=method)
    assert response.code == 403
    kind, message = _refusal(response)
    assert kind == "permission_error" and "forwards model calls only" in message
    assert response.headers["x-should-retry"] == "false"
    assert upstream.requests == []


@pytest.mark.parametrize("path", [
    "openai/../v1/files",
    "openai/chat/../files",
    "openai/models/..",
    "openai/models/.",
    "openai/%2e%2e/files",
    "openai/models/%2E%2E",
    "openai/models/%2e",
    "openai/models/..%2Ffiles",
    "openai/models/x%2F..%2F..%2Ffiles",
    "openai/models/%2fetc",
    "anthropic/v1/models/..%5Cfiles",
    "anthropic/v1//models",
    "openai/models/%0Aadmin",
    "openai/models/%ff%fe",
])
async def test_paths_that_climb_or_hide_slashes_are_refused(
    live_server: Any, upstream: Upstream, token: str, path: str, capture: Any
) -> None:
    response = await broker_fetch(path, bearer(token), method="GET")
    assert response.code == 400
    kind, message = _refusal(response)
    assert kind == "invalid_request_error" and "refuses" in message
    assert upstream.requests == []


@pytest.mark.parametrize("path", ["openai/models/%252e%252e", "openai/models/a%25b"])
async def test_double_encoding_is_no_id(
    live_server: Any, upstream: Upstream, token: str, path: str
) -> None:
    response = await broker_fetch(path, bearer(token), method="GET")
    assert response.code == 403 and upstream.requests == []


@pytest.mark.parametrize(("path", "upstream_path"), [
    ("openai/models/gpt-4.1", "/v1/models/gpt-4.1"),
    ("openai/models/ft:gpt-4o-mini:acme:run:1a2b", "/v1/models/ft:gpt-4o-mini:acme:run:1a2b"),
    ("openai/models?limit=2", "/v1/models?limit=2"),
    ("anthropic/v1/models/claude-sonnet-4-5", "/v1/models/claude-sonnet-4-5"),
    ("anthropic/v1/models/claude%2Dsonnet%2D4%2D5", "/v1/models/claude-sonnet-4-5"),
])
async def test_model_routes_still_reach_the_provider(
    live_server: Any, upstream: Upstream, token: str, path: str, upstream_path: str
) -> None:
    response = await broker_fetch(path, bearer(token), method="GET")
    assert response.code == 200
    assert [r["path"] for r in upstream.requests] == [upstream_path]


SMUGGLED = {
    "OpenAI-Organization": "org-victim",
    "OpenAI-Project": "proj-victim",
    "anthropic-workspace-id": "wrkspc-victim",
    "X-Forwarded-For": "203.0.113.9",
    "Forwarded": "for=203.0.113.9",
    "X-Real-IP": "203.0.113.9",
    "api-key": "azure-style-key",
    "Proxy-Authorization": "Basic dXNlcjpwYXNz",
    "Cookie": "session=stolen",
    "X-Custom-Anything": "1",
}
KEPT = {
    "Accept": "application/json",
    "User-Agent": "OpenAI/Python 3.54.0",
    "X-Stainless-Retry-Count": "1",
    "X-Stainless-Read-Timeout": "600",
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "prompt-caching-2024-07-31",
    "OpenAI-Beta": "assistants=v2",
}


async def test_smuggled_headers_do_not_reach_the_provider(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    headers = {**bearer(token), **SMUGGLED, **KEPT, "Content-Type": "application/json"}
    response = await broker_fetch("openai/chat/completions", headers, CHAT)
    assert response.code == 200
    got = {name.lower(): value for name, value in upstream.requests[-1]["headers"].items()}
    assert not set(got) & {name.lower() for name in SMUGGLED}
    assert {name.lower(): got[name.lower()] for name in KEPT} == {
        name.lower(): value for name, value in KEPT.items()}
    assert "victim" not in json.dumps(got) and "203.0.113.9" not in json.dumps(got)


async def test_header_that_cannot_be_sent_is_a_json_400(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    headers = {**bearer(token), "anthropic-beta": "caf\u00e9"}
    response = await broker_fetch("anthropic/v1/messages", headers, CHAT)
    assert response.code == 400
    assert "anthropic-beta" in _refusal(response)[1]
    assert upstream.requests == []


async def test_sdks_streaming_and_retrying_pass_the_allowlist(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    """The real SDKs' headers (retry count, timeouts, helpers) get through, and a retry works."""
    import anthropic
    import openai

    overloaded = (529, {"Content-Type": "application/json", "retry-after-ms": "1"},
                  [b'{"type":"error","error":{"type":"overloaded_error","message":"busy"}}'])
    upstream.replies = [overloaded]
    ant = anthropic.AsyncAnthropic(base_url=f"{os.environ[ENV_URL]}/anthropic", api_key=token,
                                   max_retries=1)
    async with ant.messages.stream(model="fake", max_tokens=10,
                                   messages=[{"role": "user", "content": "hi"}]) as stream:
        assert await stream.get_final_text() == "Hello"
    first, second = (r["headers"] for r in upstream.requests)
    assert (first["X-Stainless-Retry-Count"], second["X-Stainless-Retry-Count"]) == ("0", "1")
    assert second["X-Stainless-Helper-Method"] == "stream"
    oai = openai.AsyncOpenAI(base_url=f"{os.environ[ENV_URL]}/openai", api_key=token,
                             max_retries=0)
    assert [m.id async for m in oai.models.list()] == ["fake"]
