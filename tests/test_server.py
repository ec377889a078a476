"""The server extension: config route, key broker, and keys kept out of kernels."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPResponse
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets
from traitlets.config import Config

from jupyter_ci import providers
from jupyter_ci.models.broker import MANAGED
from jupyter_ci.server.broker import (
    ENV_HOSTS,
    ENV_MODEL,
    ENV_PROVIDERS,
    ENV_TOKEN,
    ENV_URL,
    Broker,
    broker_url,
)

OPENAI_KEY = "sk-test-OPENAI-secret-1234"
ANTHROPIC_KEY = "sk-ant-test-ANTHROPIC-secret-5678"
SECRETS = (OPENAI_KEY, ANTHROPIC_KEY)
PROVIDER_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")
MANAGED_VARS = (*PROVIDER_VARS, *MANAGED)

OPENAI_SSE = [
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"fake",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},'
    b'"finish_reason":null}]}\n\n',
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"fake",'
    b'"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}\n\n',
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"fake",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
]
ANTHROPIC_SSE = [
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m1","type":'
    b'"message","role":"assistant","model":"fake","content":[],"stop_reason":null,'
    b'"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"Hel"}}\n\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"lo"}}\n\n',
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
    b'"stop_sequence":null},"usage":{"output_tokens":2}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
]


@dataclass
class Upstream:
    """A tiny provider stand-in that records what reached it."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    # Set by a test to hold the stream after its first chunk until the client has it.
    gate: asyncio.Event | None = None
    gate_timed_out: bool = False
    # Set by a test to misbehave on the model routes: "slow", "broken" or "limited".
    mode: str = ""
    # Canned replies served first, in order: (status, headers, body chunks).
    replies: list[tuple[int, dict[str, str], list[bytes]]] = field(default_factory=list)


