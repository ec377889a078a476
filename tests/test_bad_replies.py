"""Model replies that are not the provider's wire format end each ask with one clear error.

The fake model server answers HTTP 200 with an HTML page, plain text, a stream with a chunk
that is not JSON or not the provider's shape, a stream cut off before its end (clean EOF),
or one whose connection breaks (`Garbage`, tests/fakellm_garbage.py), in both providers'
formats. The real SDKs read them; every door says `BadModelReply` with what came back
(content type, first bytes) and the base URL that answered, never a key, and asks once.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from traitlets.config import Config

from jupyter_ci import providers
from jupyter_ci.agent.errors import BadModelReply, ModelUnavailable
from jupyter_ci.agent.types import Message, ModelRequest
from jupyter_ci.models import scripted
from jupyter_ci.models.anthropic import AnthropicChatModel
from jupyter_ci.models.bad_reply import ReplyProblem, bad_reply, shown_url
from jupyter_ci.models.base import Endpoint
from jupyter_ci.models.openai import OpenAIChatModel
from jupyter_ci.models.sdk_client import SdkChatModel
from jupyter_ci.models.service import ServiceModel
from jupyter_ci.models.transport import sse_body
from tests.fakellm import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    FakeLLM,
    Garbage,
    RemoteFakeLLM,
    turn_from_json,
    turn_to_json,
)
from tests.fakellm_wire import GARBAGE_KINDS, openai_chunks
from tests.nbrun import (
    TEST_KEY,
    anthropic_env,
    error_of,
    openai_env,
    run_cells,
    session_server_config,
    text_of,
)
from tests.service_fixtures import broker_of, kernel_output, turn_body, turn_fetch
from tests.test_session_ask import ask
from tests.test_sessions import Fetch, new_session, run, stdout

ANTHROPIC_KEY = "sk-ant-test-0123456789abcdefghij"
MODELS = {"openai": "openai:gpt-test", "anthropic": "anthropic:claude-test"}
LABELS = {"openai": "OpenAI", "anthropic": "Anthropic"}
#: What each kind's message shows of what came back: its content type, its first bytes.
SAID = {
    "html": ("content type text/html", "an HTML page", "it begins: '<!DOCTYPE html> <html>"),
    "not_json": ("content type text/plain", "it begins: 'upstream connect error"),
    "bad_chunk": ("content type text/event-stream", "an event whose data is not JSON", ": '{"),
    "wrong_shape": ("content type text/event-stream", "not in its API's format",
                    '\'{"result":"ok","output":"hello from somewhere else"}\''),
    "cut": ("content type text/event-stream", "stopped its reply before the end",
            "the last: '{"),
    "broken": ("content type text/event-stream", "broke off its reply",
               "RemoteProtocolError"),
}
REQUEST = ModelRequest("You are a test.", (Message("user", "hi"),), ())


def base_url(fake: FakeLLM, provider: str) -> str:
    return fake.openai_base_url if provider == "openai" else fake.anthropic_base_url


def adapter(fake: FakeLLM, provider: str, retries: int = 3) -> SdkChatModel[Any, Any]:
    """The adapter the kernel or the server would use, with the SDK's retries on."""
    kind = OpenAIChatModel if provider == "openai" else AnthropicChatModel
    spec = providers.get(provider)
    assert spec is not None
    return kind(spec, "m", Endpoint(TEST_KEY, base_url(fake, provider), 10, retries))


def check_message(text: str, fake: FakeLLM, provider: str, kind: str) -> None:
    """Check a message says what came back, from where, and holds no key."""
    assert f"{LABELS[provider]} at {base_url(fake, provider)}" in text, text
    for part in SAID[kind]:
        assert part in text, (part, text)
    assert TEST_KEY not in text and ANTHROPIC_KEY not in text
    assert "JSONDecodeError" not in text and "Traceback (most recent" not in text


# ---------------------------------------------------------------- the adapters, both SDKs


