"""Measure our MCP door against jupyter-mcp-server's (the MCP peer), side by side in one run.

Prints medians and ratios, not pass/fail: these machines are noisy, so each of our figures is
compared with the peer's measured in the same run, interleaved, on one Jupyter server.

    python bench/bench_mcp_peer.py [--rounds 30]

The first run builds bench/.venv-peer (gitignored; `python -m venv` + pip from PyPI) holding
jupyter-mcp-server 2.2 and what it needs (jupyter-collaboration, pycrdt, ...), none of which
this project depends on. One `jupyter server` runs from that venv with both extensions: the
venv also sees this project's .venv (a .pth file), so jupyter_ci loads beside the peer. Both
doors are in-server MCP over Streamable HTTP (ours /jupyter-ci/mcp, theirs /mcp), both driven
by one client: this project's MCP SDK (2.x).

1. execute round trip, `x = 1` and `print('hi')`, in ONE kernel (a jupyter-ci session's):
   ours `execute` (session_id), theirs `execute_code` (kernel_id of that session's kernel);
2. run a cell at the end of a notebook, ONE notebook and kernel, both through the server's
   shared document (jupyter-collaboration; no page needed): ours `run_in_notebook` (the
   notebook marked as opened by its user, as a page does: the door's consent), theirs
   `use_notebook` once, then `insert_execute_code_cell` at the end. Each cell's outputs are
   counted in that document afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import httpx2
import nbformat
from bench_sessions import free_port
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from jupyter_ci.client import AsyncClient

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / "bench" / ".venv-peer"
PEER = "jupyter-mcp-server>=2.2,<2.3"
EXTENSIONS = ("jupyter_ci", "jupyter_server_ydoc", "jupyter_server_fileid",
              "jupyter_server_nbmodel", "jupyter_mcp_server")
NOTEBOOK = "bench.ipynb"
CELL = "print('hi')\n6 * 7"
Call = Callable[[], Awaitable[Any]]


def peer_python() -> Path:
    """Return the peer venv's interpreter, building the venv first when it lacks the peer."""
    python = VENV / "bin" / "python"
    probe = [str(python), "-c", "import jupyter_mcp_server, jupyter_ci"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"building {VENV} ({PEER}; a few minutes, once)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", PEER], check=True)
    # One server process imports both extensions: the peer venv layers this project's venv
    # (its own packages, first on sys.path, win; the versions shared were the same in 2026-11).
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                              "get_paths()['purelib'])"], capture_output=True, text=True,
                             check=True).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(purelib, "zz_jupyter_ci_venv.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n")
    subprocess.run(probe, check=True)
    return python


def start_server(root: str, python: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    """Start `jupyter server` from the peer venv with both doors; return it, URL, token."""
    port, token = free_port(), os.urandom(16).hex()
    enabled = "{" + ", ".join(f"'{name}': True" for name in EXTENSIONS) + "}"
    args = [str(python), "-m", "jupyter_server", "--no-browser", f"--port={port}",
            f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
            f"--ServerApp.jpserver_extensions={enabled}", "--JupyterCI.session_pool=1",
            "--JupyterMCPServerExtensionApp.jupyterlab=False",  # needs a page's commands
            *(["--allow-root"] if os.geteuid() == 0 else [])]
    with open(os.path.join(root, "server.log"), "wb") as log:  # the child keeps its copy
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=root,
                                env={**os.environ, "JUPYTER_CONFIG_DIR": root})
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            httpx.get(f"{url}/api/status", headers={"Authorization": f"token {token}"},
                      timeout=1)
            return proc, url, token
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"jupyter server did not start: see {root}/server.log")


async def mcp_session(stack: AsyncExitStack, url: str, token: str) -> ClientSession:
    """Open an MCP client session over Streamable HTTP at `url`."""
    http = await stack.enter_async_context(httpx2.AsyncClient(
        headers={"Authorization": f"token {token}"}, timeout=300))
    read, write = await stack.enter_async_context(streamable_http_client(url, http_client=http))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


def tool(session: ClientSession, name: str, args: dict[str, Any], expect: str) -> Call:
    """Return a call of tool `name` that fails unless its reply is ok and shows `expect`."""
    async def call() -> Any:
        result = await session.call_tool(name, args)
        text = " ".join(getattr(block, "text", "") for block in result.content)
        if result.is_error or expect not in text:
            raise RuntimeError(f"{name} {args}: {text[:500]}")
        return result

    return call


async def measure(calls: dict[str, Call], rounds: int) -> dict[str, list[float]]:
    """Warm every call, then time `rounds` of each, interleaved; return seconds per call."""
    for _ in range(3):
        for call in calls.values():
            await call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            await call()
            times[name].append(time.perf_counter() - start)
    return times


def report(title: str, times: dict[str, list[float]], pairs: list[tuple[str, str]]) -> None:
    """Print each call's median and p90, and theirs / ours for each (ours, theirs) pair."""
    print(title)
    for name, values in times.items():
        p90 = sorted(values)[int(0.9 * (len(values) - 1))]
        print(f"  {name:44} median {statistics.median(values) * 1000:8.2f} ms"
              f"   p90 {p90 * 1000:8.2f} ms")
    for ours, theirs in pairs:
        ratio = statistics.median(times[theirs]) / statistics.median(times[ours])
        print(f"  theirs / ours ({ours.split(':')[0]}): {ratio:6.2f}x"
              f"   (ours / theirs {1 / ratio:5.2f}x)")


