"""A key pasted in the panel is checked with its provider (a model list) before the form says
"saved": a refused key is not kept, an unreachable URL is named as the user typed it."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.models.broker import ENV_URL
from tests.service_fixtures import told
from tests.test_server import (
    NOTHING,
    OPENAI_KEY,
    PASTED,
    Upstream,
    capture,
    ci_config,
    jp_server_config,
    live_server,
    post_key,
    server_env,
    upstream,
)

__all__ = ["capture", "ci_config", "jp_server_config", "live_server", "server_env", "upstream"]

PROVIDER_SAYS = b'{"error": {"message": "Incorrect API key provided: sk-pas***9876"}}'


def nowhere() -> str:
    """Return a base URL on a local port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def held(server: Any, provider: str) -> tuple[str, str]:
    """Return the key and base URL the broker holds for a provider."""
    found = server.web_app.settings["jupyter_ci_broker"].providers[provider]
    return found.api_key, found.base_url


async def test_a_key_is_checked_by_listing_models_with_it(
    jp_fetch: Any, jp_serverapp: Any, upstream: Upstream, capture: Any
) -> None:
    status, reply = await post_key(jp_fetch, {"provider": "openai", "key": PASTED,
                                              "base_url": f"{upstream.url}/v1"})
    assert status == 200
    assert reply["check"] == {"ok": True,
                              "message": f"Checked: {upstream.url}/v1 answered (1 model)."}
    [listed] = upstream.requests
    assert (listed["method"], listed["path"]) == ("GET", "/v1/models")
    assert listed["headers"]["Authorization"] == f"Bearer {PASTED}"
    assert held(jp_serverapp, "openai") == (PASTED, f"{upstream.url}/v1")


async def test_an_anthropic_key_is_checked_as_its_sdk_lists_models(
    jp_fetch: Any, upstream: Upstream
) -> None:
    status, reply = await post_key(jp_fetch, {"provider": "anthropic", "key": PASTED,
                                              "base_url": upstream.url})
    assert status == 200 and reply["check"]["ok"] is True
    [listed] = upstream.requests
    assert listed["path"] == "/v1/models"
    assert listed["headers"]["X-Api-Key"] == PASTED
    assert listed["headers"]["Anthropic-Version"] == "2023-06-01"


async def test_an_unreachable_url_is_named_as_typed_and_kept(
    jp_fetch: Any, jp_serverapp: Any, capture: Any
) -> None:
    url = nowhere()
    status, reply = await post_key(jp_fetch, {"provider": "openai", "key": PASTED,
                                              "base_url": url})
    assert status == 200 and reply["check"]["ok"] is False
    message = reply["check"]["message"]
    assert f"could not reach {url}: the connection failed" in message
    # The user's URL, never the broker's (where kernels send their requests).
    assert told().kernels[ENV_URL] not in message and "broker" not in message
    # Kept: a local server may start later.
    assert held(jp_serverapp, "openai") == (PASTED, url)
    assert reply["problem"] is None


@pytest.mark.parametrize("status", [401, 403])
async def test_a_key_the_provider_refuses_is_said_so_and_not_kept(
    jp_fetch: Any, jp_serverapp: Any, jp_data_dir: Path, upstream: Upstream, status: int,
    capture: Any,
) -> None:
    upstream.replies.append((status, {"Content-Type": "application/json"}, [PROVIDER_SAYS]))
    code, reply = await post_key(jp_fetch, {"provider": "openai", "key": PASTED,
                                            "base_url": f"{upstream.url}/v2", "remember": True})
    assert code == 400
    assert reply["message"] == (
        f"OpenAI refused this key at {upstream.url}/v2 (HTTP {status}): it was not saved. "
        "Check the key and paste it again.")
    # The server's own key and URL stay; nothing is written; the provider's words stay out.
    assert held(jp_serverapp, "openai") == (OPENAI_KEY, f"{upstream.url}/v1")
    assert list(jp_data_dir.rglob("keys.*")) == []
    assert "Incorrect" not in json.dumps(reply) and "Incorrect" not in capture.text


@pytest.mark.parametrize("server_env", [NOTHING], indirect=True)
async def test_a_url_alone_that_wants_a_key_says_so(
    jp_fetch: Any, jp_serverapp: Any, upstream: Upstream
) -> None:
    upstream.replies.append((401, {}, [PROVIDER_SAYS]))
    code, reply = await post_key(jp_fetch, {"provider": "openai", "base_url": upstream.url})
    assert code == 400
    assert reply["message"].startswith(f"{upstream.url} wants a key (HTTP 401): nothing was saved")
    assert "authorization" not in {k.lower() for k in upstream.requests[0]["headers"]}
    assert held(jp_serverapp, "openai") == ("", "https://api.openai.com/v1")


async def test_a_url_without_a_model_list_is_kept_with_a_warning(
    jp_fetch: Any, upstream: Upstream
) -> None:
    upstream.replies.append((404, {}, [b"not here"]))
    code, reply = await post_key(jp_fetch, {"provider": "openai", "key": PASTED,
                                            "base_url": f"{upstream.url}/api"})
    assert code == 200
    assert reply["check"] == {"ok": False, "message": (
        f"{upstream.url}/api has no model list (HTTP 404): is the base URL right? "
        "OpenAI-compatible servers usually end in /v1.")}