@pytest.mark.parametrize("way", ["sync", "async"])
@pytest.mark.parametrize("kind", GARBAGE_KINDS)
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_adapter_refuses_a_reply_that_is_not_its_wire_format(
    fake: FakeLLM, provider: str, kind: str, way: str
) -> None:
    fake.push(Garbage(kind))
    model = adapter(fake, provider)
    with pytest.raises(BadModelReply) as caught:
        if way == "sync":
            model.complete(REQUEST, lambda _: None)
        else:
            asyncio.run(model.acomplete(REQUEST, lambda _: None))
    check_message(str(caught.value), fake, provider, kind)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    spec = providers.get(provider)
    assert spec is not None and spec.url_var in caught.value.hint
    assert fake.calls() == 1, "a malformed 200 is not retried"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_stream_that_stalls_mid_reply_says_so_not_could_not_connect(
    fake: FakeLLM, provider: str
) -> None:
    """Issue 24.14: a stalled stream was reported as "Could not connect"."""
    fake.push(Garbage("stall", seconds=3.0))
    spec = providers.get(provider)
    assert spec is not None
    kind = OpenAIChatModel if provider == "openai" else AnthropicChatModel
    model = kind(spec, "m", Endpoint(TEST_KEY, base_url(fake, provider), 1.0, 0))
    with pytest.raises(ModelUnavailable) as caught:
        model.complete(REQUEST, lambda _: None)
    said = str(caught.value)
    assert "stopped sending mid-reply" in said and "silent for over 1 s" in said, said
    assert "Could not connect" not in said
    assert "request_timeout" in caught.value.hint


def test_a_mislabelled_event_stream_is_still_read() -> None:
    """A compatible server that sends its events as text/plain still answers."""
    stream = sse_body(*((None, c) for c in openai_chunks("Fine.", [], model="m", chunk_chars=2,
                                                      usage=None)), (None, "[DONE]"))
    model = mocked(lambda _: httpx2.Response(200, headers={"content-type": "text/plain"},
                                            content=stream))
    assert model.complete(REQUEST, lambda _: None).text == "Fine."


def test_a_usage_chunk_with_choices_null_still_ends_a_reply() -> None:
    """Some compatible servers send their usage-only chunk with "choices": null."""
    chunks = list(openai_chunks("Fine.", [], model="m", chunk_chars=2, usage=(3, 2)))
    chunks[-1]["choices"] = None
    stream = sse_body(*((None, c) for c in chunks), (None, "[DONE]"))
    model = mocked(lambda _: httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, content=stream))
    reply = model.complete(REQUEST, lambda _: None)
    assert (reply.text, reply.input_tokens, reply.output_tokens) == ("Fine.", 3, 2)


def test_an_html_page_labelled_as_an_event_stream_is_a_stream_without_events() -> None:
    model = mocked(lambda _: httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, content=b"<html>hi</html>"))
    with pytest.raises(BadModelReply, match="ended before any event"):
        model.complete(REQUEST, lambda _: None)


def mocked(answer: Any) -> OpenAIChatModel:
    """An OpenAI adapter whose client answers every request with `answer(request)`."""
    spec = providers.get("openai")
    assert spec is not None
    model = OpenAIChatModel(spec, "m", Endpoint(TEST_KEY, "http://mock.invalid/v1", 5, 0))
    model._client = openai.OpenAI(api_key=TEST_KEY, base_url="http://mock.invalid/v1",
                                  max_retries=0, http_client=openai.DefaultHttpxClient(
                                      transport=httpx2.MockTransport(answer)))
    return model


def test_the_message_shows_no_key_user_or_query_of_the_url() -> None:
    spec = providers.get("openai")
    assert spec is not None
    url = "https://me:hunter2@proxy.example/v1?api_key=abc123#x"
    assert shown_url(url) == "https://proxy.example/v1"
    said = f"answered HTTP 200 with text: 'key={TEST_KEY}'"
    error = bad_reply(ReplyProblem(said, "page"), spec, url, 5, [TEST_KEY])
    assert isinstance(error, BadModelReply)
    assert "hunter2" not in str(error) and "abc123" not in str(error)
    assert TEST_KEY not in str(error) and "OpenAI at https://proxy.example/v1" in error.message


