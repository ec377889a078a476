"""Measure the server's event-loop lag while many model turns stream through its model service.

Prints figures side by side from one run, not pass/fail: these machines are noisy.

    python bench/bench_loop_lag.py [--streams 200] [--deltas 300] [--rate 50] [--seconds 15]
                                   [--provider openai|anthropic] [--burst] [--worst 5]

A real `jupyter server` with the extension (bench_sessions.start_server) holds keys for a
fake provider, an asyncio server in a process of its own (every reply pre-encoded, so it
costs little): each turn streams `--deltas` text deltas in the provider's real wire format,
each its own HTTP chunk, `--rate` deltas a second (0: as fast as it can). `--streams`
clients POST turns to the model service with a kernel's credential (as a kernel's %%ask
does) and read the JSON lines back, each starting its next turn when one ends: the clients
start at random moments of one turn's length (`--burst`: all at once), and the lag is
measured for `--seconds` after that. Inside the server, the `loop_probe` extension
(bench/loop_probe.py) records how late a `loop.call_later` callback fires, every 5 ms, idle
and then under that load, and how much of each delay the loop's own thread ran (the rest:
waiting for a core, which the fake provider, the clients and other jobs share). Goal: p99
<= 20 ms. Also printed: the turns' throughput and latency, each process's CPU, and with
`--worst N` the N latest ticks and the garbage collections. `--profile FILE` writes
cProfile's view of the loaded server's loop there (it slows the loop several times).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from bench_sessions import percentile, start_server
from notebook_kernel import NotebookKernel

from jupyter_ci.server.broker.broker import BROKER_ROUTE

KEY = "sk-test-0123456789abcdefghij"
MODELS = {"openai": "openai:gpt-test", "anthropic": "anthropic:claude-test"}
WORDS = ["The", "loop", "stays", "responsive", "while", "many", "replies", "stream", "through",
         "it", "at", "once."]


# --------------------------------------------------------------------------- fake provider

def reply_frames(provider: str, deltas: int) -> list[bytes]:
    """Return one streamed reply of `deltas` text deltas as HTTP chunks, one event each."""
    from tests.fakellm_wire import anthropic_events, openai_chunks

    text = "".join(f"{WORDS[n % len(WORDS)]} " for n in range(deltas))
    pieces = [f"{WORDS[n % len(WORDS)]} " for n in range(deltas)]
    events: list[tuple[str | None, Any]]
    if provider == "openai":
        chunks = list(openai_chunks("", [], model="gpt-test", chunk_chars=4,
                                    usage=(40, deltas, 0)))
        head, tail = chunks[0], chunks[1:]
        body = [{**head, "choices": [{**head["choices"][0], "delta": {"content": p}}]}
                for p in pieces]
        events = [(None, c) for c in [head, *body, *tail]] + [(None, "[DONE]")]
    else:
        events = list(anthropic_events(text, [], model="claude-test", chunk_chars=len(text),
                                       usage=(40, deltas, 0)))
        delta = next(e for e in events if e[0] == "content_block_delta")
        at = events.index(delta)
        events[at:at + 1] = [(delta[0], {**delta[1], "delta": {"type": "text_delta", "text": p}})
                             for p in pieces]
    frames = []
    for name, data in events:
        head_line = f"event: {name}\n" if name else ""
        payload = f"{head_line}data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
        raw = payload.encode()
        frames.append(b"%x\r\n%s\r\n" % (len(raw), raw))
    return frames


@dataclass
class FakeProvider:
    """Stream the same reply to every model request, paced; keep connections alive."""

    frames: dict[str, list[bytes]]
    rate: float

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer requests on one connection until the client closes it."""
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                length = 0
                for header in head.split(b"\r\n")[1:]:
                    name, _, value = header.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                await reader.readexactly(length)
                await self.stream(writer, "openai" if "chat/completions" in path else "anthropic")
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def stream(self, writer: asyncio.StreamWriter, provider: str) -> None:
        """Send one reply, its events `rate` a second."""
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n\r\n")
        frames, start, sent = self.frames[provider], time.perf_counter(), 0
        while sent < len(frames):
            # Every event due by now in one write: a fake that falls behind catches up.
            due = int((time.perf_counter() - start) * self.rate) + 1 if self.rate else 1 << 30
            writer.write(b"".join(frames[sent:due]))
            sent = min(due, len(frames))
            if writer.transport.get_write_buffer_size() > 65536:
                await writer.drain()
            if self.rate and sent < len(frames):
                await asyncio.sleep(max(start + sent / self.rate - time.perf_counter(), 0))
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def serve_fake(fake: FakeProvider) -> tuple[Any, str]:
    """Serve `fake` on 127.0.0.1 in a process of its own (not a thread beside the clients:
    two busy threads would take turns at the GIL); return the process and its URL."""
    ours, theirs = multiprocessing.Pipe()
    process = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(fake, theirs), daemon=True)
    process.start()
    return process, str(ours.recv())


