"""Measure what the REST door adds to a kernel round trip, side by side in one run.

Prints ratios with their spread over rounds, not pass/fail: these machines are noisy, so
each figure is compared with its baseline measured in the same round, interleaved.

    python bench/bench_rest.py [--rounds 15] [--repeat 5] [--cells 10] [--steps 4]

Sessions run unboxed (session_sandbox=never) so that their kernels are of the same kind as
the baselines' (python3 over jupyter_client); `--boxed` boxes them as a server does by default.

1. execute of `x = 1`: a raw jupyter_client execute (reply and idle) in a stock kernel
   against REST's JSON execute and its streamed execute (`Accept: text/event-stream`), each
   through one keep-alive httpx connection (goal <= 1.1x); with a raw execute in the
   session's own kernel (what the REST door adds to it) and Jupyter Server's own
   authenticated request floor (`GET /api/status`) for reference;
2. cells per second: the same --cells small cells through REST executes, one after another,
   and all in one execute (`cells`), against nbclient executing them (`execute_cell`) in a
   kernel it started (goal >= 0.9x);
3. one REST ask step beyond its model call (the scripted model `scripted:bench` of the
   server's config answers at once): (ask with --steps steps - ask with none) / steps,
   against a plain REST execute of the same code (goal <= 1.0x).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import nbformat
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import start_new_kernel
from jupyter_core.paths import jupyter_runtime_dir
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).parent))
from bench_sessions import raw_execute, start_server

#: The server's config: `scripted:bench` answers each ask's prompt `steps=N ...` with N code
#: steps of `x = 1`, then a short answer (a callable per turn: it never runs out).
SERVER_CONFIG = """
from collections import Counter
from jupyter_ci.agent.types import ModelReply
from jupyter_ci.models.scripted import code_call, register

_turns = Counter()

def _turn(request):
    _turns[request.prompt] += 1
    steps = int(request.prompt.split()[0].partition("=")[2])
    return code_call("x = 1") if _turns[request.prompt] <= steps else ModelReply(text="done")

register("bench", [_turn] * 1_000_000)
"""
#: Small cells of the kind a notebook is made of: assignments, a print, a value shown.
CELL_SOURCES = ("x = 1", "y = x + 1", "print(y)", "z = [i * i for i in range(100)]",
                "sum(z)", "def f(a):\n    return a + 1", "f(x)", "s = 'abc' * 10",
                "len(s)", "x")


class Rest:
    """A session's routes over one keep-alive connection."""

    def __init__(self, url: str, token: str, server_pid: int) -> None:
        self.server_pid = server_pid
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"token {token}"},
                                 timeout=60)
        reply = self.http.post("jupyter-ci/sessions")
        reply.raise_for_status()
        self.sid = reply.json()["id"]
        self.route = f"jupyter-ci/sessions/{self.sid}"
        # A raw client of the session's own kernel: the baseline "on the same kernel", with
        # the settings the server gives session kernels (kernels.py) that a stock one lacks.
        self.kc = BlockingKernelClient(connection_file=os.path.join(
            jupyter_runtime_dir(), f"kernel-{reply.json()['kernel_id']}.json"))
        self.kc.load_connection_file()
        self.kc.start_channels()
        self.lean = http.client.HTTPConnection(url.split("//", 1)[1], timeout=60)
        self.headers = {"Authorization": f"token {token}"}

    def lean_execute(self, code: str) -> None:
        """Run code through the standard library's HTTP client (httpx costs ~0.4 ms a call)."""
        self.lean.request("POST", f"/{self.route}/execute", json.dumps({"code": code}),
                          self.headers)
        reply = self.lean.getresponse()
        reply.read()
        if reply.status != 200:
            raise RuntimeError(f"execute answered {reply.status}")

    def execute(self, code: str) -> dict[str, Any]:
        """Run code, JSON in and out."""
        reply = self.http.post(f"{self.route}/execute", content=json.dumps({"code": code}))
        reply.raise_for_status()
        result: dict[str, Any] = reply.json()
        return result

    def cells(self, codes: list[str]) -> None:
        """Run cells in one request (`cells`), JSON in and out; check every one ran."""
        reply = self.http.post(f"{self.route}/execute", content=json.dumps({"cells": codes}))
        reply.raise_for_status()
        if reply.json()["status"] != "ok" or len(reply.json()["results"]) != len(codes):
            raise RuntimeError(f"the cells did not all run: {reply.text[:500]}")

    def stream(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST for server-sent events; return the data of the `result` event."""
        with self.http.stream("POST", f"{self.route}/{route}", content=json.dumps(body),
                              headers={"Accept": "text/event-stream"}) as reply:
            reply.raise_for_status()
            event = ""
            for line in reply.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event in ("result", "error"):
                    data: dict[str, Any] = json.loads(line[6:])
                    return data
        raise RuntimeError(f"no result from {route}")

    def floor(self) -> None:
        """Jupyter Server's own cost of one authenticated request."""
        self.http.get("api/status").raise_for_status()

    def same_kernel(self) -> None:
        """One raw execute of `x = 1` in the session's own kernel."""
        raw_execute(self.kc, "x = 1")

    def close(self) -> None:
        """Delete the session; close the connection."""
        self.kc.stop_channels()
        self.http.delete(self.route)
        self.http.close()
        self.lean.close()


def cpu_seconds(pid: int) -> float:
    """Return the CPU seconds a process used so far (Linux: user and system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(fn: Callable[[], Any]) -> float:
    """Return the seconds `fn()` took."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_of(repeat: int, fn: Callable[[], Any]) -> float:
    """Return the median seconds of `repeat` calls of `fn`."""
    return statistics.median(timed(fn) for _ in range(repeat))


class Baselines:
    """A raw jupyter_client kernel and an nbclient kernel, both python3, unboxed."""

    def __init__(self) -> None:
        self.km, self.kc = start_new_kernel(kernel_name="python3")
        new_cell: Callable[..., Any] = nbformat.v4.new_code_cell
        new_notebook: Callable[..., Any] = nbformat.v4.new_notebook
        self.nb = new_notebook(cells=[new_cell(source) for source in CELL_SOURCES])
        self.nbc = NotebookClient(self.nb, kernel_name="python3", timeout=60)
        self.nbc.km = self.nbc.create_kernel_manager()
        self.nbc.start_new_kernel()
        self.nbc.start_new_kernel_client()

    def raw(self) -> None:
        """One raw execute of `x = 1`."""
        raw_execute(self.kc, "x = 1")

    def notebook(self, cells: int) -> None:
        """Run the notebook's first `cells` cells with nbclient."""
        for index, cell in enumerate(self.nb.cells[:cells]):
            self.nbc.execute_cell(cell, index)

    def close(self) -> None:
        """Shut both kernels down."""
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)
        self.nbc._cleanup_kernel()