@pytest.mark.parametrize("kind", GARBAGE_KINDS)
@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
def test_the_fake_sends_garbage_unstreamed_too(fake: FakeLLM, path: str, kind: str) -> None:
    fake.push(Garbage(kind))
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=5)
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    response = conn.getresponse()
    assert response.status == 200
    try:
        data = response.read()
    except http.client.IncompleteRead:
        assert kind in ("cut", "broken")
        return
    kinds = {"html": "text/html", "not_json": "text/plain"}
    assert response.getheader("content-type", "").startswith(kinds.get(kind, "application/json"))
    if kind == "wrong_shape":
        assert "choices" not in json.loads(data) and "content" not in json.loads(data)
    else:
        with pytest.raises(ValueError):
            json.loads(data)


def test_garbage_goes_to_a_fake_in_another_process_as_json(fake: FakeLLM) -> None:
    step = Garbage("cut", times=2, text="Half")
    assert turn_from_json(turn_to_json(step)) == step
    assert turn_from_json({"garbage": "html"}) == Garbage("html")
    RemoteFakeLLM(fake.url).push(step)
    assert fake.remaining == 1
    model = adapter(fake, "openai")
    for _ in range(2):
        with pytest.raises(BadModelReply, match="stopped its reply before the end"):
            model.complete(REQUEST, lambda _: None)
    assert fake.remaining == 0


