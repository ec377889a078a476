"""The OpenAI and Anthropic adapters, driven through the real SDKs against the fake server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable

import pytest

from jupyter_ci import providers
from jupyter_ci.agent.errors import AskError, ModelConfigError, ModelUnavailable
from jupyter_ci.agent.types import Message, ModelReply, ModelRequest, ToolCall, ToolSpec
from jupyter_ci.models.anthropic import AnthropicChatModel
from jupyter_ci.models.base import ChatModel, Endpoint
from jupyter_ci.models.openai import OpenAIChatModel
from tests.fakellm import Fail, FakeLLM, Hang, Turn

KEY = "sk-test-SECRET-0123456789"
RUN_PYTHON = ToolSpec(
    "run_python",
    "Run Python code in the user's kernel.",
    {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
)
PROVIDERS = ["openai", "anthropic"]
OPENAI, ANTHROPIC = providers.PROVIDERS["openai"], providers.PROVIDERS["anthropic"]
MakeModel = Callable[..., "OpenAIChatModel | AnthropicChatModel"]


@pytest.fixture(params=PROVIDERS)
def make_model(request: pytest.FixtureRequest, fake: FakeLLM) -> MakeModel:
    """Return a factory of adapters of one provider pointed at the fake server."""

    def make(retries: int = 2, timeout: float = 5.0,
             url: str | None = None) -> OpenAIChatModel | AnthropicChatModel:
        if request.param == "openai":
            endpoint = Endpoint(KEY, url or fake.openai_base_url, timeout, retries)
            return OpenAIChatModel(OPENAI, "gpt-test", endpoint)
        endpoint = Endpoint(KEY, url or fake.anthropic_base_url, timeout, retries)
        return AnthropicChatModel(ANTHROPIC, "claude-test", endpoint)

    return make


def ask(*messages: Message, system: str = "You are a code interpreter.") -> ModelRequest:
    """Build a request offering run_python."""
    return ModelRequest(system, messages or (Message("user", "hi"),), (RUN_PYTHON,), 1000)


def failure(model: ChatModel, kind: type[AskError]) -> str:
    """Run a turn that must fail with `kind`; return the error text, checked for the key."""
    with pytest.raises(kind) as info:
        model.complete(ask(), lambda _: None)
    text = str(info.value)
    assert KEY not in text
    return text


def free_port() -> int:
    """Return a port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_HELD: list[socket.socket] = []


def closed_port() -> int:
    """Return a port that refuses connections for the whole test process.

    It stays bound without listening, so no other server of a parallel test can take it
    (a free_port() chosen early can be handed to a fake model server started later).
    """
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    _HELD.append(sock)
    return int(sock.getsockname()[1])


# --- streaming and tool calls -------------------------------------------------------------

def test_text_streams_in_pieces(fake: FakeLLM, make_model: MakeModel) -> None:
    answer = "The mean of the column is 42.5, computed over 1000 rows."
    fake.push(Turn(answer))
    pieces: list[str] = []
    reply = make_model().complete(ask(), pieces.append)
    assert len(pieces) > 5
    assert "".join(pieces) == reply.text == answer
    assert reply.tool_calls == ()
    assert (reply.input_tokens, reply.output_tokens) == (11, 7)


def test_single_tool_call(fake: FakeLLM, make_model: MakeModel) -> None:
    code = "import pandas as pd\nprint('héllo \"world\"')\n"
    fake.push(Turn("Let me check.", tool_calls=[("run_python", {"code": code})]))
    reply = make_model().complete(ask(), lambda _: None)
    assert reply.text == "Let me check."
    (call,) = reply.tool_calls
    assert call.name == "run_python" and call.id
    assert json.loads(call.arguments) == {"code": code}


def test_parallel_tool_calls_keep_order_and_ids(fake: FakeLLM, make_model: MakeModel) -> None:
    calls = [("run_python", {"code": "a = 1"}), ("run_python", {"code": "b = 2"})]
    fake.push(Turn(tool_calls=calls))
    reply = make_model().complete(ask(), lambda _: None)
    assert reply.text == ""
    assert [json.loads(c.arguments)["code"] for c in reply.tool_calls] == ["a = 1", "b = 2"]
    assert len({c.id for c in reply.tool_calls}) == 2


def test_malformed_arguments_arrive_raw(fake: FakeLLM, make_model: MakeModel) -> None:
    fake.push(Turn(tool_calls=[("run_python", '{"code": "print(1)')]))
    (call,) = make_model().complete(ask(), lambda _: None).tool_calls
    assert call.arguments == '{"code": "print(1)'


def test_missing_usage_is_zero(fake: FakeLLM) -> None:
    # Some OpenAI-compatible servers ignore stream_options and never report usage.
    fake.push(Turn("hi there", usage=False))
    reply = OpenAIChatModel(OPENAI, "llama", Endpoint("x", fake.openai_base_url)).complete(
        ask(), lambda _: None)
    assert (reply.text, reply.input_tokens, reply.output_tokens) == ("hi there", 0, 0)


