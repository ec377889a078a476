"""The kernels of REST sessions started in advance: a minimum kept, grown under bursts.

`c.JupyterCI.session_pool` kernels are kept started from the first session on. A burst of
new sessions that drains the pool raises its size to the number asked for in the last
BURST_S seconds (up to `session_pool_max`), so the next burst that large finds its kernels
started; after `session_pool_idle_timeout` seconds without a new session the pool shrinks
back to its minimum. Kernels start a few at a time (PARALLEL): a session that finds the
pool empty waits for the pool's next kernel, in turn, rather than start one of its own
against the others for the same cores. The pool, its starts and the sessions being created
never hold more kernels than max_sessions leaves room for (`room`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from logging import Logger
from typing import Generic, TypeVar

from jupyter_ci.server.sessions.errors import KernelUnavailable

T = TypeVar("T")

#: Sessions asked for within this many seconds of each other make one burst.
BURST_S = 2.0
#: Kernel starts at once: each is a process importing for a few hundred ms of CPU.
PARALLEL = max(1, min(4, os.cpu_count() or 1))
#: How long a stopping server lets the pool's kernel starts finish (then cancels them).
STOPPING_S = 10.0


@dataclass(frozen=True)
class Sizes:
    """How many kernels the pool keeps: at least `minimum`, after bursts up to `maximum`."""

    minimum: int
    maximum: int
    #: Seconds without demand before the pool shrinks back to `minimum` (0: never).
    idle_s: float
    parallel: int = PARALLEL


@dataclass(frozen=True)
class Hooks(Generic[T]):
    """What the pool does with its kernels: start one ready, shut one down, check one."""

    start: Callable[[], Awaitable[T]]
    dispose: Callable[[T], Awaitable[None]]
    usable: Callable[[T], bool]


class Pool(Generic[T]):
    """Kernels started in advance, handed out in order of asking."""

    def __init__(self, hooks: Hooks[T], sizes: Sizes, room: Callable[[], int],
                 log: Logger) -> None:
        self.hooks = hooks
        self.sizes = sizes
        #: How many more sessions max_sessions allows beyond those existing or being created.
        self.room = room
        self.log = log
        self.ready: deque[T] = deque()
        self.waiters: deque[asyncio.Future[T]] = deque()
        self.starting: set[asyncio.Future[None]] = set()
        self.disposing: set[asyncio.Future[None]] = set()
        #: The size the pool fills to now: from `minimum` up to `maximum` after bursts.
        self.target = sizes.minimum
        self.arrivals: deque[float] = deque()  # when sessions were asked for, within BURST_S
        self.last_demand = 0.0
        self.closing = False
        self.stalled = False  # a start failed with no one waiting: until the next demand
        self._shrinking: asyncio.TimerHandle | None = None

    @property
    def enabled(self) -> bool:
        """Tell whether the pool starts kernels (a minimum of 0 turns it off)."""
        return self.sizes.minimum > 0 and not self.closing

    async def get(self) -> T:
        """Return a started kernel: a ready one, else the next one the pool starts."""
        self._demand()
        while self.ready:
            item = self.ready.popleft()
            if self.hooks.usable(item):
                self._grow()
                self.refill()
                return item
            self._drop(item)  # shut down elsewhere meanwhile, or its gateway went away
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self.waiters.append(future)
        self._grow()
        self.refill()
        try:
            return await future
        except asyncio.CancelledError:
            with contextlib.suppress(ValueError):
                self.waiters.remove(future)
            if future.done() and not future.cancelled() and future.exception() is None:
                self._deliver(future.result())  # handed over as the request went away
            raise

    def refill(self, retry: bool = False) -> None:
        """Start kernels, a few at a time, up to the waiting sessions plus the target."""
        if retry:
            self.stalled = False
        if not self.enabled or self.stalled:
            return
        self._trim()
        while (len(self.starting) < self.sizes.parallel and
               len(self.ready) + len(self.starting) < len(self.waiters) + self._keep()):
            task = asyncio.ensure_future(self._start())
            self.starting.add(task)
            task.add_done_callback(self.starting.discard)

    def prune(self) -> None:
        """Shut down ready kernels that went away; shrink when idle; refill once used."""
        for item in [item for item in self.ready if not self.hooks.usable(item)]:
            self.ready.remove(item)
            self._drop(item)
        self.shrink()
        # The pool fills from the first session on: a server whose REST API is never used
        # starts no kernel (the culler calls this every minute from the server's start).
        if self.last_demand:
            self.refill()

    def shrink(self) -> None:
        """Go back to the minimum when no session was asked for in `idle_s`."""
        idle = self.sizes.idle_s
        if idle > 0 and time.monotonic() - self.last_demand >= idle * 0.99:
            self.target = self.sizes.minimum
            self._trim()

    async def stop(self) -> None:
        """Start no more; let starts in flight finish (briefly); fail the waiting sessions."""
        self.closing = True
        if self._shrinking is not None:
            self._shrinking.cancel()
        while (waiter := self._first_waiter()) is not None:
            waiter.set_exception(KernelUnavailable("The server is stopping."))
        if self.starting:
            # Not cancelled at once: a kernel start cut halfway is one the kernel manager can
            # neither finish nor shut down, and the server's own cleanup then stops short.
            await asyncio.wait(set(self.starting), timeout=STOPPING_S)
            for task in list(self.starting):
                task.cancel()

    async def empty(self) -> None:
        """Shut down every ready kernel and wait for those being shut down."""
        while self.ready:
            await self.hooks.dispose(self.ready.popleft())
        if self.disposing:
            await asyncio.wait(set(self.disposing), timeout=STOPPING_S)

    # -- inside ------------------------------------------------------------------------

    def _keep(self) -> int:
        """Return how many ready kernels to keep: the target, as room allows."""
        return max(0, min(self.target, self.room()))

    def _demand(self) -> None:
        """Note that a session was asked for now; shrink after `idle_s` of no more."""
        now = time.monotonic()
        self.arrivals.append(now)
        while self.arrivals[0] < now - BURST_S:
            self.arrivals.popleft()
        self.last_demand, self.stalled = now, False
        if self.sizes.idle_s > 0 and self.sizes.maximum > self.sizes.minimum:
            if self._shrinking is not None:
                self._shrinking.cancel()
            self._shrinking = asyncio.get_running_loop().call_later(self.sizes.idle_s,
                                                                   self.shrink)

    def _grow(self) -> None:
        """When this burst drained the pool, get ready for one as large next time."""
        if not self.ready:
            self.target = min(self.sizes.maximum, max(self.target, len(self.arrivals)))

    def _trim(self) -> None:
        """Shut down ready kernels beyond what the pool keeps now."""
        while len(self.ready) > self._keep():
            self._drop(self.ready.pop())

    async def _start(self) -> None:
        """Start one kernel; hand it to the first waiting session, else keep it ready."""
        try:
            item = await self.hooks.start()
        except Exception as exc:
            self._started()
            self._failed(exc)
            return
        self._started()
        self._deliver(item)
        self.refill()

    def _started(self) -> None:
        """Count the current start as done (before its done callback would)."""
        task = asyncio.current_task()
        if task is not None:
            self.starting.discard(task)

    def _first_waiter(self) -> asyncio.Future[T] | None:
        """Take the first session still waiting (one that gave up is dropped)."""
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                return waiter
        return None

    def _deliver(self, item: T) -> None:
        """Give a started kernel to the first session waiting, else keep it if wanted."""
        if (waiter := self._first_waiter()) is not None:
            waiter.set_result(item)
            return
        if self.closing or len(self.ready) >= self._keep():
            self._drop(item)
        else:
            self.ready.append(item)

    def _failed(self, exc: Exception) -> None:
        """Tell the first waiting session why its kernel did not start; else log it."""
        if (waiter := self._first_waiter()) is not None:
            waiter.set_exception(exc)
            self.refill()  # the others wait for starts of their own
            return
        if not self.closing:
            self.log.warning("jupyter-ci: could not pre-start a session kernel (%s)", exc)
        self.stalled = True

    def _drop(self, item: T) -> None:
        """Shut a kernel down in the background."""
        task = asyncio.ensure_future(self.hooks.dispose(item))
        self.disposing.add(task)
        task.add_done_callback(self.disposing.discard)