def one_round(rest: Rest, base: Baselines, args: argparse.Namespace, index: int
              ) -> dict[str, float]:
    """Every measurement once (each the median of --repeat), interleaved."""
    n, codes = args.repeat, CELL_SOURCES[:args.cells]
    samples: dict[str, list[float]] = {"raw": [], "same": [], "rest": [], "lean": [],
                                       "streamed": [], "floor": []}
    for _ in range(n):
        samples["raw"].append(timed(base.raw))
        samples["same"].append(timed(rest.same_kernel))
        samples["rest"].append(timed(lambda: rest.execute("x = 1")))
        samples["lean"].append(timed(lambda: rest.lean_execute("x = 1")))
        samples["streamed"].append(timed(lambda: rest.stream("execute", {"code": "x = 1"})))
        samples["floor"].append(timed(rest.floor))
    found = {name: statistics.median(times) for name, times in samples.items()}
    found["nbclient_cells"] = median_of(max(1, n // 2), lambda: base.notebook(args.cells))
    before = cpu_seconds(rest.server_pid)
    found["rest_cells"] = median_of(max(1, n // 2), lambda: [rest.execute(c) for c in codes])
    found["server_cpu"] = cpu_seconds(rest.server_pid) - before  # ticks of 10 ms: summed
    found["server_cpu_runs"] = max(1, n // 2) * len(codes)
    found["rest_batch"] = median_of(max(1, n // 2), lambda: rest.cells(list(codes)))
    asks, empties = [], []
    for j in range(max(1, n // 2)):
        asks.append(timed(partial(ask, rest, args.steps, f"{index}.{j}")))
        empties.append(timed(partial(ask, rest, 0, f"{index}.{j}")))
    found["step"] = (statistics.median(asks) - statistics.median(empties)) / args.steps
    found["ask_empty"] = statistics.median(empties)
    return found


def ask(rest: Rest, steps: int, tag: str) -> None:
    """Run one ask of `steps` steps with the scripted model; check it ended well."""
    result = rest.stream("ask", {"prompt": f"steps={steps} {tag}", "model": "scripted:bench"})
    if result.get("status") != "done" or len(result.get("steps", ())) != steps:
        raise RuntimeError(f"the bench's ask did not go as scripted: {result}")


def spread(values: list[float]) -> str:
    """Say a ratio's median over rounds and its range."""
    ordered = sorted(values)
    quart = statistics.quantiles(ordered, n=4, method="inclusive") if len(
        ordered) > 1 else ordered * 3
    return (f"{statistics.median(ordered):5.2f}x  (rounds: min {ordered[0]:4.2f}, "
            f"p25 {quart[0]:4.2f}, p75 {quart[2]:4.2f}, max {ordered[-1]:4.2f})")


def report(rounds: list[dict[str, float]], args: argparse.Namespace) -> None:
    """Print each figure, its baseline and the ratio's spread over rounds."""
    def ms(key: str) -> float:
        return statistics.median(r[key] for r in rounds) * 1000

    def ratios(top: Callable[[dict[str, float]], float],
               bottom: Callable[[dict[str, float]], float]) -> str:
        return spread([top(r) / bottom(r) for r in rounds])

    print(f"({len(rounds)} rounds of {args.repeat}; medians over rounds)")
    print(f"raw jupyter_client execute (x = 1)     {ms('raw'):6.2f} ms   (a stock python3 kernel)")
    print(f"  the same, in the session's kernel    {ms('same'):6.2f} ms   ratio "
          f"{ratios(lambda r: r['same'], lambda r: r['raw'])}   (IPython's history written "
          "in batches, no 0.5 ms sleep before each reply)")
    print(f"REST execute, JSON                     {ms('rest'):6.2f} ms   ratio "
          f"{ratios(lambda r: r['rest'], lambda r: r['raw'])}   goal <= 1.1x")
    print(f"  against a raw execute in its kernel              ratio "
          f"{ratios(lambda r: r['rest'], lambda r: r['same'])}   (what the REST door adds)")
    print(f"REST execute, JSON, http.client        {ms('lean'):6.2f} ms   ratio "
          f"{ratios(lambda r: r['lean'], lambda r: r['raw'])}   (the stdlib's client, not httpx)")
    print(f"REST execute, streamed (SSE)           {ms('streamed'):6.2f} ms   ratio "
          f"{ratios(lambda r: r['streamed'], lambda r: r['raw'])}   goal <= 1.1x")
    print(f"  Jupyter Server request floor         {ms('floor'):6.2f} ms   (GET /api/status)")
    print(f"  REST execute less that floor                     ratio "
          f"{ratios(lambda r: r['rest'] - r['floor'], lambda r: r['raw'])}")
    cells = args.cells
    rest_cps = statistics.median(cells / r["rest_cells"] for r in rounds)
    nbc_cps = statistics.median(cells / r["nbclient_cells"] for r in rounds)
    print(f"nbclient, {cells} small cells              {nbc_cps:6.0f} cells/s")
    print(f"REST sessions, the same cells          {rest_cps:6.0f} cells/s   ratio "
          f"{ratios(lambda r: r['nbclient_cells'], lambda r: r['rest_cells'])}   goal >= 0.9x")
    batch_cps = statistics.median(cells / r["rest_batch"] for r in rounds)
    print(f"REST sessions, the same cells at once  {batch_cps:6.0f} cells/s   ratio "
          f"{ratios(lambda r: r['nbclient_cells'], lambda r: r['rest_batch'])}   goal >= 0.9x "
          "(one request: `cells`)")
    cpu = sum(r["server_cpu"] for r in rounds) / sum(r["server_cpu_runs"] for r in rounds)
    print(f"  server CPU per REST execute of them  {cpu * 1000:6.2f} ms   (user + system, "
          "all the server's threads; steadier than wall time on a loaded machine)")
    print(f"REST ask step beyond its model call    {ms('step'):6.2f} ms   ratio "
          f"{ratios(lambda r: r['step'], lambda r: r['rest'])} a REST execute   goal <= 1.0x")
    print(f"  an ask with no step (scripted)       {ms('ask_empty'):6.2f} ms")


def main() -> None:
    """Start a server and the baselines' kernels; run the rounds; print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cells", type=int, default=len(CELL_SOURCES))
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--boxed", action="store_true", help="box the sessions' kernels")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        Path(root, "jupyter_server_config.py").write_text(SERVER_CONFIG)
        sandbox = "auto" if args.boxed else "never"
        server, url, token = start_server(root, 1, 5, [f"--JupyterCI.session_sandbox={sandbox}"])
        base = Baselines()
        rest = Rest(url, token, server.pid)
        try:
            one_round(rest, base, args, -1)  # warm every path
            rounds = [one_round(rest, base, args, i) for i in range(args.rounds)]
            report(rounds, args)
        finally:
            rest.close()
            base.close()
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()
