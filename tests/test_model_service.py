"""The model service: a kernel POSTs our own turn, the server streams it with the key it holds.

A real Jupyter server with the extension, and a fake provider (tests/service_fixtures.py)
that answers in the real OpenAI and Anthropic stream formats and records what reached it:
the server's SDK adapters send the provider's request, with the real key, and the kernel
reads text, tool input and the reply as JSON lines; failures come back as turn errors.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from jupyter_ci.models.broker import ENV_PROVIDERS, ENV_SOCKET, ENV_TOKEN, ENV_URL, INFO_PATH
from jupyter_ci.models.turn_wire import TURN_PATH
from jupyter_ci.wire.names import BOXED_VARIABLE
from tests.fakellm_wire import Turn
from tests.service_fixtures import (
    ANTHROPIC_KEY,
    KERNEL,
    OPENAI_KEY,
    SECRETS,
    Upstream,
    bearer,
    broker_of,
    capture,
    ci_config,
    hang_up_after_first_event,
    jp_server_config,
    kernel_output,
    live_server,
    refusal,
    server_env,
    service_fetch,
    token,
    turn_body,
    turn_fetch,
    upstream,
)

__all__ = ["capture", "ci_config", "jp_server_config", "live_server", "server_env", "token",
           "upstream"]

CODE = 'print("héllo", 6 * 7)\n'
MODELS = {"openai": "openai:gpt-test", "anthropic": "anthropic:claude-test"}
KEYS = {"openai": OPENAI_KEY, "anthropic": ANTHROPIC_KEY}
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


def sent_key(headers: dict[str, str]) -> str:
    """Return the credential a provider request carried (bearer, or Anthropic's x-api-key)."""
    return (headers.get("Authorization", "").removeprefix("Bearer ")
            or headers.get("X-Api-Key", ""))


def fold(lines: list[dict[str, Any]]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """Return the text, each tool's arguments as streamed, and the reply of a turn's lines."""
    text, arguments, reply = "", dict[str, str](), dict[str, Any]()
    for line in lines:
        if "text" in line:
            text += line["text"]
        elif "tool_input" in line:
            tool = line["tool_input"]
            arguments[tool["name"]] = arguments.get(tool["name"], "")[:tool["at"]] + tool["text"]
        else:
            reply = line["reply"]
    return text, arguments, reply


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_turn_streams_text_and_a_tool_call_live_with_the_real_key(
    live_server: Any, upstream: Upstream, token: str, provider: str, capture: Any
) -> None:
    upstream.turns = [Turn("Let me run it.", tool_calls=[("run_python", {"code": CODE})])]
    upstream.gate = asyncio.Event()  # the provider holds its stream until the kernel has text
    chunks: list[bytes] = []

    def on_chunk(chunk: bytes) -> None:
        chunks.append(chunk)
        upstream.gate.set()  # type: ignore[union-attr]

    status, _ = await turn_fetch(turn_body(MODELS[provider]), token,
                                 streaming_callback=on_chunk)
    assert status == 200 and not upstream.gate_timed_out, "the first line came before the end"
    lines = [json.loads(line) for line in b"".join(chunks).splitlines()]
    text, arguments, reply = fold(lines)
    assert text == reply["text"] == "Let me run it."
    assert len([line for line in lines if "tool_input" in line]) > 3
    assert json.loads(arguments["run_python"]) == {"code": CODE}
    [call] = reply["tool_calls"]
    assert call["name"] == "run_python" and json.loads(call["arguments"]) == {"code": CODE}
    assert (reply["input_tokens"], reply["output_tokens"]) == (11, 7)
    assert "reply" in lines[-1]
    # The provider got its own API's request, from the server's SDK, with the real key.
    [sent] = upstream.requests
    assert sent["path"] == PATHS[provider]
    assert sent_key(sent["headers"]) == KEYS[provider]
    assert token not in json.dumps(sent["headers"]) + sent["body"].decode()
    body = json.loads(sent["body"])
    assert body["model"] == MODELS[provider].split(":")[1] and body["stream"] is True


async def test_a_jupyter_token_beside_the_credential_goes_nowhere(
    jp_fetch: Any, jp_auth_header: dict[str, str], upstream: Upstream, token: str, capture: Any
) -> None:
    # jp_fetch adds Jupyter's own token (Authorization: token …); the credential rides in
    # x-api-key. Neither may reach the provider.
    response = await jp_fetch("jupyter-ci", "broker", TURN_PATH, method="POST",
                              body=json.dumps(turn_body(MODELS["anthropic"])),
                              headers={"x-api-key": token, "Cookie": "_xsrf=abc"})
    assert fold([json.loads(line) for line in response.body.splitlines()])[0] == "Hello"
    sent = json.dumps(upstream.requests[-1]["headers"])
    assert ANTHROPIC_KEY in sent and token not in sent and "_xsrf" not in sent
    assert jp_auth_header["Authorization"].split()[-1] not in sent


KERNEL_CODE = """
import json, os
from jupyter_ci.agent.types import Message, ModelRequest
from jupyter_ci.models.resolve import ModelSettings, resolve_model
model = resolve_model("openai:gpt-test", ModelSettings(retries=0), os.environ)
reply = model.complete(ModelRequest("", (Message("user", "hi"),), ()), lambda _: None)
names = [k for k in os.environ if "API_KEY" in k or k.startswith("JUPYTER_CI_")]
print(json.dumps({"names": sorted(names), "text": reply.text, "model": type(model).__name__,
                  "leak": any(s in repr(dict(os.environ)) for s in %r)}))
"""


async def test_a_real_kernel_gets_the_service_not_keys(
    live_server: Any, upstream: Upstream, capture: Any
) -> None:
    km = live_server.kernel_manager
    kernel_id = await km.start_kernel()
    try:
        out = await kernel_output(km, kernel_id, KERNEL_CODE % (SECRETS,))
    finally:
        await km.shutdown_kernel(kernel_id, now=True)
    seen = json.loads(out)
    # A notebook's kernel is boxed by default: it reaches the service through its socket.
    assert seen == {"names": [BOXED_VARIABLE, ENV_PROVIDERS, ENV_SOCKET, ENV_TOKEN, ENV_URL],
                    "text": "Hello",
                    "model": "ServiceModel", "leak": False}
    assert upstream.requests[-1]["headers"]["Authorization"] == f"Bearer {OPENAI_KEY}"


async def test_info_answers_only_a_kernel_credential(live_server: Any, token: str) -> None:
    ok = await service_fetch(INFO_PATH, bearer(token), method="GET")
    assert ok.code == 200
    info = json.loads(ok.body)
    assert info == {ENV_PROVIDERS: "openai,anthropic"}
    for presented in ("not-a-token", ""):
        refused = await service_fetch(INFO_PATH, bearer(presented), method="GET")
        assert refused.code == 403 and ENV_PROVIDERS not in refused.body.decode()


# --------------------------------------------------------------- failures, as turn errors


@pytest.mark.parametrize("server_env", [{"ANTHROPIC_API_KEY": ANTHROPIC_KEY,
                                         "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}],
                         indirect=True)
@pytest.mark.parametrize("ci_config", [{"retries": 0}])
async def test_an_unreachable_provider_is_a_502_saying_where(
    live_server: Any, token: str, capture: Any
) -> None:
    status, lines = await turn_fetch(turn_body(MODELS["anthropic"]), token)
    kind, message = refusal(lines)
    assert (status, kind) == (502, "ModelUnavailable")
    assert message.startswith("Could not connect to Anthropic at http://127.0.0.1:9 ")
    assert "Traceback" not in message


@pytest.mark.parametrize("server_env", [{"ANTHROPIC_BASE_URL": ""}], indirect=True)
async def test_a_missing_key_is_a_config_error_naming_the_variable(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    status, lines = await turn_fetch(turn_body(MODELS["anthropic"]), token)
    kind, message = refusal(lines)
    assert (status, kind) == (400, "ModelConfigError") and "ANTHROPIC_API_KEY" in message
    assert "panel" in lines[0]["error"]["hint"]
    assert upstream.requests == []
    # A keyless OpenAI-compatible server (Ollama) is sent a placeholder, never a key.
    status, lines = await turn_fetch(turn_body(), token)
    assert status == 200 and "reply" in lines[-1]
    assert upstream.requests[-1]["headers"]["Authorization"] == "Bearer not-needed"


@pytest.mark.parametrize("ci_config", [{"request_timeout": 0.5, "retries": 0}])
async def test_a_silent_provider_is_a_502_naming_the_timeout(
    live_server: Any, upstream: Upstream, ci_config: Any, token: str
) -> None:
    upstream.mode = "slow"
    status, lines = await turn_fetch(turn_body(), token)
    kind, message = refusal(lines)
    assert (status, kind) == (502, "ModelUnavailable")
    assert "did not answer within 0.5 s" in message
    assert "request_timeout" in lines[0]["error"]["hint"]


@pytest.mark.parametrize("ci_config", [{"retries": 0}])
async def test_a_provider_refusal_is_told_and_its_headers_stay_behind(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    upstream.mode = "limited"
    response = await service_fetch(TURN_PATH, bearer(token), json.dumps(turn_body()).encode())
    kind, message = refusal([json.loads(response.body)])
    assert (response.code, kind) == (502, "ModelUnavailable")
    assert "rate-limited the request (HTTP 429" in message and "slow down" in message
    assert "Set-Cookie" not in response.headers and "Retry-After" not in response.headers


@pytest.mark.parametrize(("provider", "reported"), [("openai", 0), ("anthropic", 11 + 1)])
async def test_a_provider_dying_mid_stream_ends_the_turn_with_an_error(
    live_server: Any, upstream: Upstream, token: str, provider: str, reported: int,
    capture: Any,
) -> None:
    upstream.mode = "broken"  # the provider closes the connection after its first event
    status, lines = await turn_fetch(turn_body(MODELS[provider]), token)
    # A cut stream, never a reply the kernel would take as a complete answer.
    assert not any("reply" in line for line in lines), lines
    # A reply broken off mid-stream is not the provider's wire format: said, never retried.
    assert lines[-1]["error"]["type"] == "BadModelReply"
    assert "broke off its reply" in lines[-1]["error"]["message"]
    budget = broker_of(live_server).budget.tokens
    assert budget.server_reserved == 0 and not budget.kernel_reserved
    problems = []
    if status not in (200, 502):  # a provider's failure, told as one
        problems.append(f"HTTP {status}: {lines[-1]['error']['message']}")
    if "Uncaught exception" in capture.text:
        problems.append("an uncaught exception was logged")
    if budget.kernel_used[KERNEL] != reported:  # what message_start reported is charged
        problems.append(f"charged {budget.kernel_used[KERNEL]}, reported {reported}")
    assert not problems


async def test_a_kernel_hanging_up_stops_the_provider_stream(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    upstream.gate = asyncio.Event()  # never set: the provider holds the stream open
    await hang_up_after_first_event(turn_body(content="x" * 40), token)
    for _ in range(100):
        if upstream.cut:
            break
        await asyncio.sleep(0.02)
    assert upstream.cut and not upstream.gate_timed_out, "the provider's stream was closed"
    assert "hung up on its 'openai:gpt-test' turn" in capture.text

