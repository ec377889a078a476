"""The pool of REST session kernels: a minimum kept, grown under bursts, shrunk when idle."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_ci.server.sessions.errors import KernelUnavailable
from jupyter_ci.server.sessions.pool import Hooks, Pool, Sizes
from tests.test_sessions import call, new_session

Fetch = Any
LOG = logging.getLogger("test")


@pytest.fixture
def ci_config() -> dict[str, Any]:
    return {"session_pool": 0, "session_sandbox": "never"}


@pytest.fixture
def jp_server_config(ci_config: dict[str, Any]) -> Config:
    return Config({"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
                   "JupyterCI": ci_config})


class Kernels:
    """Fake kernels: numbered, started after `delay` s, `fail` of them refusing to start."""

    def __init__(self, delay: float = 0.05) -> None:
        self.delay, self.fail = delay, 0
        self.made, self.running, self.most, self.starting = 0, set[int](), 0, 0
        self.gone: set[int] = set()

    async def start(self) -> int:
        self.made += 1
        number = self.made
        self.running.add(number)
        self.starting += 1
        self.most = max(self.most, self.starting)  # starts at once
        await asyncio.sleep(self.delay)
        self.starting -= 1
        if self.fail:
            self.fail -= 1
            self.running.discard(number)
            raise KernelUnavailable(f"kernel {number} did not start")
        return number

    async def dispose(self, number: int) -> None:
        self.running.discard(number)

    def hooks(self) -> Hooks[int]:
        return Hooks(self.start, self.dispose, lambda n: n not in self.gone)


async def settle(pool: Pool[int]) -> None:
    """Wait until the pool starts and shuts down nothing more."""
    for _ in range(200):
        if not pool.starting and not pool.disposing:
            await asyncio.sleep(0.01)
            if not pool.starting and not pool.disposing:
                return
        await asyncio.sleep(0.01)
    raise AssertionError("the pool never settled")


async def test_a_burst_grows_the_pool_so_the_next_one_is_served_at_once() -> None:
    kernels = Kernels()
    pool = Pool(kernels.hooks(), Sizes(1, 6, idle_s=0, parallel=2), lambda: 100, LOG)
    pool.refill()
    await settle(pool)
    assert len(pool.ready) == 1
    first = await asyncio.gather(*(pool.get() for _ in range(4)))
    assert sorted(first) == first and len(set(first)) == 4  # handed out in order of asking
    assert pool.target == 4 and kernels.most == 2
    await settle(pool)
    ready = set(pool.ready)
    assert len(ready) == 4
    began = time.monotonic()
    second = await asyncio.gather(*(pool.get() for _ in range(4)))
    assert set(second) == ready and time.monotonic() - began < kernels.delay
    await pool.stop()
    await pool.empty()


async def test_the_pool_never_holds_more_than_max_sessions_leaves_room_for() -> None:
    kernels, room = Kernels(), [3]
    pool = Pool(kernels.hooks(), Sizes(2, 10, idle_s=0, parallel=4), lambda: room[0], LOG)
    pool.target = 10
    pool.refill()
    await settle(pool)
    assert len(pool.ready) == 3
    room[0] = 1  # sessions were created cold meanwhile
    pool.refill()
    await settle(pool)
    assert len(pool.ready) == 1 and len(kernels.running) == 1


async def test_an_idle_pool_shrinks_back_to_its_minimum() -> None:
    kernels = Kernels(delay=0.01)
    pool = Pool(kernels.hooks(), Sizes(1, 5, idle_s=0.3, parallel=2), lambda: 100, LOG)
    await asyncio.gather(*(pool.get() for _ in range(5)))
    await settle(pool)
    assert pool.target == 5 and len(pool.ready) == 5
    await asyncio.sleep(0.5)
    await settle(pool)
    assert pool.target == 1 and len(pool.ready) == 1 and len(kernels.running) == 5 + 1


async def test_a_failed_start_fails_one_waiting_session_and_the_others_go_on() -> None:
    kernels = Kernels()
    kernels.fail = 1
    pool = Pool(kernels.hooks(), Sizes(1, 4, idle_s=0, parallel=1), lambda: 100, LOG)
    got = await asyncio.gather(pool.get(), pool.get(), return_exceptions=True)
    assert isinstance(got[0], KernelUnavailable) and isinstance(got[1], int)


async def test_gone_kernels_are_skipped_and_a_stopping_pool_leaves_none() -> None:
    kernels = Kernels()
    pool = Pool(kernels.hooks(), Sizes(2, 4, idle_s=0), lambda: 100, LOG)
    pool.refill()
    await settle(pool)
    kernels.gone.add(pool.ready[0])
    assert await pool.get() == 2  # the first one was shut down from elsewhere
    pool.refill()
    waiting = asyncio.ensure_future(asyncio.gather(pool.get(), pool.get(), pool.get()))
    await asyncio.sleep(0)
    await pool.stop()
    with pytest.raises(KernelUnavailable, match="stopping"):
        await waiting
    await pool.empty()
    await settle(pool)
    assert kernels.running == {2}  # the session's; the gone one and the started ones shut down


# -- on a real server ------------------------------------------------------------------

POOL = {"session_pool": 1, "session_pool_max": 3, "session_pool_idle_timeout": 6.0,
        "max_sessions": 4, "session_sandbox": "never"}


async def wait_for(what: Any, seconds: float = 90) -> None:
    """Wait until `what()` is true."""
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, "waited in vain"
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("ci_config", [POOL])
async def test_after_a_burst_the_next_burst_comes_from_the_pool_and_it_shrinks_back(
    jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    manager = jp_serverapp.web_app.settings["jupyter_ci_sessions"]
    km = jp_serverapp.kernel_manager
    began = time.monotonic()
    first = await asyncio.gather(*(new_session(jp_fetch) for _ in range(3)))  # the pool learns
    cold = time.monotonic() - began
    await asyncio.gather(*(call(jp_fetch, "DELETE", s["id"]) for s in first))
    await wait_for(lambda: len(manager.kernels.pool) == 3)
    pooled = {started.kernel_id for started in manager.kernels.pool}
    began = time.monotonic()
    burst = await asyncio.gather(*(new_session(jp_fetch) for _ in range(3)))
    took = time.monotonic() - began
    assert {s["kernel_id"] for s in burst} == pooled, "a session of the burst started cold"
    assert took < cold / 2, (took, cold)  # against this run's cold burst, not a clock
    # max_sessions (4) leaves room for one more: the pool keeps at most that one.
    await wait_for(lambda: not manager.kernels._pool.starting)
    assert len(km) <= 4 and len(manager.kernels.pool) <= 1
    for session in burst:
        assert (await call(jp_fetch, "POST", session["id"], "execute",
                           body={"code": "1"}))[1]["status"] == "ok"
        await call(jp_fetch, "DELETE", session["id"])
    await wait_for(lambda: len(manager.kernels.pool) == 3)
    # No new session for session_pool_idle_timeout: back to the minimum, the others shut down.
    await wait_for(lambda: len(manager.kernels.pool) == 1 and len(km) == 1, 20)


@pytest.mark.parametrize("ci_config", [{**POOL, "session_pool": 0}])
async def test_no_pool_starts_nothing_ahead(jp_fetch: Fetch, jp_serverapp: Any) -> None:
    sessions = await asyncio.gather(*(new_session(jp_fetch) for _ in range(2)))
    await asyncio.sleep(0.5)
    assert len(jp_serverapp.kernel_manager) == 2
    for session in sessions:
        await call(jp_fetch, "DELETE", session["id"])
    assert len(jp_serverapp.kernel_manager) == 0


@pytest.mark.parametrize("ci_config", [{"session_pool": 1, "session_idle_timeout": 4.0}])
async def test_a_server_whose_rest_api_is_never_used_starts_no_kernel(jp_serverapp: Any) -> None:
    # The culler (every idle/4 s, 60 s by default) tidies the pool: it used to fill it then,
    # so a boxed kernel started a minute after every server start.
    manager = jp_serverapp.web_app.settings["jupyter_ci_sessions"]
    tidy, tidied = manager.kernels.tidy, 0

    def counted() -> None:
        nonlocal tidied
        tidy()
        tidied += 1

    manager.kernels.tidy = counted
    await wait_for(lambda: tidied >= 3, 60)  # a hang guard, not a time bound
    assert not manager.kernels._pool.starting and not manager.kernels.pool
    assert len(jp_serverapp.kernel_manager) == 0
