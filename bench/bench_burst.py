"""Measure bursts of new REST sessions and many sessions executing at once, in one run.

Prints figures side by side, not pass/fail: these machines are noisy, so each figure is
compared with its baseline measured in the same run, and every round is printed (spread).

    python bench/bench_burst.py [--rounds 3] [--burst 4] [--concurrent 20] [--executes 10]

1. A burst of `--burst` POST /sessions at once on a server with the default pool settings,
   each request's time beside a single pooled POST /sessions and a cold start (a server
   without a pool) of the same round. The first burst meets the pool as the first session
   left it; the later ones meet it warm (goal: every request of a warm burst at pooled speed).
2. `--concurrent` sessions executing `x = sum(range(1000))` at once, `--executes` times each:
   p50 and p99 of one execute and their ratio, per round (goal: p99 <= 3x p50), on the
   default server ("turns": c.JupyterCI.session_run_slots) and, rounds interleaved, on one
   that lets every run into its kernel at once ("no turns": session_run_slots = 0, as
   before). With --probe, the server loop's lag and garbage collections of each round.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_sessions import launch

SETTLE_S = 2.5  # the pool counts as warm once its kernel count held still this long
WARM_MAX_S = 60.0


def start_server(root: str, options: Sequence[str], probe: bool = False
                 ) -> tuple[subprocess.Popen[bytes], str, str]:
    """Start `jupyter server` with the extension and `options`; return it, URL and token."""
    return launch(root, options, ("jupyter_ci", "loop_probe") if probe else ("jupyter_ci",))


def percentile(values: list[float], q: float) -> float:
    """Return the q-th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def ms(values: Sequence[float]) -> str:
    """Format seconds as a list of milliseconds."""
    return ", ".join(f"{v * 1000:.0f}" if v >= 0.0995 else f"{v * 1000:.1f}" for v in values)


class Server:
    """One running server, reached with httpx."""

    def __init__(self, http: httpx.AsyncClient, probe: bool = False) -> None:
        self.http = http
        self.probe = probe  # bench/loop_probe.py is loaded: it measures the loop's lag

    async def create(self) -> tuple[float, str]:
        """POST /sessions; return its seconds and the session's id."""
        began = time.perf_counter()
        response = await self.http.post("jupyter-ci/sessions", json={})
        took = time.perf_counter() - began
        response.raise_for_status()
        return took, str(response.json()["id"])

    async def delete(self, sid: str) -> None:
        """Delete a session."""
        (await self.http.delete(f"jupyter-ci/sessions/{sid}")).raise_for_status()

    async def execute(self, sid: str, code: str) -> tuple[float, float]:
        """Run code in a session; return its seconds, and the kernel's (duration_ms)."""
        began = time.perf_counter()
        response = await self.http.post(f"jupyter-ci/sessions/{sid}/execute",
                                        json={"code": code})
        took = time.perf_counter() - began
        response.raise_for_status()
        result = response.json()
        assert result["status"] == "ok", response.text
        return took, result["duration_ms"] / 1000

    async def lag(self) -> str:
        """Describe the server's loop lag since the last call (with --probe), else ''."""
        if not self.probe:
            return ""
        window = (await self.http.get("bench/looplag")).json()
        lags = [tick[0] for tick in window["ticks"]] or [0.0]
        held = [tick[1] for tick in window["ticks"]] or [0.0]
        gcs = window["gc"]
        return (f"; loop lag p50 {percentile(lags, 50):.1f} p99 {percentile(lags, 99):.1f} max "
                f"{max(lags):.1f} ms (loop busy beyond a tick: p99 {percentile(held, 99):.1f} "
                f"max {max(held):.1f}); gc {len(gcs)}x, gen2 {sum(1 for g in gcs if g[0] == 2)}"
                f", longest {max((g[1] for g in gcs), default=0):.1f} ms")

    async def pooled(self) -> int:
        """Return how many kernels run that no session has (the pool)."""
        kernels = (await self.http.get("api/kernels")).json()
        sessions = (await self.http.get("jupyter-ci/sessions")).json()
        return len(kernels) - len(sessions)

    async def warm(self) -> int:
        """Wait until the pool's size held still for SETTLE_S; return it."""
        deadline, last, since = time.monotonic() + WARM_MAX_S, -1, time.monotonic()
        while time.monotonic() < deadline:
            size = await self.pooled()
            if size != last:
                last, since = size, time.monotonic()
            elif time.monotonic() - since >= SETTLE_S:
                return size
            await asyncio.sleep(0.25)
        return last


def connect(url: str, token: str) -> httpx.AsyncClient:
    """Return an httpx client for a server, allowing many requests at once."""
    return httpx.AsyncClient(base_url=f"{url}/", headers={"Authorization": f"token {token}"},
                             timeout=300, limits=httpx.Limits(max_connections=100))


async def burst_round(pooled: Server, cold: Server, burst: int) -> dict[str, Any]:
    """One round: a single pooled POST, a cold one, then a burst; all deleted after."""
    pool_before = await pooled.warm()
    single, sid = await pooled.create()
    await pooled.delete(sid)
    fresh, sid = await cold.create()
    await cold.delete(sid)
    pool_burst = await pooled.warm()
    made = await asyncio.gather(*(pooled.create() for _ in range(burst)))
    await asyncio.gather(*(pooled.delete(sid) for _, sid in made))
    return {"pool": (pool_before, pool_burst), "single": single, "cold": fresh,
            "burst": sorted(took for took, _ in made)}


