"""Measure executes behind websockets (a kernel websocket, a Kernel Gateway), side by side.

Prints medians of an execute of `x = 1`, interleaved in one run, and their ratios:

1. a raw jupyter_client execute on a local kernel (over ZMQ), the floor;
2. the same over Jupyter Server's kernel websocket (`/api/kernels/<id>/channels`, what a
   browser uses), against 1;
3. a REST execute on a local session, and on a session whose kernel lives in a Kernel
   Gateway (the server started with `--GatewayClient.url`), against each other (goal: the
   gateway's within 1.5x the local one);
4. a notebook kernel of the gateway over the server's kernel websocket, against 2.

Each is measured with jupyter-ci's websocket fix off (`--KernelWebsockets.low_latency=False`:
jupyter_server's and tornado's defaults, Nagle's algorithm meeting delayed ACKs, and
upstream's gateway client polling its queues) and on (server/nodelay.py,
server/gateway_channels.py); the gateway is an unmodified `jupyter kernelgateway` in both.

    python bench/bench_gateway.py [--rounds 30] [--fix both|on|off]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import websocket
from jupyter_client.manager import start_new_kernel

from jupyter_ci.client import Client

CODE = "x = 1"


def free_port() -> int:
    """Return a TCP port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_up(proc: subprocess.Popen[bytes], url: str, token: str, path: str) -> None:
    """Wait until a server answers `path` with 200."""
    for _ in range(600):
        if proc.poll() is not None:
            raise RuntimeError(f"{url} exited ({proc.returncode})")
        try:
            if httpx.get(f"{url}{path}", headers={"Authorization": f"token {token}"},
                         timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not start")


@contextmanager
def process(args: Sequence[str], url: str, token: str, path: str, cwd: str
            ) -> Iterator[None]:
    """Run a server process for the duration of the block."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "KG_"))}
    env["JUPYTER_CONFIG_DIR"] = cwd
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_up(proc, url, token, path)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextmanager
def kernel_gateway(root: str) -> Iterator[tuple[str, str]]:
    """Run an unmodified Kernel Gateway; yield its URL and token."""
    port, token = free_port(), secrets.token_hex(16)
    url = f"http://127.0.0.1:{port}"
    args = [sys.executable, "-m", "kernel_gateway", "--KernelGatewayApp.ip=127.0.0.1",
            f"--KernelGatewayApp.port={port}", f"--KernelGatewayApp.auth_token={token}",
            "--JupyterWebsocketPersonality.list_kernels=True"]
    with process(args, url, token, "/api/kernels", root):
        yield url, token


@contextmanager
def jupyter_server(root: str, nodelay: bool, extra: Sequence[str] = ()
                   ) -> Iterator[tuple[str, str]]:
    """Run `jupyter server` with jupyter-ci; yield its URL and token."""
    port, token = free_port(), secrets.token_hex(16)
    url = f"http://127.0.0.1:{port}"
    args = [sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}",
            "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}", "--ServerApp.jpserver_extensions={'jupyter_ci': True}",
            "--JupyterCI.session_pool=0", f"--KernelWebsockets.low_latency={nodelay}", *extra,
            *(["--allow-root"] if os.geteuid() == 0 else [])]
    with process(args, url, token, "/api/status", root):
        yield url, token


def raw_execute(kc: Any) -> None:
    """Run CODE with jupyter_client until its reply and its idle status."""
    msg_id = kc.execute(CODE)
    while kc.get_shell_msg(timeout=60)["parent_header"].get("msg_id") != msg_id:
        pass
    while True:
        msg = kc.get_iopub_msg(timeout=60)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status" and \
                msg["content"]["execution_state"] == "idle":
            return


class KernelSocket:
    """A notebook kernel of a server, driven over its kernel websocket (as a browser does)."""

    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"token {token}"},
                                 timeout=120)
        self.kernel_id = self.http.post("/api/kernels", json={"name": "python3"}).json()["id"]
        ws_url = url.replace("http", "ws", 1) + f"/api/kernels/{self.kernel_id}/channels"
        self.ws = websocket.create_connection(
            ws_url, header={"Authorization": f"token {token}"}, timeout=120)

    def execute(self) -> None:
        """Run CODE until its reply and its idle status."""
        msg_id = uuid.uuid4().hex
        self.ws.send(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "",
                       "session": "bench", "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": CODE, "silent": False, "store_history": False,
                        "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
        replied = idle = False
        while not (replied and idle):
            msg = json.loads(self.ws.recv())
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            replied |= msg["msg_type"] == "execute_reply"
            idle |= msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"

    def close(self) -> None:
        """Close the websocket and shut the kernel down."""
        self.ws.close()
        self.http.delete(f"/api/kernels/{self.kernel_id}")
        self.http.close()


def measure(paths: dict[str, Callable[[], None]], rounds: int) -> dict[str, float]:
    """Time each path `rounds` times, interleaved; return medians in ms."""
    for _ in range(5):  # warm every path
        for run in paths.values():
            run()
    times: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, run in paths.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) * 1000 for name, values in times.items()}


def ok(run: Any) -> None:
    """Fail loudly on an execute that did not run."""
    if run.status != "ok":
        raise RuntimeError(f"execute ended {run.status}: {run.outputs}")


def run_mode(kc: Any, gateway: tuple[str, str], nodelay: bool, rounds: int
             ) -> dict[str, float]:
    """Measure every path with the fix on or off."""
    with ExitStack() as stack:
        local_root = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-local-"))
        gw_root = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-gw-"))
        local = stack.enter_context(jupyter_server(local_root, nodelay))
        remote = stack.enter_context(jupyter_server(gw_root, nodelay, (
            f"--GatewayClient.url={gateway[0]}", f"--GatewayClient.auth_token={gateway[1]}")))
        local_ws, remote_ws = KernelSocket(*local), KernelSocket(*remote)
        stack.callback(local_ws.close)
        stack.callback(remote_ws.close)
        local_rest = stack.enter_context(Client(*local, timeout=120))
        remote_rest = stack.enter_context(Client(*remote, timeout=120))
        local_py = stack.enter_context(local_rest.session())
        remote_py = stack.enter_context(remote_rest.session())
        return measure({
            "raw": lambda: raw_execute(kc),
            "ws": local_ws.execute,
            "rest": lambda: ok(local_py.execute(CODE)),
            "rest_gw": lambda: ok(remote_py.execute(CODE)),
            "ws_gw": remote_ws.execute,
        }, rounds)


def report(label: str, ms: dict[str, float]) -> None:
    """Print one mode's figures and ratios."""
    print(f"\n{label}")
    rows = [
        ("raw jupyter_client execute (ZMQ)", "raw", None, ""),
        ("over Jupyter Server's kernel websocket", "ws", "raw", "x raw"),
        ("REST execute, local session", "rest", "raw", "x raw"),
        ("REST execute, session in Kernel Gateway", "rest_gw", "rest",
         "x REST local (goal <= 1.5x)"),
        ("gateway kernel over the server's websocket", "ws_gw", "ws", "x local websocket"),
    ]
    for text, key, base, unit in rows:
        ratio = f"   {ms[key] / ms[base]:5.2f}{unit}" if base else ""
        print(f"  {text:44s} {ms[key]:7.2f} ms{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--fix", choices=("both", "on", "off"), default="both",
                        help="measure with jupyter-ci's websocket fix off, on, or both")
    args = parser.parse_args()
    modes = {"both": [False, True], "on": [True], "off": [False]}[args.fix]
    km, kc = start_new_kernel(kernel_name="python3")
    results: dict[bool, dict[str, float]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-kg-") as kg_root, \
                kernel_gateway(kg_root) as gateway:
            for nodelay in modes:
                results[nodelay] = run_mode(kc, gateway, nodelay, args.rounds)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    print(f"execute of {CODE!r}, medians of {args.rounds} interleaved rounds")
    for nodelay, ms in results.items():
        report("fix on (TCP_NODELAY, TCP_QUICKACK, gateway websocket read on the loop)" if nodelay
               else "fix off (--KernelWebsockets.low_latency=False)", ms)
    if len(results) == 2:
        print("\nfix off -> on, per path:")
        for key in ("ws", "rest_gw", "ws_gw"):
            print(f"  {key:8s} {results[False][key]:7.2f} -> {results[True][key]:7.2f} ms "
                  f"({results[False][key] / results[True][key]:4.1f}x faster)")


if __name__ == "__main__":
    main()
