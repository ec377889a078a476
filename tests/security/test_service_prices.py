"""Budgets cannot be evaded through the model's name (issue 31, point 8).

Model-written code holding a kernel's credential chooses the model of each turn. It sent
`" openai:o1-pro"` (priced $0, billed upstream as o1-pro), models missing from the price
table (counted $0: 5 of 5 calls passed a $0.01 budget), and a new name per turn (a new
adapter with its connection pools each, kept forever: +1.09 GB for 150 names). Now one
normalised id prices, budgets and reaches the model; an unpriced model is refused while a
money budget is set, before anything is sent; adapters are kept per provider.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.agent.cost import DEFAULT_PRICES, PriceTable
from jupyter_ci.agent.types import ModelReply
from tests.fakellm import FakeLLM
from tests.fakellm_wire import Turn
from tests.nbrun import openai_env, run_cells, text_of
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

USAGE = Turn("Done.", input_tokens=1_000, output_tokens=100)
O1_PRO = DEFAULT_PRICES["openai:o1-pro"].cost(ModelReply(input_tokens=1_000,
                                                         output_tokens=100))
#: Ways to write o1-pro that reach o1-pro (a provider that tells case apart refuses the
#: last, and charges nothing: priced as o1-pro, the budget holds either way).
VARIANTS = [" openai:o1-pro", "openai:o1-pro ", "OpenAI:o1-pro", "openai: o1-pro\t",
            "\nopenai :o1-pro", "openai:O1-PRO"]


def sent_models(upstream: Upstream) -> list[str]:
    """Return the model of each model request that reached the provider."""
    return [json.loads(r["body"])["model"] for r in upstream.requests
            if r["path"].endswith(("chat/completions", "v1/messages"))]


@pytest.mark.parametrize("ci_config", [{"max_cost_per_kernel": 100.0}])
async def test_spaces_and_case_are_priced_as_the_model_they_reach(
    live_server: Any, upstream: Upstream, token: str, ci_config: Any, capture: Any
) -> None:
    money = broker_of(live_server).budget.money
    for variant in VARIANTS:
        upstream.turns = [USAGE]
        before = money.kernel_used[KERNEL]
        status, lines = await turn_fetch(turn_body(variant), token)
        assert status == 200, (variant, lines)
        assert money.kernel_used[KERNEL] - before == pytest.approx(O1_PRO), variant
    assert sent_models(upstream) == ["o1-pro"] * 5 + ["O1-PRO"]


@pytest.mark.parametrize("ci_config", [{"max_cost_per_kernel": 0.01},
                                       {"max_cost_per_server": 0.01}])
async def test_an_unpriced_model_is_refused_under_a_money_budget_before_it_is_called(
    live_server: Any, upstream: Upstream, token: str, ci_config: Any, capture: Any
) -> None:
    for model in ["openai:gpt-test", " openai:house-model-1", "anthropic:claude-next"] * 2:
        status, lines = await turn_fetch(turn_body(model), token)
        kind, message = refusal(lines)
        assert (status, kind) == (400, "ModelConfigError"), lines
        name = model.strip().replace(" ", "")
        assert f"{name} has no price" in message, message
        assert f"c.JupyterCI.prices = {{{name!r}: " in lines[0]["error"]["hint"]
    assert upstream.requests == []  # nothing reached the provider
    # A priced model still goes through.
    assert (await turn_fetch(turn_body("openai:gpt-4.1-mini"), token))[0] == 200


def test_a_price_given_in_the_config_takes_case_and_spaces_too() -> None:
    table = PriceTable({"openai:House-Model": DEFAULT_PRICES["openai:o1"]})
    assert table.rates(" OPENAI : house-model-2 ") == DEFAULT_PRICES["openai:o1"]
    assert table.rates("openai:O1-Pro") == DEFAULT_PRICES["openai:o1-pro"]


def test_an_ask_in_a_kernel_without_a_server_prices_the_same_way(
    fake: FakeLLM, tmp_path: Path
) -> None:
    fake.push(Turn("Done.", input_tokens=1_000, output_tokens=100))
    nb = run_cells(["%%ask\nsay done"], openai_env(fake, " OpenAI: O1-Pro "), tmp_path)
    shown = text_of(nb.cells[1])
    assert f"Tokens: 1,000 in · 100 out · ${O1_PRO:.4f}" in shown, shown
    assert fake.requests[0].body["model"] == "O1-Pro"


async def test_many_model_names_keep_one_adapter_per_provider(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    service = live_server.web_app.settings["jupyter_ci_service"]
    names = [f"openai:model-{i}" for i in range(140)] + [
        f"anthropic:model-{i}" for i in range(10)]
    for name in names:
        assert (await turn_fetch(turn_body(name), token))[0] == 200, name
    assert sent_models(upstream) == [name.partition(":")[2] for name in names]
    # One adapter per provider (and key and URL), whatever names were sent...
    assert len(service._adapters) <= 2, len(service._adapters)
    # ...and one set of connection pools each.
    models = [await service.model(name) for name in ("openai:a", "openai:b")]
    assert models[0].id == "openai:a" and models[1].id == "openai:b"
    assert models[0].async_clients() is models[1].async_clients()
