"""The server extension: config route, keys kept out of kernels, the URL kernels are given.

The model service's own tests are in tests/test_model_service.py and
tests/security/test_service_*.py; the fixtures all share are in tests/service_fixtures.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tornado.netutil import bind_sockets

from jupyter_ci import providers
from jupyter_ci.models.broker import ENV_MODEL, ENV_PROVIDERS, ENV_TOKEN, ENV_URL
from jupyter_ci.models.turn_wire import TURN_PATH
from jupyter_ci.server.broker.broker import Broker, broker_url
from tests.service_fixtures import (
    NOTHING,
    OPENAI_KEY,
    PASTED,
    Upstream,
    broker_of,
    capture,
    ci_config,
    jp_server_config,
    live_server,
    post_key,
    server_env,
    token,
    told,
    turn_body,
    upstream,
)

# Fixtures, and what tests/test_key_check.py and tests/test_server_shutdown.py import from here.
__all__ = ["NOTHING", "OPENAI_KEY", "PASTED", "Upstream", "capture", "ci_config",
           "jp_server_config", "live_server", "post_key", "server_env", "token", "upstream"]


async def test_config_lists_default_models(jp_fetch: Any, capture: Any) -> None:
    response = await jp_fetch("jupyter-ci", "config")
    reply = json.loads(response.body)
    defaults = [providers.PROVIDERS[p].default_model_id for p in ("openai", "anthropic")]
    assert reply["providers"] == [
        {"name": "openai", "label": "OpenAI", "configured": True, "keyless_with_url": True},
        {"name": "anthropic", "label": "Anthropic", "configured": True,
         "keyless_with_url": False}]
    del reply["providers"]
    assert reply == {"models": defaults, "default_model": defaults[0], "problem": None}
    assert OPENAI_KEY not in response.body.decode()


@pytest.mark.parametrize("server_env", [{"OPENAI_BASE_URL": "", "ANTHROPIC_BASE_URL": ""}],
                         indirect=True)
async def test_config_without_providers_names_the_variables(jp_fetch: Any) -> None:
    reply = json.loads((await jp_fetch("jupyter-ci", "config")).body)
    assert reply["models"] == [] and reply["default_model"] is None
    assert "OPENAI_API_KEY" in reply["problem"] and "ANTHROPIC_API_KEY" in reply["problem"]
    assert told().kernels[ENV_PROVIDERS] == ""


@pytest.mark.parametrize("server_env", [{"ANTHROPIC_BASE_URL": ""}], indirect=True)
async def test_config_keyless_local_server_asks_for_a_model(jp_fetch: Any) -> None:
    reply = json.loads((await jp_fetch("jupyter-ci", "config")).body)
    assert reply["models"] == [] and "JUPYTER_CI_MODEL" in reply["problem"]
    assert told().kernels[ENV_PROVIDERS] == "openai"


@pytest.mark.parametrize("ci_config", [{"model": "anthropic:claude-opus-4-1",
                                        "models": ["openai:gpt-4.1-mini"]}])
async def test_config_follows_server_settings(jp_fetch: Any, ci_config: Any) -> None:
    reply = json.loads((await jp_fetch("jupyter-ci", "config")).body)
    assert reply["models"] == ["anthropic:claude-opus-4-1", "openai:gpt-4.1-mini"]
    assert reply["default_model"] == "anthropic:claude-opus-4-1"
    # Kernels share the server's default model.
    assert told().kernels[ENV_MODEL] == "anthropic:claude-opus-4-1"


async def test_keys_leave_the_environment(jp_serverapp: Any, jp_base_url: str) -> None:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL"):
        assert var not in os.environ
    port = jp_serverapp.port
    assert told().kernels[ENV_URL] == f"http://127.0.0.1:{port}{jp_base_url}jupyter-ci/broker"
    # Each kernel gets its own credential when it starts (security/test_service_tokens.py),
    # and what the server tells kernels goes in their start, not in its own environment.
    assert ENV_TOKEN not in os.environ and ENV_URL not in os.environ
    assert told().kernels[ENV_PROVIDERS] == "openai,anthropic"
    assert OPENAI_KEY not in repr(broker_of(jp_serverapp))


def _wait_for_server_info(runtime: Path, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    """Wait for the jpserver-<pid>.json a started server writes, and read it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "jupyter server exited"
        for info in runtime.glob("jpserver-*.json"):
            return dict(json.loads(info.read_text()))
        time.sleep(0.2)
    raise AssertionError("jupyter server did not start")


