"""Take turns: how many sessions' runs start into their kernels at once (`RunSlots`).

Twenty kernels woken at once on a two-core machine do not share the cores fairly: some runs
finish at once while others wait for hundreds of ms behind them (measured with jupyter_client
alone: p50 11 ms, p99 600 ms). Letting a few runs in at a time, in the order they came,
gives every session its turn: each run then gets the cores it needs, and waits only for the
runs ahead of it. A run holds its turn for `quantum_s` at most: a long one (a model's
training loop, a `sleep`) goes on in its kernel but lets the next run in, so no session
waits behind another's long run for more than a quantum.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator

#: Seconds a run holds its turn at most (then it runs on, and the next run is let in).
TURN_S = 0.05


class RunSlots:
    """At most `slots` runs at once, in order of arrival, each for `quantum_s` at most."""

    def __init__(self, slots: int, quantum_s: float) -> None:
        self.slots = slots
        self.quantum_s = quantum_s
        self.free = slots
        self.waiting: deque[asyncio.Future[None]] = deque()

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait for a turn; hold it while the body runs, or `quantum_s` if that is shorter."""
        if self.slots <= 0:  # no limit
            yield
            return
        await self._acquire()
        held = [True]

        def release() -> None:
            if held[0]:
                held[0] = False
                self._release()

        timer = asyncio.get_running_loop().call_later(self.quantum_s, release)
        try:
            yield
        finally:
            timer.cancel()
            release()

    async def _acquire(self) -> None:
        """Take a free slot, or wait for one behind those that came earlier."""
        if self.free > 0 and not self.waiting:
            self.free -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        try:
            await future
        except asyncio.CancelledError:
            with contextlib.suppress(ValueError):
                self.waiting.remove(future)
            if future.done() and not future.cancelled():
                self._release()  # granted as it was cancelled: pass the slot on
            raise

    def _release(self) -> None:
        """Hand the slot to the first run waiting, else free it."""
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_result(None)
                return
        self.free += 1
