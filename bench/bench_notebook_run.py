"""Measure run_in_notebook's call (POST /jupyter-ci/notebooks/run) before and after a change,
side by side in one run, interleaved.

Two servers are started on this machine: one runs jupyter-ci as committed at `--before` (a
git revision, extracted with `git archive`; server and kernel import it through PYTHONPATH),
one runs this tree. Each has a notebook open in a page (tests/fakepage.py: what the
labextension does, over a kernel client) whose kernel loaded jupyter-ci. Each round makes one
call on each server, in turn; printed are the median per-call times, their ratio
(after / before), and how many of the calls' cells the page filled (count and outputs).

    python bench/bench_notebook_run.py [--rounds 20] [--before 665e4ec~1]

665e4ec~1 opened a kernel client for each call (~200 ms) and left every cell but a kernel's
first empty in the page (issue 34, point 5).
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
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import nbformat
from bench_sessions import launch
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_core.paths import jupyter_runtime_dir

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = "bench.ipynb"
CODE = "print('hi')\n6 * 7"


@asynccontextmanager
async def notebook_server(tree: Path | None) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """Start a server (jupyter-ci from `tree`, or this one's), a notebook open in a page."""
    from tests.fakepage import FakePage

    root = tempfile.mkdtemp(prefix="bench-nbrun-")
    nbformat.write(nbformat.v4.new_notebook(), os.path.join(root, NOTEBOOK))
    saved, here = os.environ.get("PYTHONPATH"), os.getcwd()
    if tree is not None:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), saved]))
    os.chdir(root)  # `python -m` puts its folder first on sys.path: not this repo's
    try:
        proc, url, token = launch(root, ["--JupyterCI.session_pool=0"])
    finally:
        os.chdir(here)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    http = httpx.AsyncClient(base_url=url, headers={"Authorization": f"token {token}"},
                             timeout=120)
    try:
        session = (await http.post("/api/sessions", json={
            "path": NOTEBOOK, "name": NOTEBOOK, "type": "notebook",
            "kernel": {"name": "python3"}})).json()
        client = AsyncKernelClient(connection_file=os.path.join(
            jupyter_runtime_dir(), f"kernel-{session['kernel']['id']}.json"))
        client.load_connection_file()
        async with FakePage(client, NOTEBOOK) as page:
            client.execute("%load_ext jupyter_ci")  # what the page does before its first run
            await http.post("/jupyter-ci/notebooks/run", json={"path": NOTEBOOK, "code": "1"})
            await page.settled(1)
            page.done.clear()
            yield http, page
    finally:
        await http.aclose()
        proc.terminate()
        proc.wait(30)


async def call(http: httpx.AsyncClient) -> float:
    """Return the seconds one run_in_notebook call took."""
    start = time.perf_counter()
    reply = await http.post("/jupyter-ci/notebooks/run", json={"path": NOTEBOOK, "code": CODE})
    elapsed = time.perf_counter() - start
    if reply.status_code != 200 or reply.json().get("status") != "ok":
        raise RuntimeError(f"run_in_notebook failed: {reply.status_code} {reply.text}")
    return elapsed


def filled(page: Any) -> int:
    """Return how many of the page's cells show a count and their two outputs."""
    return sum(1 for cell in page.notebook.cells[1:]
               if cell.execution_count and len(cell.outputs) == 2)


async def main(rounds: int, before: str) -> None:
    """Time `rounds` calls on each server, interleaved; print medians and their ratio."""
    tree = Path(tempfile.mkdtemp(prefix="bench-nbrun-before-"))
    archive = subprocess.run(["git", "-C", str(REPO), "archive", before, "jupyter_ci"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    times: dict[str, list[float]] = {"before": [], "after": []}
    async with AsyncExitStack() as stack:
        servers = {"before": await stack.enter_async_context(notebook_server(tree)),
                   "after": await stack.enter_async_context(notebook_server(None))}
        for _ in range(rounds):
            for name, (http, _page) in servers.items():
                times[name].append(await call(http))
        await asyncio.sleep(1)  # the pages read the last outputs
        cells = {name: filled(page) for name, (_http, page) in servers.items()}
    medians = {name: statistics.median(values) * 1000 for name, values in times.items()}
    print(f"run_in_notebook, {rounds} calls each, median ms per call (cells the page filled)")
    print(f"  before ({before}): {medians['before']:7.1f} ms  ({cells['before']}/{rounds})")
    print(f"  after  (this tree): {medians['after']:7.1f} ms  ({cells['after']}/{rounds})")
    print(f"  after / before: {medians['after'] / medians['before']:.2f}x")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))  # for tests/
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--before", default="665e4ec~1")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.before))