class UpstreamHandler(web.RequestHandler):
    """Record the request; answer by path like the real providers would."""

    def initialize(self, upstream: Upstream) -> None:
        self.upstream = upstream

    async def get(self, path: str) -> None:
        await self.post(path)

    async def delete(self, path: str) -> None:
        await self.post(path)

    async def post(self, path: str) -> None:
        self.upstream.requests.append(
            {"path": self.request.uri, "method": self.request.method,
             "headers": dict(self.request.headers), "body": self.request.body}
        )
        if self.upstream.replies:
            status, headers, chunks = self.upstream.replies.pop(0)
            self.set_status(status)
            for name, value in headers.items():
                self.set_header(name, value)
            for chunk in chunks:
                self.write(chunk)
                await self.flush()
            return
        mode = self.upstream.mode
        if mode == "slow":
            await asyncio.sleep(3)
        if mode == "broken":
            self.write(OPENAI_SSE[0])
            await self.flush()
            self.request.connection.close()  # type: ignore[union-attr]
            return
        if mode == "limited":
            self.set_status(429)
            self.set_header("Retry-After", "7")
            self.set_header("Set-Cookie", "upstream=1")
            self.finish({"error": {"message": "slow down", "type": "rate_limit"}})
            return
        if path in ("v1/chat/completions", "v1/messages"):
            await self._stream(OPENAI_SSE if path.endswith("completions") else ANTHROPIC_SSE)
            return
        self.finish({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    async def _stream(self, chunks: list[bytes]) -> None:
        self.set_header("Content-Type", "text/event-stream")
        for i, chunk in enumerate(chunks):
            self.write(chunk)
            await self.flush()
            if i == 0 and self.upstream.gate is not None:
                try:
                    await asyncio.wait_for(self.upstream.gate.wait(), 5)
                except asyncio.TimeoutError:
                    self.upstream.gate_timed_out = True


@pytest.fixture
def upstream(jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[Upstream]:
    """Serve a fake provider on 127.0.0.1 in the test's event loop."""
    sockets = bind_sockets(0, "127.0.0.1")
    up = Upstream(f"http://127.0.0.1:{sockets[0].getsockname()[1]}")
    app = web.Application([(r"/(.*)", UpstreamHandler, {"upstream": up})])

    async def start() -> HTTPServer:
        server = HTTPServer(app)
        server.add_sockets(sockets)
        return server

    server = jp_asyncio_loop.run_until_complete(start())
    yield up
    server.stop()


@pytest.fixture
def server_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """Provider variables the server starts with (override with indirect parametrize)."""
    return getattr(request, "param", {"OPENAI_API_KEY": OPENAI_KEY,
                                      "ANTHROPIC_API_KEY": ANTHROPIC_KEY})


@pytest.fixture
def ci_config() -> dict[str, Any]:
    """The c.JupyterCI section of the server config."""
    return {}


@pytest.fixture
def jp_server_config(
    monkeypatch: pytest.MonkeyPatch, upstream: Upstream, server_env: dict[str, str],
    ci_config: dict[str, Any],
) -> Config:
    """Enable the extension, with the provider environment set before it loads."""
    for var in MANAGED_VARS:
        # setenv first so monkeypatch restores even variables the extension creates.
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    env = {"OPENAI_BASE_URL": f"{upstream.url}/v1", "ANTHROPIC_BASE_URL": upstream.url}
    env = {k: v for k, v in env.items() if k not in server_env}
    for var, value in {**env, **server_env}.items():
        if value:
            monkeypatch.setenv(var, value)
    return Config({"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
                   "JupyterCI": ci_config})


@pytest.fixture
def live_server(jp_serverapp: Any, http_server_client: Any) -> Any:
    """Return the server app with its HTTP server listening (the kernels' broker URL)."""
    return jp_serverapp


@pytest.fixture
def capture(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Capture every log record and check no key was logged."""
    caplog.set_level(logging.DEBUG)
    yield caplog
    for secret in SECRETS:
        assert secret not in caplog.text


async def broker_fetch(
    provider_path: str, headers: dict[str, str] | None = None, body: bytes | None = None,
    method: str = "POST", **kwargs: Any,
) -> HTTPResponse:
    """Call the broker at the URL kernels are given; return the response, even an error."""
    url = f"{os.environ[ENV_URL]}/{provider_path}"
    try:
        response = await AsyncHTTPClient().fetch(
            url, method=method, headers=headers, body=body, request_timeout=20, **kwargs
        )
    except HTTPClientError as err:
        assert err.response is not None
        response = err.response
    text = (response.body or b"").decode() + str(dict(response.headers))
    for secret in SECRETS:
        assert secret not in text
    return response


@pytest.fixture
def token(jp_serverapp: Any) -> str:
    """A broker token, issued as the server issues one to each kernel it starts."""
    broker = jp_serverapp.web_app.settings["jupyter_ci_broker"]
    return str(broker.issue("kernel-of-this-test"))


def bearer(token: str) -> dict[str, str]:
    """Headers the OpenAI SDK sends in a kernel."""
    return {"Authorization": f"Bearer {token}"}


CHAT = json.dumps({"model": "fake", "messages": [], "stream": True}).encode()


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
    assert os.environ[ENV_PROVIDERS] == ""


@pytest.mark.parametrize("server_env", [{"ANTHROPIC_BASE_URL": ""}], indirect=True)
async def test_config_keyless_local_server_asks_for_a_model(jp_fetch: Any) -> None:
    reply = json.loads((await jp_fetch("jupyter-ci", "config")).body)
    assert reply["models"] == [] and "JUPYTER_CI_MODEL" in reply["problem"]
    assert os.environ[ENV_PROVIDERS] == "openai"


@pytest.mark.parametrize("ci_config", [{"model": "anthropic:claude-opus-4-1",
                                        "models": ["openai:gpt-4.1-mini"]}])
async def test_config_follows_server_settings(jp_fetch: Any, ci_config: Any) -> None:
    reply = json.loads((await jp_fetch("jupyter-ci", "config")).body)
    assert reply["models"] == ["anthropic:claude-opus-4-1", "openai:gpt-4.1-mini"]
    assert reply["default_model"] == "anthropic:claude-opus-4-1"
    # Kernels share the server's default model.
    assert os.environ[ENV_MODEL] == "anthropic:claude-opus-4-1"


async def test_keys_leave_the_environment(jp_serverapp: Any, jp_base_url: str) -> None:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL"):
        assert var not in os.environ
    port = jp_serverapp.port
    assert os.environ[ENV_URL] == f"http://127.0.0.1:{port}{jp_base_url}jupyter-ci/broker"
    # Each kernel gets its own token when it starts (tests/security/test_broker_policy.py).
    assert ENV_TOKEN not in os.environ
    assert os.environ[ENV_PROVIDERS] == "openai,anthropic"
    assert OPENAI_KEY not in repr(jp_serverapp.web_app.settings["jupyter_ci_broker"])


KERNEL_CODE = """
import json, os, openai
client = openai.OpenAI(base_url=os.environ["JUPYTER_CI_BROKER_URL"] + "/openai",
                       api_key=os.environ["JUPYTER_CI_BROKER_TOKEN"], max_retries=0)
stream = client.chat.completions.create(model="fake", messages=[], stream=True)
text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
names = [k for k in os.environ if "API_KEY" in k or k.startswith("JUPYTER_CI_")]
print(json.dumps({"names": sorted(names), "text": text,
                  "leak": any(s in repr(dict(os.environ)) for s in %r)}))
"""


async def test_real_kernel_gets_broker_not_keys(
    live_server: Any, upstream: Upstream, capture: Any
) -> None:
    km = live_server.kernel_manager
    kernel_id = await km.start_kernel()
    client = km.get_kernel(kernel_id).client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=60)
        out: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        await client.execute_interactive(KERNEL_CODE % (SECRETS,), output_hook=hook,
                                         timeout=60)
    finally:
        client.stop_channels()
        await km.shutdown_kernel(kernel_id, now=True)
    seen = json.loads("".join(out))
    assert seen == {"names": [ENV_HOSTS, ENV_PROVIDERS, ENV_TOKEN, ENV_URL], "text": "Hello",
                    "leak": False}
    assert upstream.requests[-1]["headers"]["Authorization"] == f"Bearer {OPENAI_KEY}"


async def test_openai_stream_is_relayed_live_with_the_real_key(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    upstream.gate = asyncio.Event()
    chunks: list[bytes] = []

    def on_chunk(chunk: bytes) -> None:
        chunks.append(chunk)
        upstream.gate.set()  # type: ignore[union-attr]

    headers = {**bearer(token), "Cookie": "_xsrf=abc", "OpenAI-Beta": "assistants=v2"}
    response = await broker_fetch("openai/chat/completions?x=1", headers, CHAT,
                                  streaming_callback=on_chunk)
    assert response.code == 200 and not upstream.gate_timed_out
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert b"".join(chunks) == b"".join(OPENAI_SSE)
    got = upstream.requests[-1]
    assert got["path"] == "/v1/chat/completions?x=1" and got["body"] == CHAT
    assert got["headers"]["Authorization"] == f"Bearer {OPENAI_KEY}"
    assert got["headers"]["Openai-Beta"] == "assistants=v2"
    assert "Cookie" not in got["headers"]
    assert token not in json.dumps(got["headers"])


async def test_anthropic_request_gets_x_api_key(
    jp_fetch: Any, jp_auth_header: dict[str, str], upstream: Upstream, token: str, capture: Any
) -> None:
    # jp_fetch adds the Jupyter token too: it must be ignored and never forwarded.
    headers = {"x-api-key": token, "anthropic-version": "2023-06-01"}
    response = await jp_fetch("jupyter-ci", "broker", "anthropic", "v1", "messages",
                              method="POST", body=CHAT, headers=headers)
    assert response.body == b"".join(ANTHROPIC_SSE)
    got = upstream.requests[-1]["headers"]
    assert got["X-Api-Key"] == ANTHROPIC_KEY and got["Anthropic-Version"] == "2023-06-01"
    assert "Authorization" not in got
    assert jp_auth_header["Authorization"].split()[-1] not in json.dumps(got)


async def test_real_sdks_stream_through_the_broker(
    live_server: Any, token: str, capture: Any
) -> None:
    import anthropic
    import openai

    base = os.environ[ENV_URL]
    oai = openai.AsyncOpenAI(base_url=f"{base}/openai", api_key=token, max_retries=0)
    stream = await oai.chat.completions.create(model="fake", messages=[], stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "Hello"
    ant = anthropic.AsyncAnthropic(base_url=f"{base}/anthropic", api_key=token, max_retries=0)
    events = await ant.messages.create(model="fake", max_tokens=10, stream=True,
                                       messages=[{"role": "user", "content": "hi"}])
    deltas = [e.delta async for e in events if e.type == "content_block_delta"]
    assert "".join(d.text for d in deltas if isinstance(d, anthropic.types.TextDelta)) == "Hello"


async def test_upstream_errors_are_relayed(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    upstream.mode = "limited"
    response = await broker_fetch("openai/chat/completions", bearer(token), CHAT)
    assert response.code == 429 and response.headers["Retry-After"] == "7"
    assert json.loads(response.body)["error"]["message"] == "slow down"
    assert "Set-Cookie" not in response.headers


@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "Bearer wrong"}, {"x-api-key": "wrong"}, "jupyter", "jupyter-query",
])
async def test_broker_rejects_other_credentials(
    live_server: Any, jp_auth_header: dict[str, str], upstream: Upstream, headers: Any,
    capture: Any,
) -> None:
    path = "openai/models"
    jupyter_token = jp_auth_header["Authorization"].split()[-1]
    if headers == "jupyter":
        headers = jp_auth_header
    elif headers == "jupyter-query":
        headers, path = {"Authorization": f"Bearer {jupyter_token}"}, f"{path}?token=" + (
            jupyter_token)
    response = await broker_fetch(path, headers, method="GET")
    assert response.code == 403
    assert "broker token" in json.loads(response.body)["error"]["message"]
    assert upstream.requests == []


@pytest.mark.parametrize("route", ["api/kernels", "jupyter-ci/config"])
@pytest.mark.parametrize("scheme", ["token", "Bearer"])
async def test_broker_token_opens_nothing_else(
    jp_serverapp: Any, http_server_client: Any, jp_base_url: str, route: str, scheme: str,
    token: str,
) -> None:
    headers = {"Authorization": f"{scheme} {token}"}
    with pytest.raises(HTTPClientError) as caught:
        await http_server_client.fetch(f"{jp_base_url}{route}", headers=headers)
    assert caught.value.code == 403


@pytest.mark.parametrize("server_env", [{"ANTHROPIC_API_KEY": OPENAI_KEY,
                                         "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}],
                         indirect=True)
async def test_unreachable_upstream_is_a_502(
    live_server: Any, token: str, capture: Any
) -> None:
    response = await broker_fetch("anthropic/v1/messages", {"x-api-key": token}, CHAT)
    assert response.code == 502
    error = json.loads(response.body)
    assert error["type"] == "error"
    assert "could not reach http://127.0.0.1:9/v1/messages" in error["error"]["message"]


@pytest.mark.parametrize("server_env", [{"ANTHROPIC_BASE_URL": ""}], indirect=True)
async def test_missing_key_is_a_401_naming_the_variable(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    response = await broker_fetch("anthropic/v1/messages", {"x-api-key": token}, CHAT)
    assert response.code == 401
    assert "ANTHROPIC_API_KEY" in json.loads(response.body)["error"]["message"]
    # A keyless OpenAI-compatible server (Ollama) is forwarded to without any key.
    response = await broker_fetch("openai/chat/completions", bearer(token), CHAT)
    assert response.code == 200
    assert "Authorization" not in upstream.requests[-1]["headers"]


@pytest.mark.parametrize("ci_config", [{"request_timeout": 0.5}])
async def test_silent_upstream_is_a_504(
    live_server: Any, upstream: Upstream, ci_config: Any, token: str
) -> None:
    upstream.mode = "slow"
    response = await broker_fetch("openai/chat/completions", bearer(token), CHAT)
    assert response.code == 504
    assert "no answer" in json.loads(response.body)["error"]["message"]


async def test_kernel_hanging_up_cancels_the_upstream_request(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    upstream.gate = asyncio.Event()  # never set: the upstream holds the stream open
    with pytest.raises(HTTPClientError):
        await AsyncHTTPClient().fetch(f"{os.environ[ENV_URL]}/openai/chat/completions",
                                      method="POST", headers=bearer(token), body=CHAT,
                                      request_timeout=0.5)
    await asyncio.sleep(0.2)
    assert "closed" in capture.text and "early" in capture.text


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


def _request(url: str, token: str, method: str = "GET") -> tuple[int, str]:
    """Send one request with a bearer token; return status and body."""
    request = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None,
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
             f"--ServerApp.root_dir={tmp_path}"],
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
        status, body = _request(f"{kernel_env[ENV_URL]}/openai/models", kernel_env[ENV_TOKEN])
        assert status == 502 and "could not reach http://127.0.0.1:9/v1/models" in body
        assert _request(f"{kernel_env[ENV_URL]}/openai/models", "jupyter-secret")[0] == 403
    finally:
        proc.terminate()
        proc.wait(30)
    assert OPENAI_KEY not in log.read_text()


async def test_upstream_dying_mid_stream_breaks_the_kernel_stream(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    upstream.mode = "broken"
    chunks: list[bytes] = []
    with pytest.raises(Exception) as caught:
        await AsyncHTTPClient().fetch(f"{os.environ[ENV_URL]}/openai/chat/completions",
                                      method="POST", headers=bearer(token), body=CHAT,
                                      request_timeout=10, streaming_callback=chunks.append)
    # A cut stream, never a clean end that the SDK would take as a complete answer.
    assert b"".join(chunks) == OPENAI_SSE[0], caught.value


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


# ----------------------------------------------------------------- keys given in the panel

PASTED = "sk-pasted-in-the-PANEL-9876"


async def kernel_run(km: Any, kernel_id: str, code: str) -> str:
    """Run code in a kernel of the server; return its text outputs (answers included)."""
    client = km.get_kernel(kernel_id).client()
    client.start_channels()
    out: list[str] = []

    def hook(msg: dict[str, Any]) -> None:
        content = msg["content"]
        if msg["msg_type"] == "stream":
            out.append(content["text"])
        elif msg["msg_type"] == "error":
            out.append("\n".join(content["traceback"]))
        elif msg["msg_type"] in ("display_data", "update_display_data", "execute_result"):
            out.append(str(content["data"].get("text/markdown")
                           or content["data"].get("text/plain", "")))

    try:
        await client.wait_for_ready(timeout=60)
        await client.execute_interactive(code, output_hook=hook, timeout=60)
    finally:
        client.stop_channels()
    return "\n".join(out)


async def post_key(jp_fetch: Any, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST /jupyter-ci/keys as the panel does; return the status and JSON reply."""
    try:
        response = await jp_fetch("jupyter-ci", "keys", method="POST", body=json.dumps(body))
    except HTTPClientError as err:
        assert err.response is not None
        response = err.response
    text = response.body.decode()
    assert PASTED not in text and PASTED not in str(dict(response.headers))
    return response.code, json.loads(text)


NOTHING = {"OPENAI_BASE_URL": "", "ANTHROPIC_BASE_URL": ""}


@pytest.mark.parametrize("server_env", [NOTHING], indirect=True)
async def test_a_key_pasted_in_the_panel_serves_a_kernel_started_before_it(
    live_server: Any, jp_fetch: Any, upstream: Upstream, capture: Any
) -> None:
    km = live_server.kernel_manager
    kernel_id = await km.start_kernel()
    try:
        before = await kernel_run(km, kernel_id, "%load_ext jupyter_ci\n%ask say hello")
        assert "No model is configured" in before and "jupyter-ci panel" in before
        status, reply = await post_key(jp_fetch, {
            "provider": "openai", "key": PASTED, "base_url": f"{upstream.url}/v1"})
        assert status == 200 and reply["problem"] is None
        assert reply["default_model"] == "openai:gpt-5.5" and reply["saved"] == ""
        config = await jp_fetch("jupyter-ci", "config")
        assert PASTED not in config.body.decode()
        # The kernel started without the provider: it asks the broker, then asks the model.
        after = await kernel_run(km, kernel_id, "%ask say hello")
        assert "Hello" in after
        assert upstream.requests[-1]["headers"]["Authorization"] == f"Bearer {PASTED}"
        seen = await kernel_run(km, kernel_id, (
            "import os\nprint('kernel env has it:', "
            f"{PASTED!r} in open('/proc/self/environ').read() + repr(dict(os.environ)))"))
        assert "kernel env has it: False" in seen
    finally:
        await km.shutdown_kernel(kernel_id, now=True)
    # New kernels learn the provider from their environment; the key is not in it.
    assert os.environ[ENV_PROVIDERS] == "openai"
    assert PASTED not in repr(dict(os.environ))
    assert PASTED not in capture.text


async def test_a_base_url_given_without_a_key_never_gets_the_servers_key(
    live_server: Any, jp_fetch: Any, upstream: Upstream, token: str
) -> None:
    # Whoever can reach the route (a kernel that read the server's token, say) must not
    # be able to point the server's own key at a host of theirs.
    status, _ = await post_key(jp_fetch, {"provider": "openai",
                                          "base_url": f"{upstream.url}/elsewhere/v1"})
    assert status == 200
    await broker_fetch("openai/chat/completions", bearer(token), CHAT)
    sent = upstream.requests[-1]
    assert sent["path"].startswith("/elsewhere/v1/")
    assert OPENAI_KEY not in json.dumps(sent["headers"])
    # Anthropic needs a key: a URL alone is refused and its key stays where it was.
    status, reply = await post_key(jp_fetch, {"provider": "anthropic",
                                              "base_url": f"{upstream.url}/x"})
    assert status == 400 and reply["message"] == "Paste an Anthropic key."
    broker = live_server.web_app.settings["jupyter_ci_broker"]
    assert broker.providers["anthropic"].api_key == ANTHROPIC_KEY


@pytest.mark.parametrize("body, expected", [
    ({"provider": "nobody", "key": PASTED}, "Unknown provider"),
    ({"provider": "openai", "key": "sk with spaces " + PASTED}, "not a usable OpenAI key"),
    ({"provider": "openai", "key": PASTED, "base_url": "file:///etc"}, "http:// or https://"),
    ({"provider": "openai", "key": ["list"]}, "Send JSON"),
    ({"provider": "openai"}, "Paste an OpenAI key (or only a base URL"),
])
async def test_a_wrong_key_request_says_what_is_wrong_without_the_key(
    jp_fetch: Any, body: dict[str, Any], expected: str, capture: Any
) -> None:
    status, reply = await post_key(jp_fetch, body)
    assert status == 400 and expected in reply["message"]
    assert PASTED not in capture.text


async def test_the_keys_route_needs_jupyter_auth(live_server: Any, jp_base_url: str) -> None:
    url = f"http://127.0.0.1:{live_server.port}{jp_base_url}jupyter-ci/keys"
    with pytest.raises(HTTPClientError) as err:
        await AsyncHTTPClient().fetch(url, method="POST", body=json.dumps(
            {"provider": "openai", "key": PASTED}))
    assert err.value.code in (401, 403)
    broker = live_server.web_app.settings["jupyter_ci_broker"]
    assert broker.providers["openai"].api_key == OPENAI_KEY


@pytest.mark.parametrize("server_env", [NOTHING], indirect=True)
async def test_remember_saves_the_key_to_a_private_file_the_next_start_reads(
    jp_fetch: Any, jp_data_dir: Path, upstream: Upstream
) -> None:
    from jupyter_ci.server.keys import default_key_file, key_file_to_read, stored_keys

    # No key file configured: the default one, in the user's Jupyter data directory.
    path = default_key_file()
    assert path.is_relative_to(jp_data_dir) and key_file_to_read("") == ""
    # A base URL of the fake provider: the key is checked with it, never on the internet.
    status, reply = await post_key(jp_fetch, {"provider": "anthropic", "key": PASTED,
                                              "base_url": upstream.url, "remember": True})
    assert status == 200 and reply["saved"] == f"saved to {path}"
    assert path.stat().st_mode & 0o777 == 0o600
    kept = {"ANTHROPIC_API_KEY": PASTED, "ANTHROPIC_BASE_URL": upstream.url}
    assert json.loads(path.read_text()) == kept
    assert key_file_to_read("") == str(path)
    assert stored_keys(str(path), {}, logging.getLogger("test")) == kept


async def test_broker_info_answers_only_a_kernel_token(live_server: Any, token: str) -> None:
    ok = await broker_fetch("_info", bearer(token), method="GET")
    assert ok.code == 200
    info = json.loads(ok.body)
    assert info[ENV_PROVIDERS] == "openai,anthropic" and ENV_TOKEN not in info
    refused = await broker_fetch("_info", bearer("not-a-token"), method="GET")
    assert refused.code == 403
