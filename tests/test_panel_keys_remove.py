"""The panel's Remove (issue 32.3: the folded key form opens to change or remove a key):
`DELETE /jupyter-ci/keys?provider=` forgets a provider's key and base URL in the server and in
the key file the next start reads; the reply names no key. A real Jupyter server with the
extension and the fake provider of tests/service_fixtures.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from tests.service_fixtures import (
    NOTHING,
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
    turn_body,
    turn_fetch,
    upstream,
)

__all__ = ["capture", "ci_config", "jp_server_config", "live_server", "server_env", "token",
           "upstream"]


async def delete_key(jp_fetch: Any, provider: str) -> tuple[int, dict[str, Any]]:
    """DELETE /jupyter-ci/keys?provider= as the panel does; return the status and reply."""
    try:
        response = await jp_fetch("jupyter-ci", "keys", method="DELETE",
                                  params={"provider": provider})
    except HTTPClientError as err:
        assert err.response is not None
        response = err.response
    text = response.body.decode()
    assert PASTED not in text
    return response.code, json.loads(text)


@pytest.mark.parametrize("server_env", [NOTHING], indirect=True)
async def test_remove_forgets_a_remembered_key_in_the_server_and_its_file(
    jp_fetch: Any, jp_data_dir: Path, upstream: Upstream, live_server: Any, token: str,
    capture: Any,
) -> None:
    from jupyter_ci.server.broker.keys import default_key_file

    path = default_key_file()
    # Another variable in the file is the user's: it stays.
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"ANTHROPIC_API_KEY": "sk-ant-kept-1234"}))
    path.chmod(0o600)
    status, reply = await post_key(jp_fetch, {"provider": "openai", "key": PASTED,
                                              "base_url": f"{upstream.url}/v1", "remember": True})
    assert status == 200 and json.loads(path.read_text())["OPENAI_API_KEY"] == PASTED
    assert (await turn_fetch(turn_body(), token))[0] == 200

    status, reply = await delete_key(jp_fetch, "openai")
    assert status == 200
    assert reply["removed"].startswith(f"OpenAI key and base URL removed from the server. "
                                       f"Removed from {path} too.")
    assert not [p for p in reply["providers"] if p["name"] == "openai" and p["configured"]]
    assert json.loads(path.read_text()) == {"ANTHROPIC_API_KEY": "sk-ant-kept-1234"}
    provider = broker_of(live_server).providers["openai"]
    assert provider.api_key == "" and not provider.configured
    # Asks through it are refused from now on, with what to do.
    status, lines = await turn_fetch(turn_body(), token)
    assert status == 400 and "no key for openai" in lines[0]["error"]["message"]


async def test_remove_of_an_unknown_provider_is_a_400_naming_the_known(jp_fetch: Any) -> None:
    status, reply = await delete_key(jp_fetch, "nosuch")
    assert status == 400 and "openai" in reply["message"] and "anthropic" in reply["message"]


async def test_a_remove_without_jupyters_token_is_refused_and_keeps_the_key(
    jp_fetch: Any, jp_base_url: str, http_server_port: Any, live_server: Any
) -> None:
    """What a web page in the user's browser can send: no token (nor an XSRF cookie)."""
    from tornado.httpclient import AsyncHTTPClient

    url = (f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url.rstrip('/')}"
           "/jupyter-ci/keys?provider=openai")
    response = await AsyncHTTPClient().fetch(url, method="DELETE", raise_error=False)
    assert response.code == 403
    assert broker_of(live_server).providers["openai"].configured
