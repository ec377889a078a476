"""A Jupyter Server extension for benchmarks: measures the server's own event-loop lag.

Loaded by bench_broker.py with `--ServerApp.jpserver_extensions={'looplag': True}` and
`bench/` on PYTHONPATH. A task sleeps 5 ms at a time and records how late it wakes up (wall
clock), and how much of that interval the loop's thread spent running (its CPU time): a late
wake-up with little CPU means the process was waiting for a core (the load generator and the
fake provider share the machine), much CPU means callbacks held the loop. `GET /bench/looplag`
returns both, in milliseconds, recorded since the last call, and starts a new window.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from jupyter_server.base.handlers import APIHandler
from tornado import web

TICK_S = 0.005
_lags: list[tuple[float, float]] = []


class LagHandler(APIHandler):
    """Hand out the lags recorded so far and start a new window."""

    @web.authenticated
    def get(self) -> None:
        """Return the recorded [wall lag, loop CPU beyond the tick] pairs (ms) as JSON."""
        window = _lags.copy()
        _lags.clear()
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(window))


async def _measure() -> None:
    """Record how late each short sleep wakes up."""
    while True:
        start, cpu = time.perf_counter(), time.thread_time()
        await asyncio.sleep(TICK_S)
        wall = time.perf_counter() - start - TICK_S
        _lags.append((wall * 1000, max(0.0, time.thread_time() - cpu - TICK_S) * 1000))


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": "looplag"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Add the route (behind the server's token) and start measuring."""
    serverapp.web_app.add_handlers(".*$", [(r"/bench/looplag", LagHandler)])
    serverapp.io_loop.add_callback(lambda: asyncio.ensure_future(_measure()))
