"""A gateway that goes away: REST sessions say so (503, listed unavailable) and recover.

Real processes on loopback: a `jupyter kernelgateway` killed and started again on the same
port (its kernels die with it: the sessions then say their kernels are gone), and the same
gateway behind a TCP relay that is cut and restored (a network outage: the kernels live on,
and the sessions reconnect to them with their variables).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.client import Client
from tests import openapi_check
from tests.fakellm import FakeLLM, Turn
from tests.nbrun import TEST_KEY
from tests.ui.lab import LabServer, free_port, lab_environ, start_lab

WAIT_S = 30.0  # how long a session may take to be listed as it should


class KernelGateway:
    """A `jupyter kernelgateway` on a fixed port, that can be killed and started again."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the gateway and wait until it answers."""
        env = lab_environ({"JUPYTER_RUNTIME_DIR": str(self.base / "runtime"),
                           "JUPYTER_DATA_DIR": str(self.base / "data"),
                           "JUPYTER_CONFIG_DIR": str(self.base / "config")})
        with (self.base / "gateway.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kernel_gateway", "--KernelGatewayApp.ip=127.0.0.1",
                 f"--KernelGatewayApp.port={self.port}",
                 f"--KernelGatewayApp.auth_token={self.token}",
                 "--JupyterWebsocketPersonality.list_kernels=True",
                 # A big output in one go (its own rate limit would cut it short).
                 "--ZMQChannelsWebsocketConnection.iopub_data_rate_limit=0"],
                cwd=self.base, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.kernels()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError((self.base / "gateway.log").read_text()) from None
                time.sleep(0.2)

    def kernels(self) -> list[dict[str, Any]]:
        """Return the gateway's own list of kernels."""
        req = urllib.request.Request(f"{self.url}/api/kernels",
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return list(json.loads(resp.read()))

    def kill(self) -> None:
        """Kill the gateway and its kernels (-9, its whole process group)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


class Relay:
    """A TCP relay on a fixed loopback port, to cut (every connection reset) and restore."""

    def __init__(self, target_port: int) -> None:
        self.port, self.target = free_port(), target_port
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _call(self, make: Callable[[], Any]) -> Any:
        async def run() -> Any:
            return await make()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=10)

    def start(self) -> None:
        """Listen (again) on the relay's port."""
        self.server = self._call(lambda: asyncio.start_server(
            self._relay, "127.0.0.1", self.port, reuse_address=True))

    def cut(self) -> None:
        """Stop listening and reset every connection through the relay."""
        async def cut() -> None:
            assert self.server is not None
            self.server.close()
            for writer in list(self.writers):
                writer.transport.abort()
            self.writers.clear()
        self._call(cut)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.cut()
        self.loop.call_soon_threadsafe(self.loop.stop)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.transport.abort()
            return
        self.writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.transport.abort()
        self.writers.discard(writer)


def gateway_server(base: Path, url: str, token: str, model: FakeLLM | None = None,
                   pool: int = 0) -> LabServer:
    """Start a Jupyter server whose kernels live in the gateway at `url`."""
    (base / "config").mkdir(parents=True)
    (base / "config" / "jupyter_server_config.json").write_text(json.dumps({
        "GatewayClient": {"url": url, "auth_token": token},
        "JupyterCI": {"session_pool": pool, "session_sandbox": "never",
                      "model": "openai:gpt-test"},
    }))
    return start_lab(base, {} if model is None else {
        "OPENAI_API_KEY": TEST_KEY, "OPENAI_BASE_URL": model.openai_base_url})


def call(server: LabServer, method: str, path: str, body: Any = None,
         headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """Call the server; return the status and the decoded JSON body (text if not JSON)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{server.url}{path}", data=data, method=method, headers={
        "Authorization": f"token {server.token}", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            status, raw, kind = resp.status, resp.read(), resp.headers["Content-Type"]
    except urllib.error.HTTPError as err:
        status, raw, kind = err.code, err.read(), err.headers["Content-Type"]
    openapi_check.check(method, req.full_url, status, kind or "", raw)  # as documented
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode()


def listed(server: LabServer, sid: str, status: str) -> dict[str, Any]:
    """Wait until the session list shows the session with `status`; return its entry."""
    deadline = time.monotonic() + WAIT_S
    while True:
        entry = next(s for s in call(server, "GET", "/jupyter-ci/sessions")[1] if s["id"] == sid)
        if entry["status"] == status or time.monotonic() > deadline:
            assert entry["status"] == status, entry
            return dict(entry)
        time.sleep(0.2)


def run(server: LabServer, sid: str, code: str) -> tuple[int, Any]:
    return call(server, "POST", f"/jupyter-ci/sessions/{sid}/execute", {"code": code})


def wait_for_pool(gateway: KernelGateway) -> None:
    """Wait until the gateway runs two kernels: a session's and the pool's started after it."""
    deadline = time.monotonic() + WAIT_S
    while True:
        with contextlib.suppress(urllib.error.HTTPError):  # 500 while a kernel starts
            if len(gateway.kernels()) >= 2:
                break
        assert time.monotonic() < deadline, "the pool never filled"
        time.sleep(0.2)
    time.sleep(1)  # and its client connected (kernel_info answered)


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[KernelGateway]:
    found = KernelGateway(tmp_path / "gateway")
    found.base.mkdir()
    found.start()
    yield found
    found.kill()


def test_a_killed_gateway_answers_503_and_its_restart_410_kernel_gone(
    tmp_path: Path, gateway: KernelGateway
) -> None:
    with FakeLLM() as model:
        # A pool: the kernel it holds dies with the gateway, and is not handed out after.
        server = gateway_server(tmp_path / "server", gateway.url, gateway.token, model, pool=1)
        try:
            killed_then_back(server, gateway, model)
        finally:
            server.stop()


def killed_then_back(server: LabServer, gateway: KernelGateway, model: FakeLLM) -> None:
    """The gateway is killed under a session, then started again without its kernel."""
    status, session = call(server, "POST", "/jupyter-ci/sessions", {})
    assert status == 201, session
    sid = session["id"]
    assert run(server, sid, "x = 41\nopen('kept.txt', 'w').write('x')")[1]["status"] == "ok"
    wait_for_pool(gateway)
    # A run in flight when the gateway dies ends at once with the same answer.
    in_flight: list[tuple[int, Any]] = []
    runner = threading.Thread(target=lambda: in_flight.append(
        run(server, sid, "import time\ntime.sleep(60)")))
    runner.start()
    listed(server, sid, "busy")
    killed = time.monotonic()
    gateway.kill()
    runner.join(timeout=30)
    assert time.monotonic() - killed < 15, "the run waited for its timeout"
    assert in_flight[0][0] == 503, in_flight
    assert in_flight[0][1]["reason"] == "gateway_unreachable", in_flight
    # Listed as unavailable as soon as its websocket ends, before anyone runs anything.
    entry = listed(server, sid, "unavailable")
    assert gateway.url in entry["status_message"]
    status, body = run(server, sid, "x + 1")
    assert status == 503 and body["reason"] == "gateway_unreachable", body
    assert f"The gateway at {gateway.url} is unreachable" in body["message"]
    # A streamed run says the same in its one `error` event; so do a restart and a new
    # session (no 500, no "%s" from jupyter_server's own message).
    status, text = call(server, "POST", f"/jupyter-ci/sessions/{sid}/execute",
                        {"code": "x"}, {"Accept": "text/event-stream"})
    assert status == 200 and "event: error" in text and "gateway_unreachable" in text
    for path in (f"/jupyter-ci/sessions/{sid}/restart", "/jupyter-ci/sessions"):
        status, body = call(server, "POST", path, {})
        assert (status, body["reason"]) == (503, "gateway_unreachable"), body
        assert gateway.url in body["message"]
    # An ask's step fails the ask, with the same message.
    model.push(Turn("", tool_calls=[("run_python", {"code": "print(x)"})]))
    with Client(server.url, server.token) as client:
        events = list(client.session(sid).ask("print x"))
    assert events[-1][0] == "result" and events[-1][1]["status"] == "failed", events[-1]
    assert f"The gateway at {gateway.url} is unreachable" in json.dumps(events[-1][1])
    # The gateway comes back on the same port, without the kernel it had.
    gateway.start()
    status, body = run(server, sid, "x + 1")
    assert status == 410 and body["reason"] == "kernel_gone", body
    assert "no longer has this session's kernel" in body["message"]
    assert gateway.url in listed(server, sid, "gone")["status_message"]
    # Its files are still here to take away; then it is deleted like any session.
    status, _ = call(server, "GET", f"/jupyter-ci/sessions/{sid}/files")
    assert status == 200
    assert call(server, "DELETE", f"/jupyter-ci/sessions/{sid}")[0] == 204
    # New sessions run in the gateway again.
    status, session = call(server, "POST", "/jupyter-ci/sessions", {})
    assert status == 201
    assert run(server, session["id"], "print(6 * 7)")[1]["outputs"][0]["text"] == "42\n"


def test_a_gateway_cut_off_and_back_gets_its_sessions_back_with_their_variables(
    tmp_path: Path, gateway: KernelGateway
) -> None:
    relay = Relay(gateway.port)
    relay.start()
    server = gateway_server(tmp_path / "server", relay.url, gateway.token)
    try:
        sids = [call(server, "POST", "/jupyter-ci/sessions", {})[1]["id"] for _ in range(2)]
        for n, sid in enumerate(sids):
            assert run(server, sid, f"x = {n + 41}")[1]["status"] == "ok"
        relay.cut()
        for sid in sids:
            listed(server, sid, "unavailable")
        status, body = run(server, sids[0], "x + 1")
        assert status == 503 and f"The gateway at {relay.url} is unreachable" in body["message"]
        relay.start()
        # The first is back at its next request, variables kept ...
        status, body = run(server, sids[0], "print(x + 1)")
        assert status == 200 and body["outputs"][0]["text"] == "42\n", body
        assert listed(server, sids[0], "idle")
        # ... and the other without one: it was probed until the gateway answered.
        entry = listed(server, sids[1], "idle")
        assert "status_message" not in entry
        assert run(server, sids[1], "print(x + 1)")[1]["outputs"][0]["text"] == "43\n"
        # Its kernels never left the gateway.
        assert {s["kernel_id"] for s in call(server, "GET", "/jupyter-ci/sessions")[1]} <= {
            k["id"] for k in gateway.kernels()}
        # A message over tornado's default websocket limit (10 MiB) does not end the session.
        status, body = run(server, sids[1], "display({'text/plain': 'y' * 11 * 2**20}, "
                           "raw=True)\nprint(x)")
        assert status == 200 and body["status"] == "ok", str(body)[:300]
        assert [o["output_type"] for o in body["outputs"]] == ["display_data", "stream"]
        assert listed(server, sids[1], "idle")
        # The connection drops under a run while the gateway stays up: the run answers 503 at
        # once (its outputs cannot come any more), and the session goes on, variables kept.
        in_flight: list[tuple[int, Any]] = []
        runner = threading.Thread(target=lambda: in_flight.append(
            run(server, sids[0], "import time\ntime.sleep(4)\nx = 50")))
        runner.start()
        listed(server, sids[0], "busy")
        relay.cut()
        relay.start()
        dropped = time.monotonic()
        runner.join(timeout=30)
        assert time.monotonic() - dropped < 3.5, "the run waited for its kernel"
        assert in_flight[0][0] == 503, in_flight
        assert "lost during this run" in in_flight[0][1]["message"]
        assert run(server, sids[0], "print(x)")[1]["outputs"][0]["text"] == "50\n"
    finally:
        server.stop()
        relay.close()
