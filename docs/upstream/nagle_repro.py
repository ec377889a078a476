"""Executes over a Jupyter kernel websocket wait ~40 ms each: Nagle's algorithm + delayed ACK.

Needs jupyter_server, jupyter_kernel_gateway, ipykernel and websocket-client (Linux).

    python nagle_repro.py

Starts `jupyter server` and `jupyter kernelgateway` on loopback, as shipped and with the
proposed fix (a kernel websocket connection class that calls `set_nodelay(True)` on the
handler), starts a kernel in each, and times `x = 1` over `/api/kernels/<id>/channels` until
its execute_reply and idle status arrive. Also times the same against the unfixed servers
with a client that sets TCP_QUICKACK after each message (a client-side workaround, which
shows that the wait is the client's delayed ACK).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

import websocket

FIX = '''
from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection

class NoDelay(ZMQChannelsWebsocketConnection):
    def connect(self):
        self.websocket_handler.set_nodelay(True)
        return super().connect()
'''


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def api(url: str, token: str, method: str, path: str, body: object = None) -> object:
    req = urllib.request.Request(url + path, method=method, headers={
        "Authorization": f"token {token}"}, data=None if body is None else json.dumps(
            body).encode())
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read() or b"null")


def start(kind: str, fixed: bool, fix_dir: str) -> tuple[subprocess.Popen[bytes], str, str]:
    port, token = free_port(), secrets.token_hex(8)
    if kind == "jupyter server":
        args = ["-m", "jupyter_server", "--no-browser", f"--port={port}",
                f"--IdentityProvider.token={token}",
                # jupyter-ci, if installed, carries a workaround: keep it out.
                "--ServerApp.jpserver_extensions={'jupyter_ci': False}"]
        args += ["--allow-root"] if os.geteuid() == 0 else []
        args += ["--ServerApp.kernel_websocket_connection_class=nodelay_fix.NoDelay"] * fixed
    else:
        args = ["-m", "kernel_gateway", "--KernelGatewayApp.ip=127.0.0.1",
                f"--KernelGatewayApp.port={port}", f"--KernelGatewayApp.auth_token={token}",
                "--JupyterWebsocketPersonality.list_kernels=True"]
        args += ["--KernelGatewayApp.kernel_websocket_connection_class=nodelay_fix.NoDelay"
                 ] * fixed
    env = {**os.environ, "PYTHONPATH": fix_dir}
    proc = subprocess.Popen([sys.executable, *args], env=env, cwd=fix_dir,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            api(url, token, "GET", "/api/kernels")
            return proc, url, token
        except (OSError, urllib.error.URLError):
            time.sleep(0.1)
    raise RuntimeError(f"{kind} did not start")


def execute(ws: websocket.WebSocket) -> float:
    msg_id, began = uuid.uuid4().hex, time.perf_counter()
    ws.send(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "",
                   "session": "repro", "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell",
        "content": {"code": "x = 1", "silent": False, "store_history": False,
                    "user_expressions": {}, "allow_stdin": False}}))
    replied = idle = False
    while not (replied and idle):
        msg = json.loads(ws.recv())
        if msg["parent_header"].get("msg_id") == msg_id:
            replied |= msg["msg_type"] == "execute_reply"
            idle |= msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"
    return time.perf_counter() - began


def median_ms(url: str, token: str, quickack: bool, rounds: int = 30) -> float:
    kernel_id = api(url, token, "POST", "/api/kernels", {"name": "python3"})["id"]  # type: ignore[index]
    ws = websocket.create_connection(
        url.replace("http", "ws", 1) + f"/api/kernels/{kernel_id}/channels",
        header={"Authorization": f"token {token}"}, timeout=60)
    if quickack:  # acknowledge each message at once (Linux resets the flag: set it each time)
        recv = ws.recv

        def recv_quickack() -> object:
            data = recv()
            ws.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            return data

        ws.recv = recv_quickack  # type: ignore[method-assign]
    for _ in range(5):
        execute(ws)
    times = [execute(ws) for _ in range(rounds)]
    ws.close()
    api(url, token, "DELETE", f"/api/kernels/{kernel_id}")
    return statistics.median(times) * 1000


def main() -> None:
    with tempfile.TemporaryDirectory() as fix_dir:
        with open(os.path.join(fix_dir, "nodelay_fix.py"), "w") as out:
            out.write(FIX)
        for kind in ("jupyter server", "jupyter kernelgateway"):
            for fixed in (False, True):
                proc, url, token = start(kind, fixed, fix_dir)
                try:
                    line = f"{kind:22s} {'with set_nodelay' if fixed else 'as shipped':17s}"
                    line += f" {median_ms(url, token, False):6.1f} ms"
                    if not fixed:
                        line += f"   (client with TCP_QUICKACK: " \
                                f"{median_ms(url, token, True):.1f} ms)"
                    print(line, flush=True)
                finally:
                    proc.terminate()
                    proc.wait()


if __name__ == "__main__":
    main()
