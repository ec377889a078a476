"""Finding 2: a token budget per kernel and per server, from the usage providers report.

Model-written code holding a broker token can call the model in a loop; with
`c.JupyterCI.max_tokens_per_kernel` or `max_tokens_per_server` set, the broker counts the
tokens each relayed reply reports and refuses further calls with a 429 naming the setting.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from jupyter_ci.models.broker import ENV_URL
from jupyter_ci.server.usage import UsageMeter, ask_for_usage
from tests.test_server import ANTHROPIC_SSE, CHAT, OPENAI_SSE, Upstream, bearer, broker_fetch

SSE = {"Content-Type": "text/event-stream"}
OPENAI_USAGE = (b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"fake",'
                b'"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":9,'
                b'"total_tokens":21}}\n\n')


def openai_stream_with_usage() -> tuple[int, dict[str, str], list[bytes]]:
    """A Chat Completions stream whose last chunk reports 21 tokens."""
    return 200, SSE, [*OPENAI_SSE[:-1], OPENAI_USAGE, OPENAI_SSE[-1]]


@pytest.mark.parametrize("ci_config", [{"max_tokens_per_kernel": 20}])
async def test_kernel_over_its_budget_gets_a_429_naming_the_setting(
    live_server: Any, upstream: Upstream, token: str, ci_config: Any, capture: Any
) -> None:
    upstream.replies = [openai_stream_with_usage()]
    first = await broker_fetch("openai/chat/completions", bearer(token), CHAT)
    assert first.code == 200 and OPENAI_USAGE in first.body
    # Usage is opt-in in Chat Completions streams: the broker asks for it.
    assert json.loads(upstream.requests[0]["body"])["stream_options"] == {"include_usage": True}
    second = await broker_fetch("openai/chat/completions", bearer(token), CHAT)
    assert second.code == 429 and second.headers["x-should-retry"] == "false"
    error = json.loads(second.body)["error"]
    assert error["type"] == "rate_limit_error"
    assert "used 21 model tokens" in error["message"]
    assert "c.JupyterCI.max_tokens_per_kernel = 20" in error["message"]
    assert len(upstream.requests) == 1
    # Another kernel has a budget of its own.
    other = live_server.web_app.settings["jupyter_ci_broker"].issue("another-kernel")
    assert (await broker_fetch("openai/chat/completions", bearer(other), CHAT)).code == 200


@pytest.mark.parametrize("ci_config", [{"max_tokens_per_server": 5}])
async def test_server_budget_counts_every_kernel_in_the_anthropic_format(
    live_server: Any, upstream: Upstream, token: str, ci_config: Any, capture: Any
) -> None:
    broker = live_server.web_app.settings["jupyter_ci_broker"]
    tokens = [token, broker.issue("second-kernel"), broker.issue("third-kernel")]
    codes = []
    for presented in tokens:  # 1 input + 2 output tokens a reply (message_start, _delta)
        response = await broker_fetch("anthropic/v1/messages", {"x-api-key": presented}, CHAT)
        codes.append(response.code)
    assert codes == [200, 200, 429]
    error = json.loads(response.body)
    assert error["type"] == "error" and error["error"]["type"] == "rate_limit_error"
    assert "c.JupyterCI.max_tokens_per_server = 5" in error["error"]["message"]
    assert broker.budget.server_used == 6


@pytest.mark.parametrize("ci_config", [{"max_tokens_per_kernel": 10}])
async def test_non_streamed_usage_counts_and_the_sdk_shows_the_setting(
    live_server: Any, upstream: Upstream, token: str, ci_config: Any, capture: Any
) -> None:
    import openai

    completion = {"id": "c1", "object": "chat.completion", "created": 1, "model": "fake",
                  "choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": "Hello"}}],
                  "usage": {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42}}
    upstream.replies = [(200, {"Content-Type": "application/json"},
                         [json.dumps(completion).encode()])]
    client = openai.AsyncOpenAI(base_url=f"{os.environ[ENV_URL]}/openai", api_key=token,
                                max_retries=2)
    reply = await client.chat.completions.create(model="fake", messages=[])
    assert reply.choices[0].message.content == "Hello"
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="fake", messages=[])
    assert "c.JupyterCI.max_tokens_per_kernel = 10" in caught.value.message
    # x-should-retry: false, so the SDK did not retry a refusal that cannot change.
    assert capture.text.count("max_tokens_per_kernel = 10") == 1


async def test_no_budget_means_no_limit_and_no_rewritten_body(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    for _ in range(3):
        upstream.replies = [openai_stream_with_usage()]
        assert (await broker_fetch("openai/chat/completions", bearer(token), CHAT)).code == 200
    assert [r["body"] for r in upstream.requests] == [CHAT] * 3


def _meter(chunks: list[bytes], content_type: str = "text/event-stream") -> UsageMeter:
    meter = UsageMeter()
    meter.start(200, content_type)
    for chunk in chunks:
        meter.feed(chunk)
    return meter


def test_usage_split_across_chunks_is_read() -> None:
    data = b"".join([*OPENAI_SSE[:-1], OPENAI_USAGE, OPENAI_SSE[-1]])
    for size in (1, 7, 64, len(data)):
        meter = _meter([data[i:i + size] for i in range(0, len(data), size)])
        assert meter.finish() == 21 and (meter.input_tokens, meter.output_tokens) == (12, 9)


def test_anthropic_counts_are_cumulative_and_cache_tokens_count() -> None:
    start = (b'event: message_start\ndata: {"type":"message_start","message":{"usage":'
             b'{"input_tokens":5,"cache_read_input_tokens":100,'
             b'"cache_creation_input_tokens":null,"output_tokens":1}}}\n\n')
    deltas = [b'event: message_delta\ndata: {"type":"message_delta","usage":'
              b'{"output_tokens":%d}}\n\n' % n for n in (10, 30)]
    assert _meter([start, *deltas]).finish() == 135
    assert _meter(ANTHROPIC_SSE).finish() == 3


def test_responses_api_and_json_bodies() -> None:
    done = (b'event: response.completed\ndata: {"type":"response.completed","response":'
            b'{"usage":{"input_tokens":7,"output_tokens":3,"total_tokens":10}}}\n\n')
    assert _meter([done]).finish() == 10
    body = b'{"content":[],"usage":{"input_tokens":4,"output_tokens":6}}'
    assert _meter([body[:10], body[10:]], "application/json").finish() == 10
    # Errors and replies without usage (model lists, count_tokens) cost nothing.
    assert _meter([b'{"input_tokens": 99}'], "application/json").finish() == 0
    meter = UsageMeter()
    meter.start(429, "application/json")
    meter.feed(body)
    assert meter.finish() == 0


def test_a_stream_cut_before_its_usage_still_costs_its_prompt() -> None:
    assert _meter(OPENAI_SSE[:1]).finish(request_bytes=4000) == 1000


def test_ask_for_usage_only_touches_streamed_requests() -> None:
    streamed = json.loads(ask_for_usage(b'{"stream": true, "stream_options": {"x": 1}}'))
    assert streamed["stream_options"] == {"x": 1, "include_usage": True}
    for body in (b'{"stream": false}', b"not json", b"[1]"):
        assert ask_for_usage(body) == body
