"""A box whose network is an allowlist, for real: its forwarder, boxed kernels, a server.

A sandboxed kernel whose `sandbox_network` lists one loopback port reaches it through the
proxy, gets 403 for another, and reaches neither with a raw socket (its loopback is its
own); `%pip install` works from a listed index. The proxy itself is
tests/security/test_sandbox_network.py. Every connection goes to this machine's loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import AsyncKernelManager
from traitlets.config import Config

from jupyter_ci.server.sandbox import box
from jupyter_ci.server.sandbox.forward import FILE
from jupyter_ci.server.sandbox.provisioner import _first_non_bwrap
from tests.demo_wheel import PACKAGE, demo_wheel
from tests.security.test_key_exposure import user
from tests.security.test_sandbox_network import folder, get, ports, serve
from tests.security.unprivileged import Server, User, start_server, wait_ready

# Fixtures: the unprivileged user, the loopback servers, a short folder for sockets.
__all__ = ["folder", "ports", "user"]

INSIDE = """
import json, os, socket, urllib.error, urllib.request
report = {{"proxy": os.environ.get("HTTPS_PROXY")}}
report["a"] = json.loads(urllib.request.urlopen("http://127.0.0.1:{a}/in", timeout=20).read())
try:
    urllib.request.urlopen("http://127.0.0.1:{b}/", timeout=20)
except urllib.error.HTTPError as err:
    report["b"] = [err.code, err.read().decode()]
for name, port in (("raw_a", {a}), ("raw_b", {b})):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        report[name] = "connected"
    except OSError as err:
        report[name] = type(err).__name__
