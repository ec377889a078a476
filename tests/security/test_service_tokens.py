"""Finding 2: each kernel holds its own model credential, which dies with the kernel.

Real kernels of a real Jupyter server: the credentials are read the way model-written code
would read them (from the kernel's own environment), then presented with a turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import httpx
import pytest
from tornado.httpclient import HTTPClientError

from jupyter_ci.models.broker import ENV_SOCKET, ENV_TOKEN, ENV_URL
from jupyter_ci.models.turn_wire import TURN_PATH
from jupyter_ci.server.broker.kernels import SERVER_SET
from jupyter_ci.server.sandbox.box import SOCKET_DIR
from jupyter_ci.server.sandbox.environ import ENV_BROKER_SOCKET, ENV_HIDE
from tests.service_fixtures import (
    Upstream,
    bearer,
    broker_of,
    kernel_output,
    turn_body,
    turn_fetch,
)

READ_TOKEN = f"import os; print(os.environ.get({ENV_TOKEN!r}, 'none'))"


async def kernel_token(km: Any, kernel_id: str) -> str:
    """Return the credential the kernel's own code sees."""
    return (await kernel_output(km, kernel_id, READ_TOKEN)).strip()


async def status_with(token: str) -> int:
    """Return the service's status for a turn sent with `token`."""
    return (await turn_fetch(turn_body(), token))[0]


async def test_each_kernel_has_its_own_token_and_the_server_none(
    live_server: Any, upstream: Upstream, capture: Any
) -> None:
    km = live_server.kernel_manager
    first, second = await km.start_kernel(), await km.start_kernel()
    try:
        tokens = [await kernel_token(km, first), await kernel_token(km, second)]
        assert "none" not in tokens and tokens[0] != tokens[1]
        assert all(len(t) >= 32 for t in tokens)
        assert [await status_with(t) for t in tokens] == [200, 200]
        # No process-wide credential: nothing the server's other children inherit opens
        # the service.
        assert ENV_TOKEN not in os.environ
        assert not hasattr(broker_of(live_server), "token")
    finally:
        await asyncio.gather(km.shutdown_kernel(first, now=True),
                             km.shutdown_kernel(second, now=True))
    assert [await status_with(t) for t in tokens] == [403, 403]


READ_TOLD = f"""import json, os
print(json.dumps({{k: v for k, v in os.environ.items() if k in {sorted(SERVER_SET)!r}}}))"""


async def test_what_the_server_tells_kernels_goes_in_their_start_not_its_environ(
    live_server: Any, upstream: Upstream, capture: Any
) -> None:
    """A terminal or any other child of the server learns nothing of the model service."""
    told = live_server.web_app.settings["jupyter_ci_told"]
    assert told.kernels[ENV_URL] and told.boxes[ENV_HIDE]
    assert not SERVER_SET.intersection(os.environ), "published process-wide"
    km = live_server.kernel_manager
    kernel = await km.start_kernel()
    try:
        seen = json.loads(await kernel_output(km, kernel, READ_TOLD))
    finally:
        await km.shutdown_kernel(kernel, now=True)
    # A notebook's kernel (boxed by default) gets the server's variables, the model service
    # through its socket in the box (no network there), and not what only a box's provisioner
    # reads (where the broker's socket is outside, what the box hides).
    assert seen.pop(ENV_TOKEN) and seen == {
        **told.kernels, ENV_URL: "http://localhost/jupyter-ci/broker",
        ENV_SOCKET: f"{SOCKET_DIR}/broker.sock"}


async def test_a_notebook_session_kernel_gets_a_token_with_its_session_env(
    live_server: Any, upstream: Upstream, capture: Any
) -> None:
    """JupyterLab starts kernels through sessions, whose env carries JPY_SESSION_NAME."""
    model = await live_server.session_manager.create_session(
        path="analysis.ipynb", kernel_name="python3", type="notebook")
    kernel_id = model["kernel"]["id"]
    km = live_server.kernel_manager
    try:
        token = await kernel_token(km, kernel_id)
        assert token != "none" and await status_with(token) == 200
    finally:
        await live_server.session_manager.delete_session(model["id"])
    assert await status_with(token) == 403


