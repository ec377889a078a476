"""Cost in the server's model service: cached tokens reach kernels, money budgets hold.

A real Jupyter server with the extension and a fake provider (tests/service_fixtures.py);
kernels' turns are POSTed with a kernel's credential as `turn_fetch` does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from jupyter_ci.agent.types import ModelReply
from tests.fakellm_wire import Turn
from tests.service_fixtures import (
    KERNEL,
    Upstream,
    broker_of,
    capture,
    ci_config,
    jp_server_config,
    live_server,
    refusal,
    server_env,
    token,
    turn_body,
    turn_fetch,
    upstream,
)

__all__ = ["capture", "ci_config", "jp_server_config", "live_server", "server_env", "token",
           "upstream"]

MODELS = {"openai": "openai:gpt-4.1-mini", "anthropic": "anthropic:claude-haiku-4-5"}
CACHED = Turn("Done.", input_tokens=12_345, cached_tokens=2_000, output_tokens=678)
COSTS = {"openai": (10_345 * 0.40 + 2_000 * 0.10 + 678 * 1.60) / 1e6,
         "anthropic": (10_345 * 1.00 + 2_000 * 0.10 + 678 * 5.00) / 1e6}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_kernels_turn_gets_cached_tokens_and_is_charged_their_price(
    live_server: Any, upstream: Upstream, token: str, provider: str, capture: Any
) -> None:
    upstream.turns = [CACHED]
    status, lines = await turn_fetch(turn_body(MODELS[provider]), token)
    assert status == 200
    reply = lines[-1]["reply"]
    assert (reply["input_tokens"], reply["cached_tokens"], reply["output_tokens"]) == (
        12_345, 2_000, 678)
    # The reply carries what it was charged: the kernel sums that, pricing nothing itself.
    assert reply["cost_usd"] == pytest.approx(COSTS[provider])
    money = broker_of(live_server).budget.money
    assert money.kernel_used[KERNEL] == pytest.approx(COSTS[provider])
    assert money.server_used == pytest.approx(COSTS[provider])
    assert money.server_reserved == 0 and not money.kernel_reserved


@pytest.mark.parametrize("ci_config", [{"max_cost_per_kernel": 0.01}])
async def test_a_kernel_past_its_money_budget_gets_a_429_naming_the_setting(
    live_server: Any, upstream: Upstream, token: str, ci_config: Any, capture: Any
) -> None:
    upstream.turns = [CACHED, CACHED, CACHED]
    body = turn_body(MODELS["anthropic"])
    assert (await turn_fetch(body, token))[0] == 200  # $0.0139: past $0.01 once done
    status, lines = await turn_fetch(body, token)
    kind, message = refusal(lines)
    assert (status, kind) == (429, "LimitReached")
    assert "money budget c.JupyterCI.max_cost_per_kernel = 0.01 (USD)" in message
    assert "has spent $0.0139" in message and "raise the setting" in message
    assert len(upstream.requests) == 1
    # Another kernel has a budget of its own.
    other = broker_of(live_server).issue("another-kernel")
    assert (await turn_fetch(body, other))[0] == 200


@pytest.mark.parametrize("ci_config", [{"max_cost_per_server": 0.02}])
async def test_the_server_money_budget_counts_every_kernel_and_refuses_unpriced_models(
    live_server: Any, upstream: Upstream, token: str, ci_config: Any, capture: Any
) -> None:
    broker = broker_of(live_server)
    upstream.turns = [CACHED] * 6
    # An unpriced model could not be counted: refused (tests/security/test_service_prices.py).
    status, lines = await turn_fetch(turn_body("openai:gpt-test"), token)
    assert (status, refusal(lines)[0]) == (400, "ModelConfigError")
    assert "openai:gpt-test has no price" in refusal(lines)[1]
    assert broker.budget.money.server_used == 0 and not upstream.requests
    tokens = [token, broker.issue("second-kernel"), broker.issue("third-kernel")]
    answers = [await turn_fetch(turn_body(MODELS["anthropic"]), t) for t in tokens]
    assert [status for status, _ in answers] == [200, 200, 429]
    kind, message = refusal(answers[-1][1])
    assert kind == "LimitReached"
    assert "money budget c.JupyterCI.max_cost_per_server = 0.02 (USD)" in message
    assert broker.budget.money.server_used == pytest.approx(2 * COSTS["anthropic"])


PRICES = {"openai:house-model": {"input": 3.0, "output": 9.0, "context_window": 64_000}}


@pytest.mark.parametrize("ci_config", [{"prices": PRICES}])
async def test_kernels_the_server_starts_price_asks_with_the_servers_table(
    live_server: Any, ci_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import os

    from jupyter_ci.config import JupyterCI

    told = live_server.web_app.settings["jupyter_ci_told"].kernels
    published = told["JUPYTER_CI_PRICES"]  # what kernels started now are told
    assert "JUPYTER_CI_PRICES" not in os.environ  # not every child of the server
    assert json.loads(published) == PRICES
    monkeypatch.setenv("JUPYTER_CI_PRICES", published)
    assert JupyterCI().prices == PRICES  # a kernel's own default
    monkeypatch.setenv("JUPYTER_CI_PRICES", '{"x": {"input": "free"}}')
    assert JupyterCI().prices == {}  # a bad table is ignored, never an error at load


def test_an_ask_sums_the_cost_the_service_told_and_prices_only_calls_of_its_own() -> None:
    from jupyter_ci.agent.cost import price_table
    from jupyter_ci.models.turn_wire import ReplyReader, line, reply_json

    told = ModelReply("Done.", input_tokens=12_345, output_tokens=678, cached_tokens=2_000,
                      cost_usd=0.5)
    read = ReplyReader(lambda text: None).feed(line({"reply": reply_json(told)}))
    assert read == told
    # The kernel's own table prices this model otherwise (or not at all): the service's wins.
    for meter in (price_table().meter(MODELS["openai"]), price_table().meter("ollama:x")):
        assert meter(told) == 0.5 and meter(told) == 0.5 and meter.usage().cost_usd == 1.0
    # A reply without one (a call made here, an older server): priced here, as before.
    here = price_table().meter(MODELS["openai"])
    assert here(replace(told, cost_usd=None)) == pytest.approx(COSTS["openai"])
    assert price_table().meter("ollama:x")(replace(told, cost_usd=None)) is None