class _Portal(BaseHTTPRequestHandler):
    """A proxy's login page where the Jupyter server should be."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        page = b"<html><body>Please log in</body></html>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_page_where_the_model_service_should_be_is_a_clear_error() -> None:
    portal = ThreadingHTTPServer(("127.0.0.1", 0), _Portal)
    threading.Thread(target=portal.serve_forever, args=(0.05,), daemon=True).start()
    try:
        spec = providers.get("openai")
        assert spec is not None
        url = f"http://127.0.0.1:{portal.server_address[1]}/jupyter-ci/broker"
        model = ServiceModel(spec, "gpt-test", Endpoint("kernel-credential-123", url, 5, 0))
        with pytest.raises(BadModelReply) as caught:
            model.complete(REQUEST, lambda _: None)
    finally:
        portal.shutdown()
        portal.server_close()
    said = str(caught.value)
    assert f"model service at {url}/turn answered HTTP 200 with text/html" in said
    assert "'<html><body>Please log in</body></html>'" in said
    assert "kernel-credential-123" not in said


# ---------------------------------------------------------------- %%ask in a real kernel


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_ask_in_a_kernel_shows_the_clear_error_and_keeps_the_state(
    fake: FakeLLM, provider: str, tmp_path: Path
) -> None:
    fake.push(*(Garbage(kind) for kind in GARBAGE_KINDS))
    env = openai_env(fake) if provider == "openai" else anthropic_env(fake)
    asks = [f"%%ask\nstep {n}" for n in range(len(GARBAGE_KINDS))]
    nb = run_cells(["x = 41", *asks, "print(x + 1)"], env, tmp_path)
    for kind, cell in zip(GARBAGE_KINDS, nb.cells[2:-1], strict=True):
        error = error_of(cell)
        assert error is not None and error.ename == "BadModelReply", text_of(cell)
        check_message(f"{error.evalue}\n{''.join(error.traceback)}", fake, provider, kind)
    assert text_of(nb.cells[-1]) == "42\n"
    assert fake.calls() == len(GARBAGE_KINDS), "each ask asked once"


# ------------------------------------- through a Jupyter server: its model service, REST, MCP


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM) -> Config:
    """The extension, with both providers pointing at the fake model server."""
    config: Config = session_server_config(monkeypatch, {
        "OPENAI_API_KEY": TEST_KEY, "OPENAI_BASE_URL": fake.openai_base_url,
        "ANTHROPIC_API_KEY": ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": fake.anthropic_base_url})
    return config


async def test_ask_in_a_server_kernel_gets_the_clear_error_through_the_model_service(
    jp_serverapp: Any, http_server_client: Any, fake: FakeLLM
) -> None:
    km = jp_serverapp.kernel_manager
    kernel_id = await km.start_kernel()
    try:
        assert await kernel_output(km, kernel_id, "%load_ext jupyter_ci\nx = 41") == ""
        for provider in ("openai", "anthropic"):
            for kind in GARBAGE_KINDS:
                fake.push(Garbage(kind))
                said = await kernel_output(km, kernel_id,
                                           f"%%ask --model {MODELS[provider]}\ngo")
                assert "BadModelReply: " in said, said
                check_message(said, fake, provider, kind)
        assert await kernel_output(km, kernel_id, "print(x + 1)") == "42\n"
    finally:
        await km.shutdown_kernel(kernel_id, now=True)
    assert fake.calls() == 2 * len(GARBAGE_KINDS), "each ask asked once"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_model_service_relays_a_bad_reply_as_a_turn_error_not_a_500(
    jp_serverapp: Any, http_server_client: Any, fake: FakeLLM, provider: str
) -> None:
    token = str(broker_of(jp_serverapp).issue("kernel-of-this-test"))
    fake.push(Garbage("html"), Garbage("cut"))
    status, lines = await turn_fetch(turn_body(MODELS[provider]), token)
    assert status == 502 and lines[0]["error"]["type"] == "BadModelReply", lines
    check_message(lines[0]["error"]["message"], fake, provider, "html")
    # Cut after text streamed: the stream ends with the error line, never a reply.
    status, lines = await turn_fetch(turn_body(MODELS[provider]), token)
    assert status == 200 and "text" in lines[0], lines
    assert lines[-1]["error"]["type"] == "BadModelReply"
    assert not any("reply" in line for line in lines)
    check_message(lines[-1]["error"]["message"], fake, provider, "cut")
    assert fake.calls() == 2


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_rest_ask_ends_with_one_failed_result(
    jp_fetch: Fetch, fake: FakeLLM, provider: str
) -> None:
    sid = (await new_session(jp_fetch))["id"]
    await run(jp_fetch, sid, "x = 41")
    for kind in GARBAGE_KINDS:
        fake.push(Garbage(kind))
        events = await ask(jp_fetch, sid, prompt="go", model=MODELS[provider])
        kinds = [name for name, _ in events]
        assert kinds.count("result") == 1 and "error" not in kinds, kinds
        result = events[-1][1]
        assert result["status"] == "failed", result
        assert result["error"]["type"] == "BadModelReply"
        check_message(result["error"]["message"], fake, provider, kind)
    assert stdout(await run(jp_fetch, sid, "print(x + 1)")) == "42\n"
    assert fake.calls() == len(GARBAGE_KINDS)


async def test_any_failure_inside_a_rest_ask_still_ends_with_one_failed_result(
    jp_fetch: Fetch
) -> None:
    def boom(request: ModelRequest) -> Any:
        raise RuntimeError(f"the model double broke (key {TEST_KEY})")

    scripted.register("boom", [boom])
    sid = (await new_session(jp_fetch))["id"]
    events = await ask(jp_fetch, sid, prompt="go", model="scripted:boom")
    kinds = [name for name, _ in events]
    assert kinds.count("result") == 1 and "error" not in kinds, kinds
    result = events[-1][1]
    assert result["status"] == "failed"
    assert "RuntimeError: the model double broke" in result["error"]["message"]
    assert TEST_KEY not in json.dumps(events)


async def test_an_mcp_ask_is_one_clear_error(
    jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
    jp_base_url: str, fake: FakeLLM,
) -> None:
    from tests.test_mcp import http, texts

    url = f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url.rstrip('/')}"
    fake.push(Garbage("html"))
    async with http(url, str(jp_serverapp.identity_provider.token)) as mcp:
        result = await mcp.call_tool("ask", {"prompt": "go"})
    said = texts(result)
    assert result.is_error and "BadModelReply" in said, said
    check_message(said, fake, "openai", "html")