def _serve(fake: FakeProvider, conn: Connection) -> None:
    """Serve `fake` until killed; send its URL first."""
    async def main() -> None:
        server = await asyncio.start_server(fake.handle, "127.0.0.1", 0, backlog=1024)
        conn.send(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        await server.serve_forever()

    asyncio.run(main())


# ------------------------------------------------------------------------------ the load

@dataclass
class Load:
    """What the clients saw: per turn, seconds to the first text and to the end."""

    first: list[float] = field(default_factory=list)
    whole: list[float] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


async def one_turn(service_url: str, credential: str, body: bytes, load: Load) -> None:
    """POST one turn to the model service as a kernel does; read its JSON lines to the end."""
    url = urlsplit(service_url)
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    writer.write(f"POST {url.path}/turn HTTP/1.1\r\nHost: {url.netloc}\r\n"
                 f"Authorization: Bearer {credential}\r\nContent-Length: {len(body)}\r\n"
                 "Content-Type: application/json\r\nConnection: close\r\n\r\n".encode() + body)
    received, first = bytearray(), 0.0
    while chunk := await reader.read(65536):
        if not first and b'{"text"' in chunk:
            first = time.perf_counter() - start
        received += chunk
    writer.close()
    if not received.startswith(b"HTTP/1.1 200") or b'{"reply"' not in received:
        load.failed.append(bytes(received[:300]).decode("utf-8", "replace"))
        return
    load.first.append(first)
    load.whole.append(time.perf_counter() - start)


async def run_load(service_url: str, credential: str, model: str, streams: int,
                   seconds: float, ramp: float) -> tuple[Load, float]:
    """Keep `streams` turns streaming for `seconds`; return what they saw and the time taken.

    Each client starts at a random moment of the first `ramp` seconds (0: all at once), so
    that turns start and end at random moments, as independent asks do.
    """
    body = json.dumps({"model": model, "system": "You are a data analyst.", "prompt": "hi",
                       "max_tokens": 1024, "tools": ["run_python"],
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    load, deadline = Load(), time.perf_counter() + seconds
    starts = random.Random(24).uniform

    async def worker() -> None:
        await asyncio.sleep(starts(0, ramp))
        while time.perf_counter() < deadline:
            await one_turn(service_url, credential, body, load)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(streams)))
    return load, time.perf_counter() - start


# ------------------------------------------------------------------------------- figures

def kernel_credential(url: str, token: str) -> str:
    """Read a notebook kernel's credential, as its code could (the kernel stays up; a REST
    session's kernel holds none)."""
    kernel = NotebookKernel(url, token)
    return kernel.execute("import os\nprint(os.environ['JUPYTER_CI_BROKER_TOKEN'])").strip()


Window = tuple[list[float], list[float], list[float]]


def lag_window(http: httpx.Client, worst: int = 0) -> Window:
    """Return the lags (ms) the server recorded since the last call: wall, loop CPU and
    garbage collection; print the `worst` of them, with when they ended, and the longest
    garbage collections."""
    window = http.get("/bench/looplag").json()
    ticks = window["ticks"]
    for late, ran, when, collected in sorted(ticks, reverse=True)[:worst]:
        print(f"  tick late {late:8.1f} ms (loop ran {ran:8.1f} ms, garbage collection "
              f"{collected:6.1f} ms), ended at {when - ticks[0][2]:6.2f} s")
    if worst:
        for generation in range(3):
            took = [ms for g, ms in window["gc"] if g == generation]
            print(f"  gc generation {generation}: {len(took)} collections, "
                  f"{sum(took):.0f} ms in all, the longest {max(took, default=0):.1f} ms")
    return [t[0] for t in ticks], [t[1] for t in ticks], [t[3] for t in ticks]


def row(label: str, values: list[float]) -> str:
    """Format p50, p99 and max of `values` (ms)."""
    return (f"{label:34} p50 {percentile(values, 50):6.2f} ms   p99 {percentile(values, 99):6.2f}"
            f" ms   max {max(values):7.2f} ms   ({len(values)} ticks)")


def report(args: argparse.Namespace, idle: Window, busy: Window, load: Load, took: float
           ) -> None:
    """Print the lag idle and under load side by side, and the turns' throughput."""
    print(f"event-loop lag of the server (5 ms call_later ticks), {args.provider}, "
          f"{args.deltas} deltas a turn at {args.rate or 'unpaced'}/s per stream, "
          + ("all starting at once" if args.burst or not args.rate else
             "each client starting at a random moment of the first turn, measured after"))
    print(row("idle", idle[0]))
    print(row(f"{args.streams} streams", busy[0]) + "   (goal p99 <= 20 ms)")
    print(row("  of which the loop ran, idle", idle[1]))
    print(row(f"  of which the loop ran, {args.streams} str.", busy[1]))
    print(row(f"  of which collecting garbage, {args.streams}", busy[2]))
    turns = len(load.whole)
    if turns:
        print(f"turns: {turns} in {took:.1f} s = {turns / took:6.1f}/s, text deltas "
              f"{turns * args.deltas / took:6.0f}/s; per turn first text p50 "
              f"{statistics.median(load.first) * 1e3:6.1f} ms p99 "
              f"{percentile(load.first, 99) * 1e3:6.1f} ms, whole p50 "
              f"{statistics.median(load.whole):5.2f} s p99 {percentile(load.whole, 99):5.2f} s")
    if load.failed:
        print(f"FAILED turns: {len(load.failed)}; the first: {load.failed[0]!r}")


def cpu_seconds(pid: int) -> float:
    """Return the CPU time a process has used (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(args: argparse.Namespace, url: str, token: str, pids: dict[str, int]) -> None:
    """Idle window, warm-up, then the loaded window (optionally profiled)."""
    model = MODELS[args.provider]
    with httpx.Client(base_url=url, headers={"Authorization": f"token {token}"},
                      timeout=60) as http:
        # A boxed kernel reaches the service through a socket in its box; the same routes,
        # for the same credential, are on the server's port.
        service_url, credential = f"{url}/{BROKER_ROUTE}", kernel_credential(url, token)
        asyncio.run(run_load(service_url, credential, model, min(args.streams, 20), 1.0, 0))
        lag_window(http)
        time.sleep(args.idle)
        idle = lag_window(http)
        if args.profile:
            http.post("/bench/profile", content=b"")
        cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
        ramp = 0.0 if args.burst or not args.rate else args.deltas / args.rate
        if ramp:  # the window starts once every client streams
            threading.Timer(ramp, lag_window, [http]).start()
        load, took = asyncio.run(run_load(service_url, credential, model, args.streams,
                                          ramp + args.seconds, ramp))
        used = {name: (cpu_seconds(pid) - cpu[name]) / took for name, pid in pids.items()}
        busy = lag_window(http, args.worst)
        if args.profile:
            Path(args.profile).write_text(http.delete("/bench/profile").text)
    report(args, idle, busy, load, took)
    print("CPU under load, of a core: " + ", ".join(f"{k} {v:.0%}" for k, v in used.items())
          + f"; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def main() -> None:
    """Start a fake provider and a server whose model service holds its keys; measure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=200, help="turns streaming at once")
    parser.add_argument("--deltas", type=int, default=300, help="text deltas in each reply")
    parser.add_argument("--rate", type=float, default=50.0,
                        help="deltas a second per stream (0: as fast as the fake can)")
    parser.add_argument("--seconds", type=float, default=15.0, help="length of the load")
    parser.add_argument("--idle", type=float, default=3.0, help="length of the idle window")
    parser.add_argument("--provider", choices=sorted(MODELS), default="openai")
    parser.add_argument("--profile", metavar="FILE", help="write cProfile's top functions")
    parser.add_argument("--worst", type=int, default=0, help="print the N latest ticks")
    parser.add_argument("--burst", action="store_true",
                        help="start every client at once and measure from then (default: "
                        "each starts at a random moment of one turn's length, measured after)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo, for tests/
    fake, fake_url = serve_fake(FakeProvider({p: reply_frames(p, args.deltas) for p in MODELS},
                                             args.rate))
    with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as data:
        os.environ.update({
            "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": f"{fake_url}/v1",
            "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake_url, "JUPYTER_DATA_DIR": data})
        # start_server's JUPYTER_CONFIG_DIR is `root`: the probe is enabled there.
        enabled = Path(root, "jupyter_server_config.d")
        enabled.mkdir()
        (enabled / "loop_probe.json").write_text(
            json.dumps({"ServerApp": {"jpserver_extensions": {"loop_probe": True}}}))
        server, url, token = start_server(root, 0, 3)
        try:
            measure(args, url, token, {"the server": server.pid, "the fake provider": fake.pid,
                                       "the clients": os.getpid()})
        finally:
            server.terminate()
            server.wait(30)
            fake.terminate()


if __name__ == "__main__":
    main()
