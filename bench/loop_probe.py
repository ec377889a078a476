"""A Jupyter Server extension for benchmarks: the server's own event-loop lag, from inside.

Loaded by bench_loop_lag.py with `--ServerApp.jpserver_extensions={..., 'loop_probe': True}`
and `bench/` on PYTHONPATH. A callback scheduled with `loop.call_later(TICK_S)` records how
late it fires (wall clock), and how much of that interval the loop's thread spent running
(its CPU time): a late callback with little CPU means the process waited for a core (the
load generator and the fake provider share the machine); much CPU means callbacks held the
loop. `GET /bench/looplag` returns both, in milliseconds, recorded since the last call, and
the garbage collections meanwhile (generation, ms), and starts a new window. `POST
/bench/profile` starts cProfile on the loop's thread; `DELETE /bench/profile` stops it and
answers the top functions (with LOOP_PROBE_PROFILE set to a path, the raw stats are dumped
there too, for `python -m pstats`).
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import io
import json
import os
import pstats
import time
from typing import Any

from jupyter_server.base.handlers import APIHandler
from tornado import web

TICK_S = 0.005
_lags: list[tuple[float, float, float]] = []
_profile: list[cProfile.Profile] = []
#: Garbage collections since the last window: (generation, ms).
_collections: list[tuple[int, float]] = []
_gc_start: list[float] = [0.0]
#: Milliseconds of garbage collection since the server started.
_gc_total: list[float] = [0.0]


class LagHandler(APIHandler):
    """Hand out the lags recorded so far and start a new window."""

    @web.authenticated
    def get(self) -> None:
        """Return the recorded ticks [wall lag, loop CPU beyond the tick (ms), when (s), garbage
        collection meanwhile (ms)] and the collections as JSON."""
        window = {"ticks": _lags.copy(), "gc": _collections.copy()}
        _lags.clear()
        _collections.clear()
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(window))


class ProfileHandler(APIHandler):
    """Start and stop cProfile on the loop's thread."""

    @web.authenticated
    def post(self) -> None:
        """Start profiling."""
        profile = cProfile.Profile()
        _profile.append(profile)
        profile.enable()
        self.finish("{}")

    @web.authenticated
    def delete(self) -> None:
        """Stop profiling; answer the top functions by internal and cumulative time."""
        profile = _profile.pop()
        profile.disable()
        if os.environ.get("LOOP_PROBE_PROFILE"):
            profile.dump_stats(os.environ["LOOP_PROBE_PROFILE"])
        out = io.StringIO()
        stats = pstats.Stats(profile, stream=out)
        stats.sort_stats("tottime").print_stats(40)
        stats.sort_stats("cumulative").print_stats(60)
        self.set_header("Content-Type", "text/plain")
        self.finish(out.getvalue())


def _start(loop: asyncio.AbstractEventLoop) -> None:
    """Schedule the first tick; each tick records its lateness and schedules the next."""
    def tick(due: float, cpu: float, collected: float) -> None:
        now = time.perf_counter()
        late = now - due
        ran = time.thread_time() - cpu
        _lags.append((late * 1000, max(0.0, ran - TICK_S) * 1000, now,
                      _gc_total[0] - collected))
        next_tick()

    def next_tick() -> None:
        loop.call_later(TICK_S, tick, time.perf_counter() + TICK_S, time.thread_time(),
                        _gc_total[0])

    next_tick()


def _collected(phase: str, info: dict[str, int]) -> None:
    """Time each garbage collection (they run on whichever thread allocates: the loop's)."""
    if phase == "start":
        _gc_start[0] = time.perf_counter()
    else:
        took = (time.perf_counter() - _gc_start[0]) * 1000
        _collections.append((info["generation"], took))
        _gc_total[0] += took


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": "loop_probe"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Add the routes (behind the server's token) and start measuring."""
    serverapp.web_app.add_handlers(".*$", [(r"/bench/looplag", LagHandler),
                                           (r"/bench/profile", ProfileHandler)])
    serverapp.io_loop.add_callback(lambda: _start(asyncio.get_running_loop()))
    gc.callbacks.append(_collected)
    if os.environ.get("LOOP_PROBE_GC_THRESHOLD"):  # an experiment: "7000,10,10"
        gc.set_threshold(*(int(n) for n in os.environ["LOOP_PROBE_GC_THRESHOLD"].split(",")))
