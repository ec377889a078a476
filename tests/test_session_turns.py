"""Sessions take turns into their kernels (fair.py): in order, a few at once, never stuck."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_ci.server.sessions.fair import RunSlots
from tests.test_sessions import new_session, run


async def test_runs_go_in_order_of_arrival_a_few_at_once() -> None:
    turns, inside, most, order = RunSlots(2, quantum_s=10), [0], [0], []

    async def one(name: int) -> None:
        async with turns.turn():
            order.append(name)
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            await asyncio.sleep(0.01)
            inside[0] -= 1

    await asyncio.gather(*(one(n) for n in range(8)))
    assert order == list(range(8)) and most[0] == 2 and turns.free == 2


async def test_a_long_run_lets_the_next_in_after_its_quantum() -> None:
    turns = RunSlots(1, quantum_s=0.05)
    began = time.monotonic()

    async def long() -> None:
        async with turns.turn():
            await asyncio.sleep(1)

    async def short() -> float:
        await asyncio.sleep(0.01)
        async with turns.turn():
            return time.monotonic() - began

    waited = (await asyncio.gather(long(), short()))[1]
    assert 0.04 < waited < 0.5 and turns.free == 1


async def test_a_run_cancelled_while_waiting_passes_its_turn_on() -> None:
    turns = RunSlots(1, quantum_s=10)
    release = asyncio.Event()

    async def holder() -> None:
        async with turns.turn():
            await release.wait()

    async def waiter() -> None:
        async with turns.turn():
            pass

    held = asyncio.ensure_future(holder())
    await asyncio.sleep(0)
    cancelled, last = asyncio.ensure_future(waiter()), asyncio.ensure_future(waiter())
    await asyncio.sleep(0)
    cancelled.cancel()
    release.set()
    await asyncio.wait_for(last, 1)
    await held
    assert turns.free == 1 and not turns.waiting


async def test_no_slots_means_no_limit() -> None:
    turns = RunSlots(0, quantum_s=0.05)
    async with turns.turn(), turns.turn():
        pass


@pytest.fixture
def jp_server_config() -> Config:
    return Config({"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
                   "JupyterCI": {"session_pool": 0, "session_sandbox": "never",
                                 "session_run_slots": 1}})


async def test_a_long_run_does_not_hold_up_another_session(jp_fetch: Any) -> None:
    slow, quick = await asyncio.gather(new_session(jp_fetch), new_session(jp_fetch))
    long = asyncio.ensure_future(run(jp_fetch, slow["id"], "import time\ntime.sleep(3)"))
    await asyncio.sleep(0.5)
    began = time.monotonic()
    assert (await run(jp_fetch, quick["id"], "1 + 1"))["status"] == "ok"
    assert time.monotonic() - began < 1.5
    assert (await long)["status"] == "ok"
