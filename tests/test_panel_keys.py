"""Keys pasted in the jupyter-ci panel: held by the server, checked, never shown or sent astray.

A real Jupyter server with the extension and a fake provider (tests/service_fixtures.py).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from jupyter_ci.models.broker import ENV_PROVIDERS
from tests.service_fixtures import (
    ANTHROPIC_KEY,
    NOTHING,
    OPENAI_KEY,
    PASTED,
    Upstream,
    broker_of,
    capture,
    ci_config,
    jp_server_config,
    live_server,
    post_key,
    server_env,
    token,
    told,
    turn_body,
    turn_fetch,
    upstream,
)

__all__ = ["capture", "ci_config", "jp_server_config", "live_server", "server_env", "token",
           "upstream"]



async def kernel_run(km: Any, kernel_id: str, code: str) -> str:
    """Run code in a kernel of the server; return its text outputs (answers included)."""
    client = km.get_kernel(kernel_id).client()
    client.start_channels()
    out: list[str] = []

    def hook(msg: dict[str, Any]) -> None:
        content = msg["content"]
        if msg["msg_type"] == "stream":
            out.append(content["text"])
        elif msg["msg_type"] == "error":
            out.append("\n".join(content["traceback"]))
        elif msg["msg_type"] in ("display_data", "update_display_data", "execute_result"):
            out.append(str(content["data"].get("text/markdown")
                           or content["data"].get("text/plain", "")))

    try:
        await client.wait_for_ready(timeout=60)
        await client.execute_interactive(code, output_hook=hook, timeout=60)
    finally:
        client.stop_channels()
    return "\n".join(out)




@pytest.mark.parametrize("server_env", [NOTHING], indirect=True)
async def test_a_key_pasted_in_the_panel_serves_a_kernel_started_before_it(
    live_server: Any, jp_fetch: Any, upstream: Upstream, capture: Any
) -> None:
    km = live_server.kernel_manager
    kernel_id = await km.start_kernel()
    try:
        before = await kernel_run(km, kernel_id, "%load_ext jupyter_ci\n%ask say hello")
        assert "No model is configured" in before and "jupyter-ci panel" in before
        status, reply = await post_key(jp_fetch, {
            "provider": "openai", "key": PASTED, "base_url": f"{upstream.url}/v1"})
        assert status == 200 and reply["problem"] is None
        assert reply["default_model"] == "openai:gpt-5.5" and reply["saved"] == ""
        config = await jp_fetch("jupyter-ci", "config")
        assert PASTED not in config.body.decode()
        # The kernel started without the provider: it asks the broker, then asks the model.
        after = await kernel_run(km, kernel_id, "%ask say hello")
        assert "Hello" in after
        assert upstream.requests[-1]["headers"]["Authorization"] == f"Bearer {PASTED}"
        seen = await kernel_run(km, kernel_id, (
            "import os\nprint('kernel env has it:', "
            f"{PASTED!r} in open('/proc/self/environ').read() + repr(dict(os.environ)))"))
        assert "kernel env has it: False" in seen
    finally:
        await km.shutdown_kernel(kernel_id, now=True)
    # New kernels learn the provider from their environment; the key is not in it.
    assert told().kernels[ENV_PROVIDERS] == "openai"
    assert PASTED not in repr(dict(os.environ))
    assert PASTED not in capture.text


async def test_a_base_url_given_without_a_key_never_gets_the_servers_key(
    live_server: Any, jp_fetch: Any, upstream: Upstream, token: str
) -> None:
    # Whoever can reach the route (a kernel that read the server's token, say) must not
    # be able to point the server's own key at a host of theirs.
    status, _ = await post_key(jp_fetch, {"provider": "openai",
                                          "base_url": f"{upstream.url}/elsewhere/v1"})
    assert status == 200
    status, lines = await turn_fetch(turn_body(), token)
    assert status == 200 and "reply" in lines[-1]
    sent = upstream.requests[-1]
    assert sent["path"] == "/elsewhere/v1/chat/completions"
    assert OPENAI_KEY not in json.dumps(sent["headers"])
    # Anthropic needs a key: a URL alone is refused and its key stays where it was.
    status, reply = await post_key(jp_fetch, {"provider": "anthropic",
                                              "base_url": f"{upstream.url}/x"})
    assert status == 400 and reply["message"] == "Paste an Anthropic key."
    broker = broker_of(live_server)
    assert broker.providers["anthropic"].api_key == ANTHROPIC_KEY


@pytest.mark.parametrize("body, expected", [
    ({"provider": "nobody", "key": PASTED}, "Unknown provider"),
    ({"provider": "openai", "key": "sk with spaces " + PASTED}, "not a usable OpenAI key"),
    ({"provider": "openai", "key": PASTED, "base_url": "file:///etc"}, "http:// or https://"),
    ({"provider": "openai", "key": ["list"]}, "Send JSON"),
    ({"provider": "openai"}, "Paste an OpenAI key (or only a base URL"),
])
async def test_a_wrong_key_request_says_what_is_wrong_without_the_key(
    jp_fetch: Any, body: dict[str, Any], expected: str, capture: Any
) -> None:
    status, reply = await post_key(jp_fetch, body)
    assert status == 400 and expected in reply["message"]
    assert PASTED not in capture.text


async def test_the_keys_route_needs_jupyter_auth(live_server: Any, jp_base_url: str) -> None:
    url = f"http://127.0.0.1:{live_server.port}{jp_base_url}jupyter-ci/keys"
    with pytest.raises(HTTPClientError) as err:
        await AsyncHTTPClient().fetch(url, method="POST", body=json.dumps(
            {"provider": "openai", "key": PASTED}))
    assert err.value.code in (401, 403)
    broker = broker_of(live_server)
    assert broker.providers["openai"].api_key == OPENAI_KEY


@pytest.mark.parametrize("server_env", [NOTHING], indirect=True)
async def test_remember_saves_the_key_to_a_private_file_the_next_start_reads(
    jp_fetch: Any, jp_data_dir: Path, upstream: Upstream
) -> None:
    from jupyter_ci.server.broker.keys import default_key_file, key_file_to_read, stored_keys

    # No key file configured: the default one, in the user's Jupyter data directory.
    path = default_key_file()
    assert path.is_relative_to(jp_data_dir) and key_file_to_read("") == ""
    # A base URL of the fake provider: the key is checked with it, never on the internet.
    status, reply = await post_key(jp_fetch, {"provider": "anthropic", "key": PASTED,
                                              "base_url": upstream.url, "remember": True})
    assert status == 200 and reply["saved"] == f"saved to {path}"
    assert path.stat().st_mode & 0o777 == 0o600
    kept = {"ANTHROPIC_API_KEY": PASTED, "ANTHROPIC_BASE_URL": upstream.url}
    assert json.loads(path.read_text()) == kept
    assert key_file_to_read("") == str(path)
    assert stored_keys(str(path), {}, logging.getLogger("test")) == kept

