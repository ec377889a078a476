"""Measure the REST sessions against the plain jupyter_client path, side by side in one run.

Prints ratios, not pass/fail: these machines are noisy, so each figure is compared with its
baseline measured in the same run, interleaved.

    python bench/bench_sessions.py [--rounds 30] [--concurrent 20]

1. execute of `x = 1`: REST (POST .../execute through Jupyter Server, JSON) against a raw
   jupyter_client execute on a kernel of the same kind (goal <= 1.1x; bench_rest.py prints it
   with the streamed execute, nbclient's cells per second and a REST ask step, with spread);
2. POST /sessions taking a pooled kernel against one that starts a kernel cold;
3. `--concurrent` sessions executing at once: p50 and p99 of one execute.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from jupyter_client.manager import start_new_kernel

from jupyter_ci.client import Client


def free_port() -> int:
    """Return a TCP port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(root: str, pool: int, max_sessions: int, extra: Sequence[str] = (),
                 python: str = sys.executable) -> tuple[subprocess.Popen[bytes], str, str]:
    """Start `jupyter server` with the extension (on `python`); return it, its URL and token."""
    return launch(root, [f"--JupyterCI.session_pool={pool}",
                         f"--JupyterCI.max_sessions={max_sessions}", *extra], python=python)


def launch(root: str, options: Sequence[str], extensions: Sequence[str] = ("jupyter_ci",),
           python: str = sys.executable) -> tuple[subprocess.Popen[bytes], str, str]:
    """Start `jupyter server` with `extensions` and `options`; return it, its URL and token
    once it answers (this folder on its PYTHONPATH: the benches' own extensions load)."""
    port, token = free_port(), secrets.token_hex(16)
    enabled = "{" + ", ".join(f"'{name}': True" for name in extensions) + "}"
    args = [python, "-m", "jupyter_server", "--no-browser", f"--port={port}",
            f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
            f"--ServerApp.jpserver_extensions={enabled}", *options,
            *(["--allow-root"] if os.geteuid() == 0 else [])]
    path = os.pathsep.join(filter(None, [os.path.dirname(os.path.abspath(__file__)),
                                         os.environ.get("PYTHONPATH")]))
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "JUPYTER_CONFIG_DIR": root, "PYTHONPATH": path})
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(f"{url}/api/status", headers={"Authorization": f"token {token}"}, timeout=1)
            return proc, url, token
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("jupyter server did not start")


def raw_execute(kc: Any, code: str) -> float:
    """Run code with jupyter_client; return wall seconds until its reply and idle status."""
    start = time.perf_counter()
    msg_id = kc.execute(code)
    while kc.get_shell_msg(timeout=60)["parent_header"].get("msg_id") != msg_id:
        pass
    while True:
        msg = kc.get_iopub_msg(timeout=10)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status" and \
                msg["content"]["execution_state"] == "idle":
            return time.perf_counter() - start


def timed(fn: Any) -> float:
    """Return the seconds `fn()` took."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    """Return the q-th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def bench_execute(client: Client, rounds: int) -> None:
    """REST execute against raw jupyter_client, interleaved."""
    km, kc = start_new_kernel(kernel_name="python3")
    rest, raw, floor = [], [], []
    with client.session() as py:
        for _ in range(5):  # warm both paths
            py.execute("x = 1")
            raw_execute(kc, "x = 1")
        for _ in range(rounds):
            rest.append(timed(lambda: py.execute("x = 1")))
            raw.append(raw_execute(kc, "x = 1"))
            # Jupyter Server's own cost of one authenticated request, whatever it does.
            floor.append(timed(lambda: client.http.get("api/status").raise_for_status()))
    kc.stop_channels()
    km.shutdown_kernel(now=True)
    r, b, f = statistics.median(rest), statistics.median(raw), statistics.median(floor)
    print(f"raw jupyter_client execute           {b * 1000:7.2f} ms")
    print(f"REST execute (x = 1)                  {r * 1000:7.2f} ms   ratio {r / b:5.2f}x "
          "(goal <= 1.1x)")
    print(f"  Jupyter Server request floor        {f * 1000:7.2f} ms   (GET /api/status, "
          "same client)")
    print(f"  REST execute less that floor        {(r - f) * 1000:7.2f} ms   ratio "
          f"{(r - f) / b:5.2f}x (what jupyter-ci itself adds)")


def bench_create(client: Client, cold: Client, rounds: int) -> None:
    """POST /sessions from the pool against a cold start, interleaved."""
    pooled, fresh = [], []
    for _ in range(rounds):
        time.sleep(3)  # let the pool refill
        started = time.perf_counter()
        warm = client.session()
        pooled.append(time.perf_counter() - started)
        started = time.perf_counter()
        fresh_one = cold.session()
        fresh.append(time.perf_counter() - started)
        warm.delete()
        fresh_one.delete()
    p, f = statistics.median(pooled), statistics.median(fresh)
    print(f"POST /sessions, cold kernel start     {f * 1000:7.1f} ms")
    print(f"POST /sessions, pooled kernel         {p * 1000:7.1f} ms   ratio {p / f:5.2f}x")


def bench_concurrent(client: Client, count: int, rounds: int) -> None:
    """`count` sessions executing at once: the latency of one execute."""
    sessions = [client.session() for _ in range(count)]
    times: list[float] = []

    def work(index: int) -> list[float]:
        return [timed(lambda: sessions[index].execute("x = sum(range(1000))"))
                for _ in range(rounds)]

    try:
        with ThreadPoolExecutor(count) as pool:
            for result in pool.map(work, range(count)):
                times.extend(result)
    finally:
        for session in sessions:
            session.delete()
    print(f"{count} sessions executing at once        p50 {percentile(times, 50) * 1000:7.1f} ms"
          f"   p99 {percentile(times, 99) * 1000:7.1f} ms   ({len(times)} executes)")


def main() -> None:
    """Run the three measurements against one pooled and one pool-less server."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--concurrent", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as root2:
        server, url, token = start_server(root, 1, args.concurrent + 5)
        bare, url2, token2 = start_server(root2, 0, 5)
        try:
            with Client(url, token) as client, Client(url2, token2) as cold:
                bench_execute(client, args.rounds)
                bench_create(client, cold, max(3, args.rounds // 6))
                bench_concurrent(client, args.concurrent, max(3, args.rounds // 6))
        finally:
            for proc in (server, bare):
                proc.terminate()
                proc.wait(30)


if __name__ == "__main__":
    main()
