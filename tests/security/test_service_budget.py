"""Finding 2: a token budget per kernel and per server, charged on what providers report.

Model-written code holding a kernel's credential can ask for turns in a loop, many at
once, or hang up mid-stream hoping to be charged nothing. With
`c.JupyterCI.max_tokens_per_kernel` or `max_tokens_per_server` set, each turn reserves what
it may cost before it is sent (`reserve_for`: request chars / 4 + max_tokens), so turns
running at once see each other and pass a limit by one reservation at most; a refusal is a
429 LimitReached naming the setting. A turn the kernel hangs up on is charged what the
provider reported, or its whole reservation when the provider reported nothing yet.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from jupyter_ci.models.broker import ENV_URL
from jupyter_ci.models.turn_wire import TURN_PATH, read_turn
from jupyter_ci.server.broker.model_service import TOOLS, reserve_for
from tests.fakellm_wire import Turn
from tests.service_fixtures import (
    KERNEL,
    Upstream,
    bearer,
    broker_of,
    hang_up_after_first_event,
    refusal,
    told,
    turn_body,
    turn_fetch,
)

#: What the fake provider reports for each turn unless told otherwise (tests/fakellm_wire.py).
USED = 11 + 7


def reservation(body: dict[str, Any], max_reply_tokens: int = 4096) -> int:
    """Return what the service reserves for `body`, as it decodes it."""
    return reserve_for(read_turn(body, TOOLS, max_reply_tokens).request)


@pytest.mark.parametrize("ci_config", [{"max_tokens_per_kernel": 10}])
async def test_a_kernel_over_its_budget_gets_a_429_naming_the_setting(
    live_server: Any, upstream: Upstream, token: str, ci_config: Any, capture: Any
) -> None:
    assert (await turn_fetch(turn_body(), token))[0] == 200
    status, lines = await turn_fetch(turn_body(), token)
    kind, message = refusal(lines)
    assert (status, kind) == (429, "LimitReached")
    assert f"has used {USED} model tokens" in message
    assert "c.JupyterCI.max_tokens_per_kernel = 10" in message
    assert len(upstream.requests) == 1
    # Another kernel has a budget of its own.
    other = broker_of(live_server).issue("another-kernel")
    assert (await turn_fetch(turn_body(), other))[0] == 200


@pytest.mark.parametrize("ci_config", [{"max_tokens_per_server": 30}])
async def test_the_server_budget_counts_every_kernel(
    live_server: Any, upstream: Upstream, token: str, ci_config: Any, capture: Any
) -> None:
    broker = broker_of(live_server)
    tokens = [token, broker.issue("second-kernel"), broker.issue("third-kernel")]
    answers = [await turn_fetch(turn_body("anthropic:claude-test"), t) for t in tokens]
    assert [status for status, _ in answers] == [200, 200, 429]
    kind, message = refusal(answers[-1][1])
    assert kind == "LimitReached" and "c.JupyterCI.max_tokens_per_server = 30" in message
    assert broker.budget.tokens.server_used == 2 * USED


LIMIT = 200


async def at_once(upstream: Upstream, token: str, body: dict[str, Any], count: int = 20
                  ) -> list[tuple[int, bytes]]:
    """POST `count` turns at once; the provider streams until each is refused or reached it."""
    upstream.gate = asyncio.Event()  # every admitted turn streams until all are in
    client = AsyncHTTPClient(force_instance=True, max_clients=count + 8)
    url = f"{told().kernels[ENV_URL]}/{TURN_PATH}"

    async def one() -> tuple[int, bytes]:
        try:
            response = await client.fetch(url, method="POST", headers=bearer(token),
                                          body=json.dumps(body), request_timeout=30)
        except HTTPClientError as err:
            assert err.response is not None
            response = err.response
        return response.code, response.body

    try:
        turns = [asyncio.ensure_future(one()) for _ in range(count)]
        for _ in range(500):
            if len(upstream.requests) + sum(t.done() for t in turns) >= count:
                break
            await asyncio.sleep(0.01)
        upstream.gate.set()
        return await asyncio.gather(*turns)
    finally:
        client.close()


def used_by(server: Any, setting: str) -> int:
    """Return what the budget that `setting` limits has counted."""
    budget = broker_of(server).budget.tokens
    return budget.kernel_used[KERNEL] if setting == "max_tokens_per_kernel" else (
        budget.server_used)


@pytest.mark.parametrize("ci_config", [{"max_tokens_per_kernel": LIMIT},
                                       {"max_tokens_per_server": LIMIT}],
                         ids=["per_kernel", "per_server"])
async def test_twenty_turns_at_once_pass_the_limit_by_one_reservation_at_most(
    live_server: Any, upstream: Upstream, token: str, ci_config: dict[str, int], capture: Any
) -> None:
    body = turn_body(max_tokens=50)
    reserved = reservation(body)
    # The provider reports what a full reply of that length costs: a few turns fit.
    upstream.turns = [Turn("Hello", input_tokens=reserved - 50, output_tokens=50)] * 20
    answers = await at_once(upstream, token, body)
    admitted = [b for status, b in answers if status == 200]
    refused = [json.loads(b)["error"] for status, b in answers if status == 429]
    assert len(admitted) + len(refused) == 20 and admitted and refused
    assert len(upstream.requests) == len(admitted)
    setting, = ci_config
    assert all(e["type"] == "LimitReached" and f"c.JupyterCI.{setting} = {LIMIT}" in e["message"]
               for e in refused)
    used = used_by(live_server, setting)
    assert used == len(admitted) * reserved
    assert used - LIMIT <= reserved
    budget = broker_of(live_server).budget.tokens
    assert budget.server_reserved == 0 and not budget.kernel_reserved


#: Text a provider bills at a token or more per character (emoji, CJK): chars / 4 is no bound.
DENSE = "\U0001f984\u6f22\U0001f9ea\u5b57" * 500


@pytest.mark.parametrize("ci_config", [{"max_tokens_per_kernel": 3000}])
async def test_text_dense_in_tokens_passes_the_limit_by_one_reservation_at_most(
    live_server: Any, upstream: Upstream, token: str, ci_config: dict[str, int], capture: Any
) -> None:
    body = turn_body(content=DENSE, max_tokens=50)
    reserved = reservation(body)
    # What the provider bills: the system prompt at four characters a token, the message
    # at one token a character (real tokenizers take two or three for an emoji), the reply.
    billed = len(body["system"]) // 4 + len(DENSE) + 50
    upstream.turns = [Turn("Hello", input_tokens=billed - 50, output_tokens=50)] * 20
    answers = await at_once(upstream, token, body)
    assert {status for status, _ in answers} == {200, 429}
    used = used_by(live_server, "max_tokens_per_kernel")
    assert used - 3000 <= reserved, (
        f"{sum(s == 200 for s, _ in answers)} turns admitted, each reserving {reserved} "
        f"tokens and billed {billed}: {used} used of 3000")


@pytest.mark.parametrize(("model", "charged"), [
    # Chat Completions reports usage only at the end: the hang-up costs the reservation.
    ("openai:gpt-test", None),
    # Messages reports the input (and a first output token) in message_start.
    ("anthropic:claude-test", 11 + 1),
])
async def test_a_hang_up_mid_stream_is_charged(
    live_server: Any, upstream: Upstream, token: str, model: str, charged: int | None,
    capture: Any,
) -> None:
    body = turn_body(model, content="x" * 400)
    upstream.gate = asyncio.Event()  # never set: the provider streams only its first text
    await hang_up_after_first_event(body, token)
    for _ in range(200):
        if upstream.cut and not broker_of(live_server).budget.tokens.server_reserved:
            break
        await asyncio.sleep(0.02)
    assert upstream.cut, "the provider saw its stream cut"
    budget = broker_of(live_server).budget.tokens
    expected = reservation(body) if charged is None else charged
    assert budget.kernel_used[KERNEL] == budget.server_used == expected > 0
    assert budget.server_reserved == 0 and not budget.kernel_reserved


async def test_a_provider_that_reports_no_usage_is_charged_by_length(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    body = turn_body(content="y" * 400)
    upstream.turns = [Turn("z" * 80, usage=False)]
    assert (await turn_fetch(body, token))[0] == 200
    # A guess from length: about 4 bytes a token, each way (the system prompt counts too).
    sent = len(body.get("system", "")) + 400
    used = broker_of(live_server).budget.tokens.kernel_used[KERNEL]
    assert used == (sent + 80) // 4 > 0


async def test_no_budget_means_no_limit(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    for _ in range(3):
        assert (await turn_fetch(turn_body(), token))[0] == 200
    assert broker_of(live_server).budget.tokens.kernel_used[KERNEL] == 3 * USED
