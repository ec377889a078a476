"""Kernels of a server started with --sock reach its model service through its Unix socket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from jupyter_client.blocking.client import BlockingKernelClient

from jupyter_ci import providers
from jupyter_ci.models.broker import ENV_PROVIDERS, ENV_SOCKET, ENV_TOKEN, ENV_URL, MANAGED
from jupyter_ci.models.resolve import ModelSettings, endpoint_for
from tests.fakellm import OPENAI_PATH, FakeLLM, Turn
from tests.kernelrun import connection_file

OPENAI_KEY = "sk-test-OPENAI-socket-secret-4321"
JUPYTER_TOKEN = "jupyter-socket-secret"


def test_endpoint_behind_a_socket_server_carries_the_socket() -> None:
    env = {ENV_URL: "http://localhost/base/jupyter-ci/broker", ENV_TOKEN: "broker-token",
           ENV_PROVIDERS: "openai", ENV_SOCKET: "/run/jupyter/s.sock"}
    endpoint = endpoint_for(providers.PROVIDERS["openai"], ModelSettings(), env)
    assert endpoint.socket == "/run/jupyter/s.sock"
    assert endpoint.base_url == "http://localhost/base/jupyter-ci/broker"
    assert endpoint.api_key == "broker-token"
    del env[ENV_SOCKET]
    assert endpoint_for(providers.PROVIDERS["openai"], ModelSettings(), env).socket is None


@pytest.fixture(autouse=True)
def one_answer(fake: FakeLLM) -> None:
    """Every test here gets one answer from the fake model."""
    fake.push(Turn("hi from the socket"))


def _start_server(tmp_path: Path, fake: FakeLLM, sock: Path) -> subprocess.Popen[bytes]:
    """Start `jupyter server --sock` with the real key and the fake model's URL."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}}}))
    inherited = {*MANAGED, *(v for s in providers.configurable() for v in (s.key_var, s.url_var))}
    env = {k: v for k, v in os.environ.items() if k not in inherited}
    env.update({"JUPYTER_CONFIG_DIR": str(config), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
                "JUPYTER_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path),
                "PYTHONPATH": str(Path(__file__).parent.parent),
                "OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": fake.openai_base_url})
    with (tmp_path / "server.log").open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root",
             f"--sock={sock}", f"--IdentityProvider.token={JUPYTER_TOKEN}",
             f"--ServerApp.root_dir={tmp_path}"],
            env=env, stdout=out, stderr=subprocess.STDOUT)


def _start_kernel(sock: Path, proc: subprocess.Popen[bytes]) -> str:
    """Start a kernel through the server's REST API, over its socket; return its id."""
    headers = {"Authorization": f"token {JUPYTER_TOKEN}"}
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), headers=headers,
                      base_url="http://localhost", timeout=60) as client:
        deadline = time.monotonic() + 60
        while not sock.exists() or not _answers(client):
            assert proc.poll() is None, "jupyter server exited"
            assert time.monotonic() < deadline, "jupyter server did not start"
            time.sleep(0.2)
        response = client.post("/api/kernels", json={"name": "python3"})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])


def _answers(client: httpx.Client) -> bool:
    """Say whether the server answers on its socket yet."""
    try:
        return client.get("/api/status").status_code == 200
    except httpx.TransportError:
        return False


def _run(kc: BlockingKernelClient, code: str) -> tuple[str, str]:
    """Run code in the kernel; return its reply status and all text it output."""
    texts: list[str] = []

    def collect(msg: dict[str, Any]) -> None:
        content = msg["content"]
        texts.append(content.get("text", ""))
        texts.extend(str(v) for k, v in content.get("data", {}).items() if k.startswith("text/"))
        if msg["msg_type"] == "error":
            texts.append(f"{content['ename']}: {content['evalue']}")

    reply = kc.execute_interactive(code, output_hook=collect, timeout=90)
    return reply["content"]["status"], "".join(texts)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Unix sockets")
def test_ask_in_a_kernel_of_a_socket_server_reaches_the_model(
    tmp_path: Path, fake: FakeLLM
) -> None:
    """A real `jupyter server --sock`: %%ask in its kernel gets the model's answer."""
    sock = tmp_path / "s.sock"
    proc = _start_server(tmp_path, fake, sock)
    kc = BlockingKernelClient()
    try:
        kernel_id = _start_kernel(sock, proc)
        kc.load_connection_file(str(connection_file(tmp_path / "rt", kernel_id)))
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        assert _run(kc, "import os; print(sorted(k for k in os.environ if 'API_KEY' in k))"
                    ) == ("ok", "[]\n")
        assert _run(kc, "%load_ext jupyter_ci")[0] == "ok"
        status, text = _run(kc, "%%ask -m openai:gpt-test\nsay hi")
        assert status == "ok" and "hi from the socket" in text, text
    finally:
        kc.stop_channels()
        proc.terminate()
        proc.wait(30)
    assert [r.path for r in fake.requests] == [OPENAI_PATH]
    assert fake.requests[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert OPENAI_KEY not in (tmp_path / "server.log").read_text()
