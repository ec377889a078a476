"""The Jupyter server with the extension, and the fake provider it holds keys for, for tests.

Shared by tests/test_server.py, tests/test_model_service.py, tests/test_panel_keys.py and
tests/security/test_service_*.py: a real Jupyter server with the extension, and
`Upstream`, a fake provider on 127.0.0.1 in the test's event loop that records every
request reaching it (any path) and answers the model routes in the real OpenAI and
Anthropic stream formats (tests/fakellm_wire.py). Kernels reach the server's model service
as `turn_fetch` does: our own turn, POSTed with the kernel's credential.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPResponse
from tornado.httpserver import HTTPServer
from tornado.iostream import StreamClosedError
from tornado.netutil import bind_sockets
from traitlets.config import Config

from jupyter_ci.models.broker import ENV_URL, MANAGED
from jupyter_ci.models.turn_wire import TURN_PATH
from jupyter_ci.server.broker.broker import Broker
from jupyter_ci.server.broker.kernels import Told
from tests.fakellm_wire import (
    Turn,
    anthropic_events,
    openai_chunks,
    raw_arguments,
    usage_of,
)

OPENAI_KEY = "sk-test-OPENAI-secret-1234"
ANTHROPIC_KEY = "sk-ant-test-ANTHROPIC-secret-5678"
SECRETS = (OPENAI_KEY, ANTHROPIC_KEY)
PROVIDER_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")
MANAGED_VARS = (*PROVIDER_VARS, *MANAGED)
#: The kernel id the `token` fixture's credential is issued to (its budget holder).
KERNEL = "kernel-of-this-test"
#: What the fake provider answers when no turn is scripted.
HELLO = Turn("Hello")


@dataclass
class Upstream:
    """A provider stand-in that records every request reaching it, on any path."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    # Set by a test to hold each model stream after its first text until it is set.
    gate: asyncio.Event | None = None
    gate_timed_out: bool = False
    # Set by a test to misbehave on the model routes: "slow", "broken" or "limited".
    mode: str = ""
    # Canned replies served first, in order: (status, headers, body chunks).
    replies: list[tuple[int, dict[str, str], list[bytes]]] = field(default_factory=list)
    # Scripted model turns, in order; HELLO once they are used up.
    turns: list[Turn] = field(default_factory=list)
    # Headers sent with every model stream (a provider's cookie, say).
    stream_headers: dict[str, str] = field(default_factory=dict)
    # When (time.monotonic()) a client hung up before its answer's end (a cut stream).
    cut: list[float] = field(default_factory=list)


