"""Measure what the sandbox costs, boxed against unboxed, side by side in one run.

Prints ratios, not pass/fail: these machines are noisy, so each figure is compared with its
baseline measured in the same run, interleaved.

    python bench/bench_sandbox.py [--rounds 10] [--executes 200]

1. cold start: a `python3-sandboxed` kernel against a `python3` one, start to kernel_info;
2. POST /sessions from the pool of a server whose sessions are boxed, against one whose
   sessions are not (goal: pooled start unchanged);
3. execute round trip of `x = 1` in a boxed kernel against an unboxed one, over
   jupyter_client (ZMQ: ipc in the box, tcp outside; goal <= 1.1x).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from bench_sessions import start_server
from jupyter_client.manager import AsyncKernelManager

from jupyter_ci.client import Client


async def cold_start(name: str) -> tuple[float, AsyncKernelManager]:
    """Start a kernel of `name`; return seconds to its kernel_info reply, and its manager."""
    km = AsyncKernelManager(kernel_name=name)
    began = time.perf_counter()
    await km.start_kernel(cwd=tempfile.mkdtemp())
    client = km.client()
    client.start_channels()
    await client.wait_for_ready(timeout=60)
    took = time.perf_counter() - began
    client.stop_channels()
    return took, km


async def round_trips(km: AsyncKernelManager, count: int) -> list[float]:
    """Return the seconds of `count` executes of `x = 1`, each to its idle status."""
    client = km.client()
    client.start_channels()
    await client.wait_for_ready(timeout=60)
    times = []
    for _ in range(count):
        began = time.perf_counter()
        msg_id = client.execute("x = 1")
        while True:
            msg = await client.get_iopub_msg(timeout=30)
            if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle"):
                break
        times.append(time.perf_counter() - began)
    client.stop_channels()
    return times


async def kernels(rounds: int, executes: int) -> None:
    """Cold starts and execute round trips, boxed and not, interleaved."""
    starts: dict[str, list[float]] = {"python3": [], "python3-sandboxed": []}
    trips: dict[str, list[float]] = {"python3": [], "python3-sandboxed": []}
    for _ in range(rounds):
        for name in starts:
            took, km = await cold_start(name)
            starts[name].append(took)
            trips[name] += await round_trips(km, executes // rounds)
            await km.shutdown_kernel(now=True)
    report("cold start", starts)
    report("execute round trip", trips)


def sessions(rounds: int) -> None:
    """POST /sessions from the pool, on a server that boxes sessions and one that does not."""
    created: dict[str, list[float]] = {"python3": [], "python3-sandboxed": []}
    for mode, name in (("never", "python3"), ("always", "python3-sandboxed")):
        root = tempfile.mkdtemp()
        proc, url, token = start_server(root, pool=1, max_sessions=4,
                                        extra=[f"--JupyterCI.session_sandbox={mode}"])
        try:
            with Client(url, token) as client:
                client.session().delete()  # the first session starts the pool
                for _ in range(rounds):
                    time.sleep(1.5)  # the pool refills
                    began = time.perf_counter()
                    session = client.session()
                    created[name].append(time.perf_counter() - began)
                    assert session.info["kernel_name"] == name, session.info
                    session.delete()
        finally:
            proc.terminate()
            proc.wait(30)
    report("POST /sessions from the pool", created)


def report(what: str, runs: dict[str, list[float]]) -> None:
    """Print the medians in ms and the boxed/unboxed ratio."""
    plain, boxed = (statistics.median(runs[n]) for n in ("python3", "python3-sandboxed"))
    print(f"{what:32} boxed {boxed * 1000:8.1f} ms   unboxed {plain * 1000:8.1f} ms   "
          f"{boxed / plain:5.2f}x   (n={len(runs['python3'])})")


def main() -> None:
    """Run the three measurements."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--executes", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(kernels(args.rounds, args.executes))
    sessions(args.rounds)


if __name__ == "__main__":
    main()