print(json.dumps(report))
"""


class Kernel:
    """A sandboxed kernel started in-process with a JupyterCI config."""

    def __init__(self, km: AsyncKernelManager) -> None:
        self.km = km
        self.kc = km.client()

    async def run(self, code: str, timeout: float = 120) -> str:
        """Execute code; return what it printed (and any traceback)."""
        out: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        reply = await self.kc.execute_interactive(code, timeout=timeout, output_hook=hook)
        return "".join(out) or str(reply["content"])


@contextlib.asynccontextmanager
async def sandboxed(network: list[str], cwd: Path) -> AsyncIterator[Kernel]:
    """Start a python3-sandboxed kernel whose sandbox_network is `network`."""
    config = Config({"JupyterCI": {"sandbox_network": network}})
    km = AsyncKernelManager(kernel_name="python3-sandboxed", config=config)
    await km.start_kernel(cwd=str(cwd))
    kernel = Kernel(km)
    kernel.kc.start_channels()
    try:
        await kernel.kc.wait_for_ready(timeout=60)
        yield kernel
    finally:
        kernel.kc.stop_channels()
        await km.shutdown_kernel(now=True)


def forwarders(socket_path: str = "") -> list[int]:
    """List the forwarder processes running now (not the boxes whose command names one)."""
    found = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if (argv[1:2] == [FILE.encode()]
                    and (not socket_path or socket_path.encode() in argv)):
                found.append(int(proc.name))
    return found


def parent(pid: int) -> int:
    """Return a process's parent's id."""
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def gone(pids: list[int]) -> bool:
    """Wait a little for processes to end; tell whether they did."""
    for _ in range(100):
        if not any(Path(f"/proc/{pid}").exists() for pid in pids):
            return True
        time.sleep(0.05)
    return False


def test_the_forwarder_says_when_its_proxy_is_gone_and_ends_with_its_command(
        folder: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    missing = str(folder / "no-proxy.sock")
    command = [sys.executable, FILE, "--socket", missing,
               "--port", str(port), "--", sys.executable, "-c", "import time; time.sleep(60)"]
    kernel = subprocess.Popen(command)
    try:
        # The port is bound before the command runs: it answers at once.
        for _ in range(100):
            with contextlib.suppress(ConnectionRefusedError):
                conn = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            time.sleep(0.05)
        with conn:
            conn.sendall(get("http://127.0.0.1/"))
            answer = b"".join(iter(lambda: conn.recv(65536), b""))
        assert answer.startswith(b"HTTP/1.1 502 ") and b"proxy is not running" in answer
        child = forwarders(missing)
        # The command kept the forwarder's process id; the forwarder is its child.
        assert b"time.sleep" in Path(f"/proc/{kernel.pid}/cmdline").read_bytes()
        assert [parent(pid) for pid in child] == [kernel.pid]
    finally:
        kernel.kill()
        kernel.wait()
    assert gone(child), "the forwarder outlived its command"


needs_box = pytest.mark.skipif(box.problem() is not None, reason=str(box.problem()))


@needs_box
def test_a_sandboxed_kernel_reaches_only_the_listed_port_and_only_through_the_proxy(
        ports: dict[str, int], tmp_path: Path) -> None:
    a, b = ports["a"], ports["b"]

    async def main() -> list[int]:
        async with sandboxed([f"127.0.0.1:{a}"], tmp_path) as kernel:
            shown = await kernel.run(INSIDE.format(a=a, b=b))
            report = json.loads(shown.strip().splitlines()[-1])
            assert report["proxy"] == "http://127.0.0.1:3128"
            assert report["a"] == {"port": a, "path": "/in", "host": f"127.0.0.1:{a}"}
            assert report["b"][0] == 403 and "c.JupyterCI.notebook_network" in report["b"][1]
            # Without the proxy, nothing: the box's loopback is its own.
            assert report["raw_a"] == report["raw_b"] == "ConnectionRefusedError", report
            # An interrupt reaches the kernel, not the forwarder, which keeps serving.
            kernel.kc.execute("import time; time.sleep(60)", stop_on_error=False)
            await asyncio.sleep(1)
            await kernel.km.interrupt_kernel()
            reply = await kernel.kc.get_shell_msg(timeout=20)
            assert reply["content"].get("ename") == "KeyboardInterrupt", reply["content"]
            after = await kernel.run("import urllib.request\nprint(urllib.request.urlopen("
                                     f"'http://127.0.0.1:{a}/again', timeout=20).read())")
            assert "/again" in after, after
            assert kernel.km.provisioner is not None and kernel.km.provisioner.process
            pid = _first_non_bwrap(kernel.km.provisioner.process.pid)
            mine = [found for found in forwarders() if parent(found) == pid]
            assert len(mine) == 1, "one forwarder, below the kernel, a process of its own"
            assert "Threads:\t1\n" in Path(f"/proc/{mine[0]}/status").read_text()
            return mine

    mine = asyncio.run(main())
    assert gone(mine), "the forwarder outlived its box"


def post(server: Server, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """POST JSON to the server with its token; return status and decoded JSON."""
    request = urllib.request.Request(f"{server.url}{path}", data=json.dumps(body).encode(),
                                     headers={"Authorization": f"token {server.token}"})
    try:
        with urllib.request.urlopen(request, timeout=180) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except urllib.error.URLError as err:
        # Unreachable: what the server said is the only clue (it ran as another user).
        state = "running" if server.proc.poll() is None else f"exited {server.proc.returncode}"
        raise AssertionError(f"{server.url} unreachable ({err.reason}); the server is {state}; "
                             f"its log ends:\n{server.log.read_text(errors='replace')[-4000:]}"
                             ) from None


@needs_box
def test_a_servers_boxed_sessions_get_the_allowlist_and_its_log_names_refusals(
        ports: dict[str, int], user: User) -> None:
    # A real server, as an unprivileged user: its proxy, its log, a REST session's box.
    a, b = ports["a"], ports["b"]
    server = start_server(user, "egress", {}, {"session_pool": 0, "session_sandbox": "always",
                                               "sandbox_network": [f"127.0.0.1:{a}"]})
    try:
        wait_ready(server)
        status, info = post(server, "jupyter-ci/sessions", {})
        assert status == 201 and info["sandboxed"] is True, info
        status, result = post(server, f"jupyter-ci/sessions/{info['id']}/execute",
                              {"code": INSIDE.format(a=a, b=b), "timeout": 60})
        assert status == 200 and result["status"] == "ok", result
        report = json.loads(result["outputs"][-1]["text"])
        assert report["a"]["path"] == "/in" and report["b"][0] == 403, report
        assert report["raw_a"] == report["raw_b"] == "ConnectionRefusedError", report
    finally:
        log = server.stop()
    assert f"jupyter-ci sandbox: refused 127.0.0.1:{b}" in log


class Index(http.server.SimpleHTTPRequestHandler):
    """A simple package index of the folder it serves (quiet)."""

    def log_message(self, *args: Any) -> None:
        pass


@needs_box
def test_pip_installs_from_an_allowed_index_through_the_proxy(tmp_path: Path) -> None:
    root = tmp_path / "index"
    wheel = demo_wheel(root)
    page = root / "simple" / "jci-demo-pkg" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<a href="/{wheel.name}">{wheel.name}</a>\n')
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *args: Index(*args, directory=str(root)))
    port = serve(server)
    work = tmp_path / "work"
    work.mkdir()
    index = f"http://127.0.0.1:{port}/simple/"
    code = textwrap.dedent(f"""\
        %pip install --disable-pip-version-check --target /tmp/pkgs -i {index} jci-demo-pkg
        import sys; sys.path.insert(0, "/tmp/pkgs")
        import {PACKAGE}; print("value", {PACKAGE}.VALUE)
        """)

    async def main() -> str:
        async with sandboxed([f"127.0.0.1:{port}"], work) as kernel:
            return await kernel.run(code, timeout=240)

    try:
        shown = asyncio.run(main())
    finally:
        server.shutdown()
        server.server_close()
    assert "Successfully installed" in shown and "value 42" in shown, shown