class UpstreamHandler(web.RequestHandler):
    """Record the request; answer by path like the real providers would."""

    def initialize(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.gone = asyncio.Event()

    def on_connection_close(self) -> None:
        """The client hung up before the answer's end: a cut stream."""
        self.upstream.cut.append(time.monotonic())
        self.gone.set()

    async def get(self, path: str) -> None:
        await self.post(path)

    async def delete(self, path: str) -> None:
        await self.post(path)

    async def put(self, path: str) -> None:
        await self.post(path)

    async def post(self, path: str) -> None:
        self.upstream.requests.append(
            {"path": self.request.uri, "method": self.request.method,
             "headers": dict(self.request.headers), "body": self.request.body})
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
        if mode == "limited":
            self.set_status(429)
            self.set_header("Retry-After", "7")
            self.set_header("Set-Cookie", "upstream=1")
            self.finish({"error": {"message": "slow down", "type": "rate_limit"}})
            return
        if path.endswith(("chat/completions", "v1/messages")):
            await self._stream(path.endswith("completions"))
            return
        self.finish({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    async def _stream(self, openai: bool) -> None:
        """Stream the next scripted turn as the provider would, honouring gate and mode."""
        body = json.loads(self.request.body or b"{}")
        turn = self.upstream.turns.pop(0) if self.upstream.turns else HELLO
        model = str(body.get("model", ""))
        calls = [(f"call_{n}", name, raw_arguments(args))
                 for n, (name, args) in enumerate(turn.tool_calls)]
        usage = usage_of(turn)
        events: list[tuple[str | None, Any]]
        if openai:
            wanted = bool((body.get("stream_options") or {}).get("include_usage"))
            events = [(None, c) for c in openai_chunks(
                turn.text, calls, model=model, chunk_chars=turn.chunk_chars,
                usage=usage if wanted and turn.usage else None)]
            events.append((None, "[DONE]"))
        else:
            events = list(anthropic_events(turn.text, calls, model=model,
                                           chunk_chars=turn.chunk_chars, usage=usage))
        self.set_header("Content-Type", "text/event-stream")
        for header, value in self.upstream.stream_headers.items():
            self.set_header(header, value)
        for i, (name, data) in enumerate(events):
            head = f"event: {name}\n" if name else ""
            text = data if isinstance(data, str) else json.dumps(data)
            self.write(f"{head}data: {text}\n\n".encode())
            try:
                await self.flush()
            except StreamClosedError:
                return  # on_connection_close counts it
            if i == 0 and self.upstream.mode == "broken":
                self.request.connection.close()  # type: ignore[union-attr]
                return
            if self.upstream.gate is not None and carries_text(data):
                await self._hold(self.upstream.gate)
            if self.gone.is_set():
                return
            if turn.chunk_delay:
                await asyncio.sleep(turn.chunk_delay)

    async def _hold(self, gate: asyncio.Event) -> None:
        """Wait for the gate, or for the client to hang up (at most 5 s)."""
        waits = [asyncio.ensure_future(gate.wait()), asyncio.ensure_future(self.gone.wait())]
        done, pending = await asyncio.wait(waits, timeout=5,
                                           return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if not done:
            self.upstream.gate_timed_out = True


def carries_text(event: Any) -> bool:
    """Tell whether a stream event holds a piece of the reply's text (either format)."""
    if not isinstance(event, dict):
        return False
    choices: list[dict[str, Any]] = event.get("choices") or [{}]
    delta: dict[str, Any] = event.get("delta") or choices[0].get("delta") or {}
    return bool(delta.get("content") or delta.get("type") == "text_delta")


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
    """Return the server app with its HTTP server listening (the kernels' service URL)."""
    return jp_serverapp


@pytest.fixture
def capture(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Capture every log record and check no key was logged."""
    caplog.set_level(logging.DEBUG)
    yield caplog
    for secret in SECRETS:
        assert secret not in caplog.text


@pytest.fixture
def token(jp_serverapp: Any) -> str:
    """A kernel credential, issued as the server issues one to each kernel it starts."""
    return str(broker_of(jp_serverapp).issue(KERNEL))


def broker_of(server: Any) -> Broker:
    """Return the broker of a server with the extension."""
    broker: Broker = server.web_app.settings["jupyter_ci_broker"]
    return broker


def told() -> Told:
    """Return what the running test server tells the kernels it starts (their start env)."""
    from jupyter_server.serverapp import ServerApp

    server: Any = ServerApp.instance()
    kernels: Told = server.web_app.settings["jupyter_ci_told"]
    return kernels


def bearer(token: str) -> dict[str, str]:
    """Headers a kernel sends with its credential."""
    return {"Authorization": f"Bearer {token}"}


def turn_body(model: str = "openai:gpt-test", content: str = "hi", **fields: Any
              ) -> dict[str, Any]:
    """Return a turn as a kernel sends it (turn_wire.request_json), with `fields` added."""
    return {"model": model, "system": "You are a test.", "prompt": content, "max_tokens": 100,
            "tools": ["run_python"], "messages": [{"role": "user", "content": content}],
            **fields}


async def service_fetch(
    path: str, headers: dict[str, str] | None = None, body: bytes | None = None,
    method: str = "POST", **kwargs: Any,
) -> HTTPResponse:
    """Call the URL kernels are given, plus `path`; return the response, even an error."""
    url = f"{told().kernels[ENV_URL]}/{path}"
    try:
        response = await AsyncHTTPClient().fetch(
            url, method=method, headers=headers, body=body, request_timeout=30,
            allow_nonstandard_methods=True, **kwargs)
    except HTTPClientError as err:
        assert err.response is not None
        response = err.response
    text = (response.body or b"").decode() + str(dict(response.headers))
    for secret in SECRETS:
        assert secret not in text
    return response


def events(response: HTTPResponse) -> list[dict[str, Any]]:
    """Return the JSON lines of a reply stream, or the one JSON body of a refusal."""
    return [json.loads(line) for line in (response.body or b"").splitlines() if line.strip()]


async def turn_fetch(
    body: dict[str, Any] | bytes, token: str | None, *, headers: dict[str, str] | None = None,
    path: str = TURN_PATH, **kwargs: Any,
) -> tuple[int, list[dict[str, Any]]]:
    """POST a turn with a kernel's credential; return the status and the lines answered."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {"Content-Type": "application/json", **(bearer(token) if token else {}),
            **(headers or {})}
    response = await service_fetch(path, sent, data, **kwargs)
    if response.code == 200:
        assert response.headers["Content-Type"] == "application/x-ndjson"
    elif response.code != 404:
        assert response.headers["Content-Type"] == "application/json"
    return response.code, events(response) if response.code != 404 else []


def refusal(lines: list[dict[str, Any]]) -> tuple[str, str]:
    """Return the type and message of a refusal answered before the stream."""
    [answer] = lines
    return answer["error"]["type"], answer["error"]["message"]


async def hang_up_after_first_event(body: dict[str, Any], token: str) -> bytes:
    """Start a turn, read until its first event line arrives, then close the connection."""
    url = urlsplit(told().kernels[ENV_URL])
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    data = json.dumps(body).encode()
    writer.write(f"POST {url.path}/{TURN_PATH} HTTP/1.1\r\nHost: {url.netloc}\r\n"
                 f"Authorization: Bearer {token}\r\nContent-Length: {len(data)}\r\n"
                 "Content-Type: application/json\r\n\r\n".encode() + data)
    received = b""
    while b'{"text"' not in received and b'{"tool_input"' not in received:
        chunk = await asyncio.wait_for(reader.read(65536), 20)
        assert chunk, received
        received += chunk
    writer.close()
    return received


# ------------------------------------------------------------------ keys given in the panel

PASTED = "sk-pasted-in-the-PANEL-9876"
NOTHING = {"OPENAI_BASE_URL": "", "ANTHROPIC_BASE_URL": ""}


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


async def kernel_output(km: Any, kernel_id: str, code: str, timeout: float = 60) -> str:
    """Run `code` in a kernel of the server; return what it printed (and any traceback).

    Reads IOPub with the async client's own awaits: jupyter_client before 8.7 polls ZMQ in
    `execute_interactive` without yielding, which would stall this server's loop while a
    kernel calls it (the model service).
    """
    client = km.get_kernel(kernel_id).client()
    client.start_channels()
    out: list[str] = []
    try:
        await client.wait_for_ready(timeout=60)
        msg_id = client.execute(code)
        while True:
            msg = await client.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                out.append(content["text"])
            elif kind == "error":
                out.append("\n".join(content["traceback"]))
            elif kind == "status" and content["execution_state"] == "idle":
                break
    finally:
        client.stop_channels()
    return "".join(out)