async def bench_bursts(pooled: Server, cold: Server, burst: int, rounds: int) -> None:
    """Bursts against a single pooled POST and a cold start, round by round."""
    _, sid = await pooled.create()  # the first session: the pool starts filling after it
    await pooled.delete(sid)
    print(f"\n{burst} POST /sessions at once (ms, sorted), beside one pooled POST and a cold "
          "start of the same round")
    print(f"{'round':>5}  {'pool':>5}  {'pooled':>7}  {'cold':>7}  burst{'':20} "
          "slowest / pooled")
    warm_worst = []
    for index in range(rounds + 1):
        got = await burst_round(pooled, cold, burst)
        worst = got["burst"][-1] / got["single"]
        if index:
            warm_worst.append(worst)
        label = "first" if index == 0 else str(index)
        print(f"{label:>5}  {got['pool'][1]:>5}  {got['single'] * 1000:7.1f}  "
              f"{got['cold'] * 1000:7.1f}  {ms(got['burst']):<25} {worst:6.1f}x")
    if warm_worst:
        print(f"warm bursts: slowest request {min(warm_worst):.1f}-{max(warm_worst):.1f}x a "
              f"pooled POST (goal: pooled speed)")
    shrunk = await pooled.warm()
    print(f"pool after the bursts: {shrunk} kernel(s)")


async def one_round(server: Server, sids: list[str], executes: int) -> tuple[float, str]:
    """All sessions execute `executes` times at once; return p99/p50 and a line of figures."""
    code = "x = sum(range(1000))"

    async def work(sid: str) -> list[tuple[float, float]]:
        return [await server.execute(sid, code) for _ in range(executes)]

    await server.lag()  # a new window
    pairs = [t for each in await asyncio.gather(*(work(sid) for sid in sids)) for t in each]
    times, kernel = [t for t, _ in pairs], [k for _, k in pairs]
    p50, p99 = percentile(times, 50), percentile(times, 99)
    return p99 / p50, (f"p50 {p50 * 1000:6.1f}  p99 {p99 * 1000:6.1f}  max "
                       f"{max(times) * 1000:6.1f}  p99/p50 {p99 / p50:4.1f}x; in the kernel "
                       f"(duration_ms) p50 {percentile(kernel, 50) * 1000:5.1f} p99 "
                       f"{percentile(kernel, 99) * 1000:5.1f}{await server.lag()}")


async def bench_concurrent(servers: dict[str, Server], count: int, executes: int,
                           rounds: int) -> None:
    """`count` sessions executing at once on each server, rounds interleaved: p50, p99."""
    sids = {name: [sid for _, sid in await asyncio.gather(
        *(server.create() for _ in range(count)))] for name, server in servers.items()}
    print(f"\n{count} sessions executing `x = sum(range(1000))` at once, {executes} executes "
          "each (ms, per execute, as the client saw it)")
    ratios: dict[str, list[float]] = {name: [] for name in servers}
    try:
        for name, server in servers.items():
            await asyncio.gather(*(server.execute(sid, "1") for sid in sids[name]))  # warm
            await server.warm()  # the pool's starts (CPU-heavy) are over
        for index in range(rounds):
            for name, server in servers.items():
                ratio, line = await one_round(server, sids[name], executes)
                ratios[name].append(ratio)
                print(f"round {index + 1} {name:<9} {line}")
    finally:
        for name, server in servers.items():
            await asyncio.gather(*(server.delete(sid) for sid in sids[name]))
    for name, got in ratios.items():
        print(f"{name:<9} p99/p50 over {rounds} rounds: {min(got):.1f}-{max(got):.1f}x, "
              f"median {statistics.median(got):.1f}x (goal <= 3x)")


async def run(args: argparse.Namespace) -> None:
    """Start a pooled and a pool-less server; run both measurements."""
    common = [f"--JupyterCI.session_sandbox={args.sandbox}",
              f"--JupyterCI.max_sessions={max(args.burst, args.concurrent) + 2}"]
    with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as root2:
        procs = []
        try:
            procs.append(start_server(root, [*common, *args.option], args.probe))
            # Also the baseline of the concurrent runs: no turns, as before session_run_slots.
            procs.append(start_server(root2, [*common, "--JupyterCI.session_pool=0",
                                              "--JupyterCI.session_run_slots=0"]))
            (_, url, token), (_, url2, token2) = procs
            async with connect(url, token) as http, connect(url2, token2) as http2:
                pooled, cold = Server(http, args.probe), Server(http2)
                if not args.no_burst:
                    await bench_bursts(pooled, cold, args.burst, args.rounds)
                if not args.no_concurrent:
                    await bench_concurrent({"turns": pooled, "no turns": cold}, args.concurrent,
                                           args.executes, args.rounds)
        finally:
            for proc, _, _ in procs:
                proc.terminate()
                proc.wait(30)


def main() -> None:
    """Parse the options and run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--burst", type=int, default=4)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--executes", type=int, default=10)
    parser.add_argument("--sandbox", default="auto", choices=["auto", "always", "never"])
    parser.add_argument("--option", action="append", default=[],
                        help="another option of the pooled server, e.g. "
                        "--option=--JupyterCI.session_pool_max=8")
    parser.add_argument("--probe", action="store_true",
                        help="load bench/loop_probe.py: print the server loop's lag and GCs")
    parser.add_argument("--no-burst", action="store_true")
    parser.add_argument("--no-concurrent", action="store_true")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
