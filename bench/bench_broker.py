"""Measure what the key broker adds to a streamed model reply, side by side in one run.

Prints ratios, not pass/fail: these machines are noisy, so each figure is compared with its
baseline measured in the same run, interleaved.

    python bench/bench_broker.py [--rounds 30] [--concurrent 200]

1. time to first token and total time of a streamed Chat Completions reply, straight to the
   (fake) provider against through the broker (goal <= 1.05x plus 2 ms);
2. the server's event-loop lag while `--concurrent` streamed replies pass through the broker
   at once, measured inside the server by bench/looplag.py (goal p99 <= 20 ms), and the
   latency of GET /api/status a client sees meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from bench_sessions import percentile, start_server

from jupyter_ci.client import Client

BODY = {"model": "gpt-test", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
KEY = "sk-test-0123456789abcdefghij"


def stream(http: httpx.Client, url: str, headers: dict[str, str]) -> tuple[float, float]:
    """POST a streamed chat completion; return (seconds to the first chunk, to the end)."""
    start = time.perf_counter()
    first = 0.0
    with http.stream("POST", url, json=BODY, headers=headers) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data:") and not first:
                first = time.perf_counter() - start
    return first, time.perf_counter() - start


def broker_credentials(client: Client) -> tuple[str, str]:
    """Read a kernel's broker URL and token, as model-written code could, from a session."""
    session = client.session()  # kept for the run: its kernel's token dies with it
    out = session.execute("import os, json\nprint(json.dumps([os.environ["
                          "'JUPYTER_CI_BROKER_URL'], os.environ['JUPYTER_CI_BROKER_TOKEN']]))")
    broker, kernel_token = json.loads(out.outputs[0]["text"])
    return str(broker), str(kernel_token)


def bench_stream(fake: Any, reply: Any, broker: str, kernel_token: str, rounds: int) -> None:
    """Direct against brokered, interleaved."""
    direct_url = f"{fake.openai_base_url}/chat/completions"
    via_url = f"{broker}/openai/chat/completions"
    auth = {"Authorization": f"Bearer {kernel_token}"}
    direct: list[tuple[float, float]] = []
    via: list[tuple[float, float]] = []
    with httpx.Client(timeout=60) as http:
        fake.push(*[reply] * (2 * rounds + 10))
        for _ in range(5):
            stream(http, direct_url, {"Authorization": f"Bearer {KEY}"})
            stream(http, via_url, auth)
        for _ in range(rounds):
            direct.append(stream(http, direct_url, {"Authorization": f"Bearer {KEY}"}))
            via.append(stream(http, via_url, auth))
    for label, index in (("first token", 0), ("whole reply", 1)):
        d = statistics.median(t[index] for t in direct)
        v = statistics.median(t[index] for t in via)
        print(f"{label:12} direct {d * 1000:6.2f} ms   via broker {v * 1000:6.2f} ms   ratio "
              f"{v / d:5.2f}x   extra {(v - d) * 1000:5.2f} ms (goal <= 1.05x + 2 ms)")


def bench_lag(fake: Any, reply: Any, url: str, token: str, broker: str, kernel_token: str,
              concurrent: int) -> None:
    """The server's event-loop lag (bench/looplag.py) idle, then under `concurrent` streams."""
    headers = {"Authorization": f"token {token}"}

    def window() -> tuple[list[float], list[float]]:
        pairs = httpx.get(f"{url}/bench/looplag", headers=headers, timeout=30).json()
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def probe(until: threading.Event) -> list[float]:
        times = []
        with httpx.Client(timeout=30) as http:
            while not until.is_set():
                start = time.perf_counter()
                http.get(f"{url}/api/status", headers=headers)
                times.append(time.perf_counter() - start)
                time.sleep(0.005)
        return times

    window()
    idle_stop = threading.Event()
    threading.Timer(2.0, idle_stop.set).start()
    idle_status = probe(idle_stop)
    idle, _ = window()
    fake.push(*[reply] * (concurrent + 10))

    async def load() -> None:
        auth = {"Authorization": f"Bearer {kernel_token}"}
        limits = httpx.Limits(max_connections=concurrent)
        async with httpx.AsyncClient(timeout=120, limits=limits) as http:
            async def one() -> None:
                async with http.stream("POST", f"{broker}/openai/chat/completions", json=BODY,
                                       headers=auth) as response:
                    response.raise_for_status()
                    async for _ in response.aiter_bytes():
                        pass
            await asyncio.gather(*(one() for _ in range(concurrent)))

    busy_stop = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        probing = pool.submit(probe, busy_stop)
        started = time.perf_counter()
        asyncio.run(load())
        took = time.perf_counter() - started
        busy_stop.set()
        busy_status = probing.result()
    busy, held = window()
    print(f"event-loop lag, idle                 p50 {percentile(idle, 50):6.2f} ms   p99 "
          f"{percentile(idle, 99):6.2f} ms   max {max(idle):6.2f} ms")
    print(f"event-loop lag, {concurrent} streams          p50 {percentile(busy, 50):6.2f} ms"
          f"   p99 {percentile(busy, 99):6.2f} ms   max {max(busy):6.2f} ms (goal p99 <= 20 "
          f"ms; {concurrent} replies in {took:.1f} s)")
    print(f"  of which the loop ran callbacks      p50 {percentile(held, 50):6.2f} ms   p99 "
          f"{percentile(held, 99):6.2f} ms   max {max(held):6.2f} ms (its thread's CPU time; "
          "the rest is waiting for a core)")
    print(f"GET /api/status, idle               p50 {statistics.median(idle_status) * 1000:6.2f}"
          f" ms   with {concurrent} streams p50 {percentile(busy_status, 50) * 1000:6.2f} ms "
          f"p99 {percentile(busy_status, 99) * 1000:6.2f} ms (seen from a client sharing the "
          "2 cores)")


def main() -> None:
    """Start a fake provider and a server whose broker holds its key; measure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--concurrent", type=int, default=200)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo, for tests/
    from tests.fakellm import FakeLLM, Turn

    reply = Turn("The broker forwards this reply chunk by chunk. " * 8, chunk_chars=8)
    with FakeLLM(strict=False) as fake, tempfile.TemporaryDirectory() as root:
        os.environ.update({"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake.openai_base_url})
        server, url, token = start_server(root, 0, 5, looplag=True)
        try:
            with Client(url, token) as client:
                broker, kernel_token = broker_credentials(client)
                bench_stream(fake, reply, broker, kernel_token, args.rounds)
                bench_lag(fake, reply, url, token, broker, kernel_token, args.concurrent)
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()