def _child_environ(pid: int) -> dict[str, str]:
    """Read the environment of the kernel process started by `pid`."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                # Only the kernel: the server may run other children (npm, for one).
                kernel = b"ipykernel" in (stat.parent / "cmdline").read_bytes()
                if int(fields[1]) == pid and kernel:
                    raw = (stat.parent / "environ").read_bytes()
                    return dict(e.split("=", 1) for e in raw.decode().split("\0") if "=" in e)
            except (OSError, IndexError):
                continue
        time.sleep(0.2)
    raise AssertionError("no kernel process found")


def _request(url: str, token: str, method: str = "GET", data: bytes | None = None
             ) -> tuple[int, str]:
    """Send one request with a bearer token; return status and body."""
    if method == "POST" and data is None:
        data = b"{}"
    request = urllib.request.Request(url, method=method, data=data,
                                     headers={"Authorization": f"Bearer {token}"})
    for _ in range(100):
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()
        except urllib.error.URLError:
            # The server writes its info file before its loop binds the port.
            time.sleep(0.1)
    raise AssertionError(f"{url} is not reachable")


@pytest.fixture
def busy_port() -> Iterator[int]:
    """Hold a port, so a server asked for it must move to the next one."""
    sockets = bind_sockets(0, "127.0.0.1")
    yield sockets[0].getsockname()[1]
    for sock in sockets:
        sock.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("port", ["0", "busy"])
def test_kernels_get_the_port_the_server_bound(
    tmp_path: Path, port: str, busy_port: int
) -> None:
    """A real `jupyter server --port=0` (or a busy port, retried): kernels get the bound port."""
    config, runtime = tmp_path / "config", tmp_path / "runtime"
    config.mkdir()
    (config / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}}}))
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config), "JUPYTER_RUNTIME_DIR": str(runtime),
           "JUPYTER_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path),
           "PYTHONPATH": str(Path(__file__).parent.parent), "OPENAI_API_KEY": OPENAI_KEY,
           "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root",
             f"--port={busy_port if port == 'busy' else 0}", "--ip=127.0.0.1",
             "--IdentityProvider.token=jupyter-secret", "--ServerApp.log_level=DEBUG",
             "--JupyterCI.retries=0", f"--ServerApp.root_dir={tmp_path}",
             # Unboxed kernels reach the model service by its URL; a box, by its socket
             # (tests/security/test_service_tokens.py).
             "--JupyterCI.notebook_sandbox=never"],
            env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        info = _wait_for_server_info(runtime, proc)
        assert info["port"] not in (0, busy_port)
        status, _ = _request(f"{info['url']}api/kernels", "jupyter-secret", "POST")
        assert status == 201
        kernel_env = _child_environ(proc.pid)
        assert "OPENAI_API_KEY" not in kernel_env and "OPENAI_BASE_URL" not in kernel_env
        assert kernel_env[ENV_URL] == f"http://127.0.0.1:{info['port']}/jupyter-ci/broker"
        assert kernel_env[ENV_PROVIDERS] == "openai"
        # The kernel's credential is taken at that URL; the provider (port 9) is not there.
        turn = json.dumps(turn_body()).encode()
        status, body = _request(f"{kernel_env[ENV_URL]}/{TURN_PATH}", kernel_env[ENV_TOKEN],
                                "POST", turn)
        error = json.loads(body)["error"]
        assert status == 502 and error["type"] == "ModelUnavailable"
        assert "Could not connect to OpenAI at http://127.0.0.1:9/v1" in error["message"]
        assert _request(f"{kernel_env[ENV_URL]}/{TURN_PATH}", "jupyter-secret", "POST",
                        turn)[0] == 403
    finally:
        proc.terminate()
        proc.wait(30)
    assert OPENAI_KEY not in log.read_text()


@pytest.mark.parametrize(("ip", "host"), [
    ("", "127.0.0.1"), ("0.0.0.0", "127.0.0.1"), ("localhost", "127.0.0.1"),
    ("::", "[::1]"), ("10.1.2.3", "10.1.2.3"), ("fe80::1", "[fe80::1]"),
])
def test_broker_url_reaches_the_bound_address(ip: str, host: str) -> None:
    assert broker_url("http", ip, 8888, "/user/a/") == (
        f"http://{host}:8888/user/a/jupyter-ci/broker")


def test_broker_keeps_keys_out_of_reprs_and_environ() -> None:
    environ = {"OPENAI_API_KEY": OPENAI_KEY, "ANTHROPIC_BASE_URL": "localhost:8080", "X": "1"}
    broker = Broker.take_from_environ(environ)
    assert environ == {"X": "1"}
    token = broker.issue("k1")
    assert OPENAI_KEY not in repr(broker) and token not in repr(broker)
    # A base URL that cannot work leaves its provider unconfigured, said by name at start.
    assert [p.name for p in broker.configured()] == ["openai"]
    assert "ANTHROPIC_BASE_URL must start with http" in broker.misconfigured()[0]
