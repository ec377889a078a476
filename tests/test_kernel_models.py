"""Jupyter's own API while REST sessions start and end: every answer is 200 (issue 31.2).

jupyter_client registers a starting kernel's manager one loop turn before jupyter_server
gives it `last_activity`; a request read in that turn (JupyterLab polls `/api/kernels`,
JupyterHub reads `/api/status`) was a 500 (`TraitError: last_activity`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError
from traitlets.config import Config

from jupyter_ci.server.kernel_models import fill_starting_kernels
from tests.test_sessions import Fetch, call, new_session

#: Sessions started at once in a burst, and bursts in a test.
BURST, BURSTS = 6, 3
#: Requests in flight at once per route: the more, the likelier one lands in the gap.
POLLERS = 4


@pytest.fixture
def jp_server_config() -> Config:
    """Enable the extension; unboxed kernels without a pool start fastest and most often."""
    return Config({"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
                   "JupyterCI": {"session_pool": 0, "session_sandbox": "never"}})


async def _poll(jp_fetch: Fetch, route: str, codes: list[int], done: asyncio.Event) -> None:
    """Read one of Jupyter's routes again and again until `done`; note every status."""
    while not done.is_set():
        try:
            response = await jp_fetch("api", route, method="GET")
            json.loads(response.body)
            codes.append(response.code)
        except HTTPClientError as error:
            codes.append(error.code)


async def _burst(jp_fetch: Fetch) -> None:
    """Start BURST sessions at once, then delete them all at once."""
    sessions = await asyncio.gather(*(new_session(jp_fetch) for _ in range(BURST)))
    deleted = await asyncio.gather(*(call(jp_fetch, "DELETE", s["id"]) for s in sessions))
    assert [status for status, _ in deleted] == [204] * BURST


async def test_jupyters_api_answers_200_while_sessions_start_and_end(
    jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    codes: dict[str, list[int]] = {"status": [], "kernels": []}
    done = asyncio.Event()
    pollers = [asyncio.ensure_future(_poll(jp_fetch, route, codes[route], done))
               for route in codes for _ in range(POLLERS)]
    try:
        for _ in range(BURSTS):
            await _burst(jp_fetch)
    finally:
        done.set()
        await asyncio.gather(*pollers)
    for route, seen in codes.items():
        assert seen, f"/api/{route} was never read"
        failed = [code for code in seen if code != 200]
        assert not failed, f"/api/{route}: {len(failed)} of {len(seen)} not 200: {failed[:5]}"


def test_a_kernel_manager_without_pre_start_is_left_alone() -> None:
    class Gatewayish:
        pass

    manager = Gatewayish()
    assert fill_starting_kernels(manager) is False
    assert not vars(manager)