def test_openai_compatible_chunk_quirks() -> None:
    from jupyter_ci.models.openai import _Turn

    def chunk(*calls: dict[str, object]) -> dict[str, object]:
        # As the adapter folds them: decoded JSON, not the SDK's models.
        return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                "choices": [{"index": 0, "delta": {"tool_calls": list(calls)}}]}

    turn = _Turn()
    # Ollama numbers parallel calls all 0, telling them apart only by id; a later server
    # sends no id at all.
    turn.add(chunk({"index": 0, "id": "a", "function": {"name": "run_python",
                                                        "arguments": '{"code": "1"}'}}), print)
    turn.add(chunk({"index": 0, "id": "b", "function": {"name": "run_python",
                                                        "arguments": '{"code"'}}), print)
    turn.add(chunk({"index": 0, "function": {"arguments": ': "2"}'}}), print)
    turn.add(chunk({"index": 1, "function": {"name": "run_python", "arguments": "{}"}}), print)
    calls = turn.reply().tool_calls
    assert [(c.id, c.arguments) for c in calls[:2]] == [("a", '{"code": "1"}'),
                                                         ("b", '{"code": "2"}')]
    assert calls[2].id.startswith("call_") and calls[2].arguments == "{}"


# --- request translation ------------------------------------------------------------------

HISTORY = (
    Message("user", "Load data.csv"),
    Message("assistant", "Loading.", tool_calls=(
        ToolCall("call_1", "run_python", '{"code": "df = load()"}'),
        ToolCall("call_2", "run_python", '{"code": "print(1)'),  # malformed, sent back
    )),
    Message("tool", "ok", tool_call_id="call_1"),
    Message("tool", "SyntaxError: bad arguments", tool_call_id="call_2"),
    Message("user", "Now plot it"),
)


def test_openai_request(fake: FakeLLM) -> None:
    fake.push(Turn("done"))
    OpenAIChatModel(OPENAI, "gpt-test", Endpoint(KEY, fake.openai_base_url)).complete(
        ask(*HISTORY, system="SYS"), lambda _: None)
    (req,) = fake.requests
    assert req.headers["authorization"] == f"Bearer {KEY}"
    body = req.body
    assert body["model"] == "gpt-test" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 1000  # not api.openai.com: the widely supported name
    assert body["tools"] == [{"type": "function", "function": {
        "name": "run_python", "description": RUN_PYTHON.description,
        "parameters": RUN_PYTHON.parameters}}]
    assert [m["role"] for m in body["messages"]] == [
        "system", "user", "assistant", "tool", "tool", "user"]
    assert body["messages"][0]["content"] == "SYS"
    assistant = body["messages"][2]
    assert assistant["content"] == "Loading."
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_1", "call_2"]
    assert assistant["tool_calls"][0]["function"] == {
        "name": "run_python", "arguments": '{"code": "df = load()"}'}
    assert json.loads(assistant["tool_calls"][1]["function"]["arguments"]) == {
        "_raw_arguments": '{"code": "print(1)'}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "ok"}


def test_anthropic_request_merges_tool_results(fake: FakeLLM) -> None:
    fake.push(Turn("done"))
    AnthropicChatModel(ANTHROPIC, "claude-test", Endpoint(KEY, fake.anthropic_base_url)).complete(
        ask(*HISTORY, system="SYS"), lambda _: None)
    (req,) = fake.requests  # the fake's strict checks passed: roles alternate, ids match
    # anthropic 2.x sends the key as a bearer token; older SDKs used x-api-key.
    assert (req.headers.get("x-api-key") == KEY
            or req.headers.get("authorization") == f"Bearer {KEY}")
    body = req.body
    assert body["system"] == "SYS" and body["max_tokens"] == 1000 and body["stream"] is True
    assert body["tools"] == [{"name": "run_python", "description": RUN_PYTHON.description,
                              "input_schema": RUN_PYTHON.parameters}]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "Loading."},
        {"type": "tool_use", "id": "call_1", "name": "run_python",
         "input": {"code": "df = load()"}},
        {"type": "tool_use", "id": "call_2", "name": "run_python",
         "input": {"_raw_arguments": '{"code": "print(1)'}},
    ]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "ok"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": "SyntaxError: bad arguments"},
        {"type": "text", "text": "Now plot it"},
    ]


def test_anthropic_skips_empty_text_and_fixes_ids(fake: FakeLLM) -> None:
    fake.push(Turn("done"))
    history = (Message("user", "go"),
               Message("assistant", "", tool_calls=(ToolCall("id.with:dots", "run_python", ""),)),
               Message("tool", "", tool_call_id="id.with:dots"))
    AnthropicChatModel(ANTHROPIC, "c", Endpoint(KEY, fake.anthropic_base_url)).complete(
        ask(*history), lambda _: None)
    messages = fake.requests[0].messages
    assert messages[1]["content"] == [
        {"type": "tool_use", "id": "id_with_dots", "name": "run_python", "input": {}}]
    assert messages[2]["content"] == [{"type": "tool_result", "tool_use_id": "id_with_dots"}]