async def bench_execute(stack: AsyncExitStack, url: str, token: str, rounds: int) -> None:
    """Execute round trips in one kernel, ours against theirs, interleaved."""
    client = await stack.enter_async_context(AsyncClient(url, token))
    session = await client.session()
    stack.push_async_callback(session.delete)
    kernel = str(session.info["kernel_id"])
    ours = await mcp_session(stack, f"{url}/jupyter-ci/mcp", token)
    theirs = await mcp_session(stack, f"{url}/mcp", token)
    await tool(ours, "execute", {"code": "shared = 7", "session_id": session.id}, "")()
    await tool(theirs, "execute_code", {"code": "print(shared)", "kernel_id": kernel}, "7")()
    calls: dict[str, Call] = {}
    pairs = []
    for code, expect in (("x = 1", ""), ("print('hi')", "hi")):
        calls[f"{code}: ours execute"] = tool(
            ours, "execute", {"code": code, "session_id": session.id}, expect)
        calls[f"{code}: theirs execute_code"] = tool(
            theirs, "execute_code", {"code": code, "kernel_id": kernel}, expect)
        pairs.append((f"{code}: ours execute", f"{code}: theirs execute_code"))
    report(f"execute round trip over MCP (Streamable HTTP, in-server), one kernel, "
           f"{rounds} rounds", await measure(calls, rounds), pairs)


async def open_notebook(url: str, token: str) -> str:
    """Open NOTEBOOK in a Jupyter session, and say so as its user's page does; return its
    kernel id."""
    async with httpx.AsyncClient(base_url=url, timeout=120,
                                 headers={"Authorization": f"token {token}"}) as http:
        opened = (await http.post("/api/sessions", json={
            "path": NOTEBOOK, "name": NOTEBOOK, "type": "notebook",
            "kernel": {"name": "python3"}})).json()
        said = await http.post("/jupyter-ci/notebooks/opened", json={"path": NOTEBOOK})
        said.raise_for_status()
    return str(opened["kernel"]["id"])


async def cells_filled(url: str, token: str) -> tuple[int, int]:
    """Count the shared document's cells that show CELL's output whole, and its cells."""
    async with httpx.AsyncClient(base_url=url, timeout=120,
                                 headers={"Authorization": f"token {token}"}) as http:
        cells = (await http.get("/jupyter-ci/notebooks/cells",
                                params={"path": NOTEBOOK})).json()["cells"]
    return sum(1 for cell in cells if shown(cell)), len(cells)


def shown(cell: dict[str, Any]) -> bool:
    """Say whether a cell shows CELL's count and outputs (a print may come as two stream
    outputs, `hi` then the newline)."""
    outputs = cell.get("outputs") or []
    printed = "".join(out.get("text", "") for out in outputs if out["output_type"] == "stream")
    return bool(cell.get("execution_count")) and printed == "hi\n" and any(
        out["output_type"] == "execute_result" for out in outputs)


async def bench_notebook(stack: AsyncExitStack, url: str, token: str, rounds: int) -> None:
    """Run a cell at the end of one notebook, in its kernel, ours against theirs."""
    kernel = await open_notebook(url, token)
    ours = await mcp_session(stack, f"{url}/jupyter-ci/mcp", token)
    theirs = await mcp_session(stack, f"{url}/mcp", token)
    await tool(theirs, "use_notebook", {"notebook_name": "bench", "notebook_path": NOTEBOOK,
                                        "kernel_id": kernel}, "")()
    await tool(ours, "run_in_notebook", {"path": NOTEBOOK, "code": "shared = 8"}, "")()
    await tool(theirs, "insert_execute_code_cell", {  # the same kernel
        "cell_index": -1, "cell_source": "print(shared)"}, "8")()
    calls = {
        "ours run_in_notebook": tool(ours, "run_in_notebook",
                                     {"path": NOTEBOOK, "code": CELL}, "42"),
        "theirs insert_execute_code_cell": tool(theirs, "insert_execute_code_cell", {
            "cell_index": -1, "cell_source": CELL}, "42"),
    }
    times = await measure(calls, rounds)
    filled, cells = await cells_filled(url, token)
    report(f"run a cell at the end of a notebook over MCP, one notebook and kernel, {rounds} "
           f"rounds each ({filled} of the document's {cells} cells show the cell's outputs "
           f"whole; {2 * (rounds + 3)} ran it, warm-ups included)", times,
           [("ours run_in_notebook", "theirs insert_execute_code_cell")])


async def bench(url: str, token: str, rounds: int) -> None:
    """Run both comparisons against one server."""
    async with AsyncExitStack() as stack:
        await bench_execute(stack, url, token, rounds)
    async with AsyncExitStack() as stack:
        await bench_notebook(stack, url, token, rounds)


def main() -> None:
    """Build the peer's venv if needed, start one server with both doors, measure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    python = peer_python()
    with tempfile.TemporaryDirectory(prefix="bench-peer-") as root:
        nbformat.write(nbformat.v4.new_notebook(), os.path.join(root, NOTEBOOK))
        server, url, token = start_server(root, python)
        try:
            asyncio.run(bench(url, token, args.rounds))
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))  # for tests/
    main()