async def test_restart_gives_a_new_token_and_kills_the_old(
    live_server: Any, upstream: Upstream, capture: Any
) -> None:
    km = live_server.kernel_manager
    kernel_id = await km.start_kernel()
    try:
        old = await kernel_token(km, kernel_id)
        await km.restart_kernel(kernel_id)
        new = await kernel_token(km, kernel_id)
        assert new not in (old, "none")
        assert await status_with(old) == 403
        assert await status_with(new) == 200
    finally:
        await km.shutdown_kernel(kernel_id, now=True)
    assert await status_with(new) == 403


async def test_a_kernel_that_dies_and_is_restarted_gets_a_new_token(
    live_server: Any, upstream: Upstream, capture: Any
) -> None:
    """The auto-restarter relaunches a crashed kernel: the crash must not keep the token."""
    km = live_server.kernel_manager
    kernel_id = await km.start_kernel()
    try:
        old = await kernel_token(km, kernel_id)
        kernel = km.get_kernel(kernel_id)
        pid = kernel.provisioner.pid
        os.kill(pid, 9)  # the restarter notices within KernelRestarter.time_to_dead (3 s)
        deadline = time.monotonic() + 30
        while kernel.provisioner is None or kernel.provisioner.pid in (None, pid):
            assert time.monotonic() < deadline, "the kernel was not restarted"
            await asyncio.sleep(0.1)
        new = await kernel_token(km, kernel_id)
        assert new not in (old, "none")
        assert await status_with(old) == 403
        assert await status_with(new) == 200
    finally:
        await km.shutdown_kernel(kernel_id, now=True)


@pytest.mark.parametrize("presented", ["", "x" * 43, "Bearer", "\u00e9" * 10])
async def test_unknown_tokens_are_refused(
    live_server: Any, upstream: Upstream, presented: str, capture: Any
) -> None:
    assert await status_with(presented) == 403
    assert upstream.requests == []


@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "Bearer wrong"}, {"x-api-key": "wrong"}, "jupyter", "jupyter-bearer",
    "jupyter-query",
])
async def test_the_service_takes_no_other_credential(
    live_server: Any, jp_auth_header: dict[str, str], upstream: Upstream, headers: Any,
    capture: Any,
) -> None:
    """Jupyter's own token (header, bearer or query) is not a kernel's credential."""
    path = TURN_PATH
    jupyter_token = jp_auth_header["Authorization"].split()[-1]
    if headers == "jupyter":
        headers = jp_auth_header
    elif headers == "jupyter-bearer":
        headers = bearer(jupyter_token)
    elif headers == "jupyter-query":
        headers, path = {}, f"{TURN_PATH}?token={jupyter_token}"
    status, lines = await turn_fetch(turn_body(), None, headers=headers, path=path)
    assert status == 403
    assert lines[0]["error"]["type"] == "ModelConfigError"
    assert "credential of a running kernel" in lines[0]["error"]["message"]
    assert upstream.requests == []


@pytest.mark.parametrize("route", ["api/kernels", "api/sessions", "jupyter-ci/config",
                                   "jupyter-ci/sessions"])
@pytest.mark.parametrize("scheme", ["token", "Bearer"])
async def test_a_kernel_credential_opens_nothing_else(
    live_server: Any, http_server_client: Any, jp_base_url: str, route: str, scheme: str,
    token: str,
) -> None:
    headers = {"Authorization": f"{scheme} {token}"}
    with pytest.raises(HTTPClientError) as caught:
        await http_server_client.fetch(f"{jp_base_url}{route}", headers=headers)
    assert caught.value.code == 403


async def test_the_private_socket_serves_turns_to_a_credential_and_nothing_else(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    """Sandboxed kernels reach the service on a Unix socket of its own: same rules."""
    path = live_server.web_app.settings["jupyter_ci_told"].boxes[ENV_BROKER_SOCKET]
    assert os.stat(path).st_mode & 0o777 == 0o600
    turn = f"/jupyter-ci/broker/{TURN_PATH}"
    transport = httpx.AsyncHTTPTransport(uds=path)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        answer = await client.post(turn, json=turn_body(), headers=bearer(token))
        assert answer.status_code == 200 and '"reply"' in answer.text
        assert (await client.post(turn, json=turn_body())).status_code == 403
        for route in ("/api/kernels", "/api/contents", "/jupyter-ci/config",
                      "/jupyter-ci/sessions", "/jupyter-ci/broker/openai/v1/files"):
            assert (await client.get(route, headers=bearer(token))).status_code == 404
    assert len(upstream.requests) == 1
