"""The server knows which kernels ran model-written code, from before the first step runs.

A step can leave hooks in its kernel that put script into the user's own later cells; the
labextension renders no output of such a kernel as trusted until it restarts, and asks the
server on every load (server/broker/model_code.py). Real kernels of a real Jupyter server, a
real `%%ask`, the fake provider behind the model service.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_ci.models.broker import MODEL_CODE_PATH
from tests.fakellm_wire import Turn
from tests.service_fixtures import Upstream, bearer, kernel_output, service_fetch

ROUTE = "jupyter-ci/kernels/{}/model-code"


async def page_state(jp_fetch: Any, kernel_id: str, method: str = "GET") -> dict[str, Any]:
    """Ask the route as the page does (with the user's token); return its JSON."""
    body = b"" if method == "POST" else None
    response = await jp_fetch(*ROUTE.format(kernel_id).split("/"), method=method, body=body)
    found: dict[str, Any] = json.loads(response.body)
    return found


async def wait_for(check: Any, what: str, seconds: float = 60.0) -> None:
    """Poll an async check until it is true (a hang guard, not a speed bound)."""
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.05)


@pytest.fixture
def ci_config() -> dict[str, Any]:
    return {"session_pool": 0, "session_sandbox": "never"}


async def test_an_ask_marks_its_kernel_before_its_first_step_runs_and_a_restart_clears_it(
    live_server: Any, upstream: Upstream, jp_fetch: Any
) -> None:
    km = live_server.kernel_manager
    kernel_id = await km.start_kernel()
    # In Jupyter's root, which the kernel's box shows (its /tmp is its own).
    go = Path(live_server.root_dir) / "go"
    # The step waits for the test: the mark must be there while model code runs.
    step = (f"import os, time\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n"
            "print('step ran')")
    upstream.turns = [Turn("", tool_calls=[("run_python", {"code": step})]), Turn("Done.")]
    try:
        assert "Error" not in await kernel_output(km, kernel_id, "%load_ext jupyter_ci")
        # A notebook's kernel, boxed by default, is the user's: its outputs are trusted as
        # an unboxed kernel's are ("sandboxed" is a kernel chosen by a sandboxed kernelspec).
        assert await page_state(jp_fetch, kernel_id) == {"model_code": False,
                                                          "sandboxed": False}
        ask = asyncio.ensure_future(kernel_output(
            km, kernel_id, "%%ask -m openai:gpt-test\nwait for the file"))

        async def marked() -> bool:
            assert not ask.done(), ask.result()
            return bool((await page_state(jp_fetch, kernel_id))["model_code"])

        await wait_for(marked, "the kernel marked while its step waits")
        go.touch()
        assert "step ran" in await ask
        assert (await page_state(jp_fetch, kernel_id))["model_code"] is True
        # A restart is a new process, without what the step left behind.
        await km.restart_kernel(kernel_id)
        assert (await page_state(jp_fetch, kernel_id))["model_code"] is False
    finally:
        await km.shutdown_kernel(kernel_id, now=True)


async def test_the_page_marks_a_kernel_and_no_one_else_can_ask_or_mark(
    live_server: Any, upstream: Upstream, jp_fetch: Any
) -> None:
    km = live_server.kernel_manager
    kernel_id = await km.start_kernel()
    try:
        assert (await page_state(jp_fetch, kernel_id, "POST"))["model_code"] is True
        assert (await page_state(jp_fetch, kernel_id))["model_code"] is True
        # Without the user's login (a web page, another user): refused.
        url = f"{live_server.connection_url.rstrip('/')}/{ROUTE.format(kernel_id)}"
        for method in ("GET", "POST"):
            with pytest.raises(HTTPClientError) as refused:
                await jp_fetch(*ROUTE.format(kernel_id).split("/"), method=method,
                               body=b"" if method == "POST" else None,
                               headers={"Authorization": ""})
            assert refused.value.code in (401, 403), url
        # The kernels' route takes only a live kernel's credential.
        for token in ("", "not-a-credential"):
            response = await service_fetch(MODEL_CODE_PATH, bearer(token), b"")
            assert response.code == 403
        with pytest.raises(HTTPClientError) as unknown:
            await page_state(jp_fetch, "no-such-kernel")
        assert unknown.value.code == 404
    finally:
        await km.shutdown_kernel(kernel_id, now=True)
    assert kernel_id not in live_server.web_app.settings["jupyter_ci_broker"].model_code


async def test_a_rest_sessions_kernel_is_marked_from_its_start_and_over_restarts(
    live_server: Any, upstream: Upstream, jp_fetch: Any
) -> None:
    created = await jp_fetch("jupyter-ci", "sessions", method="POST", body="{}")
    session = json.loads(created.body)
    try:
        kernel_id = session["kernel_id"]
        assert (await page_state(jp_fetch, kernel_id))["model_code"] is True
        await jp_fetch("jupyter-ci", "sessions", session["id"], "restart", method="POST",
                       body="{}")
        assert (await page_state(jp_fetch, kernel_id))["model_code"] is True
    finally:
        await jp_fetch("jupyter-ci", "sessions", session["id"], method="DELETE")


async def test_a_sandboxed_kernel_says_so(live_server: Any, upstream: Upstream,
                                          jp_fetch: Any) -> None:
    km = live_server.kernel_manager
    kernel_id = await km.start_kernel(kernel_name="python3-sandboxed")
    try:
        assert await page_state(jp_fetch, kernel_id) == {"model_code": False, "sandboxed": True}
    finally:
        await km.shutdown_kernel(kernel_id, now=True)
