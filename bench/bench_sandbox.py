"""Measure what the sandbox costs, boxed against unboxed, side by side in one run.

Prints ratios, not pass/fail: these machines are noisy, so each figure is compared with its
baseline measured in the same run, interleaved.

    python bench/bench_sandbox.py [--rounds 10] [--executes 200]

1. cold start: a `python3-sandboxed` kernel against a `python3` one, start to kernel_info;
2. POST /sessions from the pool of a server whose sessions are boxed, against one whose
   sessions are not (goal: pooled start unchanged);
3. execute round trip of `x = 1` in a boxed kernel against an unboxed one, over
   jupyter_client (ZMQ: ipc in the box, tcp outside; goal <= 1.1x);
4. a notebook's kernel as JupyterLab gets it, from a server that boxes notebooks (the
   default) against one that does not (`notebook_sandbox = "never"`): the start (POST
   /api/sessions to the first execute's idle, over the kernel's websocket; goal <= 1.15x) and
   the execute round trip over the websocket (goal <= 1.1x).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from typing import Any

import httpx
import websocket
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


def notebook_execute(ws: Any, code: str) -> float:
    """Run `code` over a kernel's websocket as a page does; return seconds to its idle."""
    msg_id = uuid.uuid4().hex
    began = time.perf_counter()
    ws.send(json.dumps({"header": {"msg_id": msg_id, "msg_type": "execute_request",
                                   "username": "", "session": "bench", "version": "5.3"},
                        "parent_header": {}, "metadata": {}, "channel": "shell",
                        "content": {"code": code, "silent": False, "store_history": True,
                                    "user_expressions": {}, "allow_stdin": False}}))
    while True:
        msg = json.loads(ws.recv())
        if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"):
            return time.perf_counter() - began


def notebook_kernels(rounds: int, executes: int) -> None:
    """A notebook's kernel from a server that boxes it and one that does not, interleaved."""
    starts: dict[str, list[float]] = {"python3": [], "python3-sandboxed": []}
    trips: dict[str, list[float]] = {"python3": [], "python3-sandboxed": []}
    servers = {name: start_server(tempfile.mkdtemp(), pool=0, max_sessions=4,
                                  extra=[f"--JupyterCI.notebook_sandbox={mode}"])
               for name, mode in (("python3", "never"), ("python3-sandboxed", "auto"))}
    try:
        for round_ in range(rounds + 1):  # the first round warms each server up, unmeasured
            for name, (_proc, url, token) in servers.items():
                headers = {"Authorization": f"token {token}"}
                began = time.perf_counter()
                made = httpx.post(f"{url}/api/sessions", headers=headers, timeout=60, json={
                    "path": f"nb{round_}.ipynb", "name": f"nb{round_}.ipynb",
                    "type": "notebook", "kernel": {"name": "python3"}}).json()
                kernel = made["kernel"]["id"]
                ws = websocket.create_connection(
                    f"{url.replace('http', 'ws')}/api/kernels/{kernel}/channels?token={token}")
                notebook_execute(ws, "x = 1")
                took = time.perf_counter() - began
                box = httpx.get(f"{url}/jupyter-ci/box?kernel={kernel}", headers=headers).json()
                assert box["boxed"] is (name != "python3"), box
                times = [notebook_execute(ws, "x = 1") for _ in range(executes // rounds)]
                ws.close()
                httpx.delete(f"{url}/api/sessions/{made['id']}", headers=headers, timeout=60)
                if round_:
                    starts[name].append(took)
                    trips[name] += times
    finally:
        for proc, _url, _token in servers.values():
            proc.terminate()
            proc.wait(30)
    report("notebook kernel start", starts)
    report("notebook execute (websocket)", trips)


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
    notebook_kernels(args.rounds, args.executes)


if __name__ == "__main__":
    main()
