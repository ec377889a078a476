"""Kernels in a gateway: a Jupyter Server with `--gateway-url` to a real `jupyter kernelgateway`.

Sessions and notebook kernels then live in the gateway's processes; they reach the model through
this server's broker with a token that travels in the kernel's start request, and never see a key.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tornado.websocket import websocket_connect

from jupyter_ci.client import Client, CodeInterpreterError
from jupyter_ci.models.broker import ENV_APPROVAL, ENV_PRICES
from jupyter_ci.server.broker.kernels import GATEWAY_ENVS
from jupyter_ci.server.sandbox.environ import ENV_HOSTS, ENV_PASS, ENV_SESSION
from tests.fakellm import FakeLLM, Turn
from tests.nbrun import TEST_KEY
from tests.ui.lab import LabServer, free_port, lab_environ, start_lab

ENV_REPORT = """import os, json
names = sorted(k for k in os.environ if 'API_KEY' in k or k.startswith('JUPYTER_CI_'))
print(json.dumps({"pid": os.getpid(), "names": names,
                  "url": os.environ.get("JUPYTER_CI_BROKER_URL"),
                  "token": os.environ.get("JUPYTER_CI_BROKER_TOKEN")}))"""
TURN = json.dumps({"model": "openai:gpt-test", "messages": [{"role": "user", "content": "hi"}]})


@dataclass
class Gateway:
    """A `jupyter kernelgateway` subprocess."""

    proc: subprocess.Popen[bytes]
    url: str
    token: str

    def kernels(self) -> list[dict[str, Any]]:
        """Return the gateway's own list of running kernels."""
        req = urllib.request.Request(f"{self.url}/api/kernels",
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return list(json.loads(resp.read()))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A Kernel Gateway on a local port that lets the broker's variables through, and no key."""
    base = tmp_path_factory.mktemp("gateway")
    port, token = free_port(), secrets.token_hex(16)
    for folder in ("config", "data"):
        (base / folder).mkdir()
    # Outside the test's temporary tree, which the "elsewhere" kernels cannot see.
    runtime = tempfile.mkdtemp(prefix="gateway-runtime-")
    elsewhere = base / "data" / "kernels" / "python3-elsewhere"
    elsewhere.mkdir(parents=True)
    # A kernel on "another machine": a private mount namespace where an empty tmpfs hides
    # the test's temporary tree, the server's session directories included.
    script = 'mount -t tmpfs tmpfs "$0" && exec "$@"'
    (elsewhere / "kernel.json").write_text(json.dumps({
        "argv": ["unshare", "--mount", "sh", "-c", script, str(tmp_path_factory.getbasetemp()),
                 sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (elsewhere)", "language": "python"}))
    env = lab_environ({
        "JUPYTER_CONFIG_DIR": str(base / "config"), "JUPYTER_RUNTIME_DIR": runtime,
        "JUPYTER_DATA_DIR": str(base / "data"),
        # What the README's scale-out section tells a gateway's admin to set.
        "KG_ENV_WHITELIST": ",".join(GATEWAY_ENVS),
        # The kernels' record-signing secret goes to the test's data dir, not the user's.
        "KG_ENV_PROCESS_WHITELIST": "HOME,JUPYTER_DATA_DIR,JUPYTER_CONFIG_DIR",
    })
    log = (base / "gateway.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_gateway", "--KernelGatewayApp.ip=127.0.0.1",
         f"--KernelGatewayApp.port={port}", f"--KernelGatewayApp.auth_token={token}",
         "--JupyterWebsocketPersonality.list_kernels=True"],
        cwd=base, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    found = Gateway(proc, f"http://127.0.0.1:{port}", token)
    deadline = time.monotonic() + 60
    while True:
        try:
            found.kernels()
            break
        except (OSError, urllib.error.URLError):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError((base / "gateway.log").read_text()) from None
            time.sleep(0.2)
    yield found
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
    shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture(scope="module")
def fake_model() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


def gateway_server(base: Path, gateway: Gateway, fake_model: FakeLLM, sandbox: str
                   ) -> LabServer:
    """Start a Jupyter server holding the key, whose kernels all live in the gateway."""
    (base / "config").mkdir()
    (base / "config" / "jupyter_server_config.json").write_text(json.dumps({
        "GatewayClient": {"url": gateway.url, "auth_token": gateway.token},
        "JupyterCI": {"session_pool": 0, "model": "openai:gpt-test",
                      "session_sandbox": sandbox},
    }))
    return start_lab(base, {"OPENAI_API_KEY": TEST_KEY,
                            "OPENAI_BASE_URL": fake_model.openai_base_url})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, gateway: Gateway,
           fake_model: FakeLLM) -> Iterator[LabServer]:
    """A server whose sessions run unboxed in the gateway (their processes can be seen)."""
    lab = gateway_server(tmp_path_factory.mktemp("gateway-server"), gateway, fake_model,
                         "never")
    yield lab
    lab.stop()


@pytest.fixture(scope="module")
def boxed_server(tmp_path_factory: pytest.TempPathFactory, gateway: Gateway,
                 fake_model: FakeLLM) -> Iterator[LabServer]:
    """A server whose sessions must run in the gateway's sandboxed kernelspec."""
    lab = gateway_server(tmp_path_factory.mktemp("boxed-gateway-server"), gateway, fake_model,
                         "always")
    yield lab
    lab.stop()


def parent_pid(pid: int) -> int:
    """Return the parent of a process, from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("PPid:")))


def environ_of(pid: int) -> str:
    """Return a process's initial environment as text."""
    return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")


def broker_status(url: str, token: str) -> int:
    """POST a turn to the model service with a kernel's credential; return the HTTP status."""
    req = urllib.request.Request(f"{url}/turn", data=TURN.encode(),
                                 method="POST", headers={"Authorization": f"Bearer {token}",
                                                         "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()  # the whole turn: the fake's answer is taken, not left for the next
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code


def code_turn(src: str) -> Turn:
    return Turn("", tool_calls=[("run_python", {"code": src})])


def test_a_session_runs_in_the_gateway_and_its_ask_reaches_the_model(
    server: LabServer, gateway: Gateway, fake_model: FakeLLM
) -> None:
    with Client(server.url, server.token) as client, client.session() as session:
        report = json.loads(session.execute(ENV_REPORT).text)
        # The kernel is the gateway's: listed by it, and a child of its process.
        assert session.info["kernel_id"] in {k["id"] for k in gateway.kernels()}
        assert parent_pid(report["pid"]) == gateway.proc.pid
        assert "OPENAI_API_KEY" not in report["names"]
        assert TEST_KEY not in environ_of(report["pid"])
        # This gateway shares the server's disk: the kernel works in the session directory.
        session.upload("in.txt", b"from the client")
        made = session.execute("print(open('in.txt').read())\n_ = open('out.csv', 'w').write('a')")
        assert made.text.strip() == "from the client"
        assert [f["path"] for f in made.files] == ["out.csv"]
        assert session.download("out.csv") == b"a"
        session.execute("x = 20")
        fake_model.push(code_turn("y = x + 1\nprint(y)"), Turn("It is **21**."))
        events = list(session.ask("add one to x"))
        assert events[-1][0] == "result"
        assert events[-1][1]["status"] == "done" and events[-1][1]["answer"] == "It is **21**."
        assert session.execute("print(y)").text.strip() == "21"
        # A gateway restart clears the state and keeps the session usable.
        session.restart()
        assert "NameError" in (session.execute("print(y)").error or {}).get("ename", "")
    assert TEST_KEY in fake_model.requests[-1].headers["authorization"]


def test_a_gateway_kernel_that_cannot_see_the_server_disk_has_no_files_routes(
    server: LabServer,
) -> None:
    with Client(server.url, server.token) as client, \
            client.session(kernel_name="python3-elsewhere") as session:
        made = session.execute("_ = open('out.csv', 'w').write('a')\nprint('written')")
        assert made.text.strip() == "written" and made.files == []
        for call in (session.files, lambda: session.upload("in.txt", b"x"),
                     lambda: session.download("out.csv")):
            with pytest.raises(CodeInterpreterError) as refused:
                call()
            assert refused.value.status == 409 and refused.value.reason == "files_unavailable"
            assert "gateway" in refused.value.message
        # Nothing the kernel wrote reached the server's session directory.
        assert not list((server.root / ".jupyter-ci-sessions").glob("*/out.csv"))


async def _run_in_kernel(server: LabServer, kernel_id: str, code: str) -> str:
    """Execute code over the server's kernel websocket (proxied to the gateway); return stdout."""
    url = (f"ws://127.0.0.1:{server.port}/api/kernels/{kernel_id}/channels"
           f"?token={server.token}")
    ws = await websocket_connect(url)
    try:
        msg_id = uuid.uuid4().hex
        ws.write_message(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test",
                       "session": uuid.uuid4().hex, "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": code, "silent": False, "store_history": True,
                        "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
        }))
        out: list[str] = []
        replied = idle = False
        while not (replied and idle):
            raw = await asyncio.wait_for(ws.read_message(), timeout=120)
            assert isinstance(raw, str), "the websocket closed"
            msg = json.loads(raw)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "stream":
                out.append(msg["content"]["text"])
            elif kind == "error":
                out.append("\n".join(msg["content"]["traceback"]))
            elif kind == "execute_reply":
                replied = True
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
        return "".join(out)
    finally:
        ws.close()


def test_an_ask_in_a_notebook_kernel_of_the_gateway_goes_through_the_model_service(
    server: LabServer, gateway: Gateway, fake_model: FakeLLM
) -> None:
    kernel = server.api("POST", "/api/kernels", {"name": "python3"}, timeout=120)
    try:
        assert kernel["id"] in {k["id"] for k in gateway.kernels()}
        report = json.loads(asyncio.run(_run_in_kernel(server, kernel["id"], ENV_REPORT)))
        # The model service's variables travelled in the start request (a session's own two are
        # for sessions only; the admin's approval minimum and the price table only when set;
        # a notebook's allowed hosts only for a box this server starts); no key did.
        assert report["names"] == sorted(
            set(GATEWAY_ENVS) - {ENV_SESSION, ENV_PASS, ENV_APPROVAL, ENV_PRICES, ENV_HOSTS})
        assert parent_pid(report["pid"]) == gateway.proc.pid
        for pid in (report["pid"], gateway.proc.pid):
            assert TEST_KEY not in environ_of(pid)
        fake_model.push(code_turn("total = 6 * 7\nprint('total', total)"), Turn("**42**"))
        seen = len(fake_model.requests)
        out = asyncio.run(_run_in_kernel(
            server, kernel["id"], "%load_ext jupyter_ci\n"
            "get_ipython().run_cell_magic('ask', '', 'multiply six by seven')\n"
            "print('after', total)"))
        assert "after 42" in out, out
        request = fake_model.requests[seen]
        assert request.headers["authorization"] == f"Bearer {TEST_KEY}"
        # The gateway restarts its kernel with the env it started with: the token holds.
        server.api("POST", f"/api/kernels/{kernel['id']}/restart", timeout=120)
        after = json.loads(asyncio.run(_run_in_kernel(server, kernel["id"], ENV_REPORT)))
        assert after["pid"] != report["pid"] and after["token"] == report["token"]
        fake_model.push(Turn("still here"))
        assert broker_status(report["url"], report["token"]) == 200
    finally:
        server.api("DELETE", f"/api/kernels/{kernel['id']}")
    # Shut down: the token it carried opens nothing any more.
    assert broker_status(report["url"], report["token"]) == 403


def test_a_gateway_client_asks_the_gateway_whether_its_kernel_lives() -> None:
    # wait_for_ready asks this when a kernel is slow to answer (a loaded machine, a restart);
    # jupyter_client's own asked the gateway's manager for a local provisioner and raised
    # AssertionError, which failed session restarts under load.
    from jupyter_server.gateway.managers import GatewayKernelManager

    from jupyter_ci.server.gateway import AuthenticatedGatewayKernelClient

    async def alive(has_kernel: bool) -> bool:
        manager = GatewayKernelManager()
        calls: list[str] = []

        async def is_alive() -> bool:
            calls.append("asked")
            return has_kernel

        manager.is_alive = is_alive  # type: ignore[method-assign]
        client = AuthenticatedGatewayKernelClient(parent=manager, kernel_id="k")
        answer: bool = await client._async_is_alive()
        assert calls == ["asked"]
        return answer

    assert asyncio.run(alive(True)) is True
    assert asyncio.run(alive(False)) is False


BOX_REPORT = """import os, json, socket
def reach(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False
print(json.dumps({"pid": os.getpid(), "cwd": os.getcwd(), "ifaces": socket.if_nameindex(),
                  "processes": sorted(p for p in os.listdir("/proc") if p.isdigit()),
                  "server": reach(%d)}))"""


def test_a_sandboxed_session_runs_boxed_in_the_gateway_and_asks_through_its_socket(
    boxed_server: LabServer, gateway: Gateway, fake_model: FakeLLM
) -> None:
    with Client(boxed_server.url, boxed_server.token) as client, client.session() as session:
        assert session.info["sandboxed"] is True
        assert session.info["kernel_name"] == "python3-sandboxed"
        assert session.info["kernel_id"] in {k["id"] for k in gateway.kernels()}
        report = json.loads(session.execute(BOX_REPORT % boxed_server.port).text)
        # Its own PID namespace, only its loopback, and the server's port out of reach.
        assert report["pid"] == 2 and report["processes"] == ["1", "2"]
        assert report["ifaces"] == [[1, "lo"]] and report["server"] is False
        # The gateway started it in the session's folder (KERNEL_WORKING_DIR): files work.
        session.upload("in.txt", b"boxed")
        assert session.execute("print(open('in.txt').read())").text.strip() == "boxed"
        fake_model.push(code_turn("print(6 * 7)"), Turn("It is 42."))
        events = list(session.ask("multiply six by seven"))
        assert events[-1][1]["status"] == "done", events[-1]
    # A notebook kernel of the sandboxed kernelspec: %%ask reaches the model through the
    # broker's socket, bound into the box by the gateway's provisioner.
    kernel = boxed_server.api("POST", "/api/kernels", {"name": "python3-sandboxed"},
                              timeout=120)
    try:
        fake_model.push(code_turn("total = 6 * 7"), Turn("**42**"))
        seen = len(fake_model.requests)
        out = asyncio.run(_run_in_kernel(
            boxed_server, kernel["id"], "%load_ext jupyter_ci\n"
            "get_ipython().run_cell_magic('ask', '', 'multiply six by seven')\n"
            "print('after', total)"))
        assert "after 42" in out, out
        assert fake_model.requests[seen].headers["authorization"] == f"Bearer {TEST_KEY}"
    finally:
        boxed_server.api("DELETE", f"/api/kernels/{kernel['id']}")