# --- failures -------------------------------------------------------------------------------

def test_transient_failures_are_retried(fake: FakeLLM, make_model: MakeModel) -> None:
    fake.push(Fail(500), Fail(429), Turn("recovered"))
    assert make_model(retries=2).complete(ask(), lambda _: None).text == "recovered"
    assert fake.calls() == 3


def test_server_error_after_retries(fake: FakeLLM, make_model: MakeModel) -> None:
    fake.push(Fail(503, times=3))
    text = failure(make_model(retries=2), ModelUnavailable)
    assert "HTTP 503" in text and "after 2 retries" in text and str(fake.port) in text
    assert ("OpenAI" in text) != ("Anthropic" in text)
    assert fake.calls() == 3


def test_unreachable_server(make_model: MakeModel) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    text = failure(make_model(retries=0, url=url), ModelUnavailable)
    assert "Could not connect" in text and url in text


def test_timeout(fake: FakeLLM, make_model: MakeModel) -> None:
    fake.push(Hang(5))
    text = failure(make_model(retries=0, timeout=0.3), ModelUnavailable)
    assert "did not answer within 0.3 s" in text


def test_key_rejected(fake: FakeLLM, make_model: MakeModel) -> None:
    # Some proxies echo the key they refused; it must not reach the user's notebook.
    fake.push(Fail(401, message=f"Incorrect API key provided: {KEY}"))
    text = failure(make_model(), ModelConfigError)
    assert "rejected the API key" in text and "***" in text
    assert "OPENAI_API_KEY" in text or "ANTHROPIC_API_KEY" in text
    assert fake.calls() == 1  # not retried


def test_unknown_model(fake: FakeLLM, make_model: MakeModel) -> None:
    fake.push(Fail(404))
    text = failure(make_model(), ModelConfigError)
    assert "HTTP 404" in text and ("'gpt-test'" in text or "'claude-test'" in text)


def test_other_client_error_shows_provider_message(fake: FakeLLM, make_model: MakeModel) -> None:
    fake.push(Fail(400, message="prompt is too long: 300000 tokens > 200000 maximum"))
    text = failure(make_model(), ModelUnavailable)
    assert "HTTP 400" in text and "prompt is too long" in text


def test_error_inside_stream(fake: FakeLLM, make_model: MakeModel) -> None:
    fake.push(Fail(529, message="Overloaded", mid_stream=True))
    assert "Overloaded" in failure(make_model(), ModelUnavailable)


# --- laziness and reuse ---------------------------------------------------------------------

def test_client_is_created_once(fake: FakeLLM, make_model: MakeModel) -> None:
    fake.push(Turn("a"), Turn("b"))
    model = make_model()
    model.complete(ask(), lambda _: None)
    client = model.client()
    model.complete(ask(), lambda _: None)
    assert model.client() is client


def test_prepare_builds_the_client_and_rehearses_a_turn_without_sending_anything(
    fake: FakeLLM, make_model: MakeModel
) -> None:
    model = make_model()
    rehearsed: list[ModelReply] = []
    stream = model._stream

    def spy(client: object, request: ModelRequest, on_text: Callable[[str], None]) -> object:
        rehearsed.append(stream(client, request, on_text))  # type: ignore[arg-type]
        return rehearsed[-1]

    model._stream = spy  # type: ignore[method-assign,assignment]
    model.prepare()
    # The canned turn went through the SDK's whole streaming path, offline.
    assert [(r.text, [c.name for c in r.tool_calls]) for r in rehearsed] == [
        ("ok", ["run_python"])]
    assert fake.calls() == 0
    client = model.client()
    fake.push(Turn("hello"))
    assert model.complete(ask(), lambda _: None).text == "hello"
    assert model.client() is client and fake.calls() == 1


def test_adapters_do_not_import_sdks() -> None:
    code = ("import sys, jupyter_ci.models.openai, jupyter_ci.models.anthropic\n"
            "print(sorted({'openai', 'anthropic', 'httpx2'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_openai_token_limit_option_follows_the_host() -> None:
    """api.openai.com's reasoning models refuse max_tokens; compatible servers may not know
    its successor. Planned, not sent: nothing leaves the machine."""
    import openai

    request = ModelRequest("sys", (Message("user", "hi"),), (), max_tokens=99)
    model = OpenAIChatModel(OPENAI, "gpt-x", Endpoint("k"))
    official = model._plan(openai.OpenAI(api_key="k"), request).options
    local = model._plan(openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1"),
                        request).options
    assert official["max_completion_tokens"] == 99 and "max_tokens" not in official
    assert local["max_tokens"] == 99 and "max_completion_tokens" not in local
