"""Cost of a REST ask: its result's `usage`, its events, and money budgets, real SDKs."""

from __future__ import annotations

from typing import Any

import pytest
from traitlets.config import Config

from tests.fakellm import FakeLLM, Turn
from tests.nbrun import TEST_KEY, session_server_config
from tests.test_session_ask import ANTHROPIC_KEY, ask
from tests.test_sessions import Fetch, new_session

#: Prices set for the fake's usual test model, beside the built-in ones.
PRICES = {"openai:gpt-test": {"input": 3.0, "output": 12.0, "cached_input": 0.75,
                              "context_window": 64_000}}


@pytest.fixture
def ci_extra() -> dict[str, Any]:
    """More of the c.JupyterCI section (a test parametrizes it)."""
    return {}


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM,
                     ci_extra: dict[str, Any]) -> Config:
    """Enable the extension with both providers pointing at the fake model server."""
    config = session_server_config(monkeypatch, {
        "OPENAI_API_KEY": TEST_KEY, "OPENAI_BASE_URL": fake.openai_base_url,
        "ANTHROPIC_API_KEY": ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": fake.anthropic_base_url})
    config.JupyterCI.prices = PRICES
    for name, value in ci_extra.items():
        setattr(config.JupyterCI, name, value)
    return config


def step(src: str, **usage: int) -> Turn:
    return Turn(tool_calls=[("run_python", {"code": src})], **usage)


@pytest.mark.parametrize(("model", "rates"), [
    ("openai:gpt-4.1-mini", (0.40, 0.10, 1.60)),
    ("anthropic:claude-haiku-4-5", (1.00, 0.10, 5.00)),
    ("openai:gpt-test", (3.0, 0.75, 12.0)),  # c.JupyterCI.prices
])
async def test_the_result_says_the_tokens_the_fake_reported_and_their_price(
    jp_fetch: Fetch, fake: FakeLLM, model: str, rates: tuple[float, float, float]
) -> None:
    fake.push(step("x = 1", input_tokens=5_000, output_tokens=120),
              Turn("x is 1.", input_tokens=5_300, cached_tokens=4_000, output_tokens=30))
    sid = (await new_session(jp_fetch))["id"]
    events = await ask(jp_fetch, sid, prompt="make x", model=model)
    full, cached, out = rates
    costs = [(5_000 * full + 120 * out) / 1e6, (1_300 * full + 4_000 * cached + 30 * out) / 1e6]
    usages = [data for kind, data in events if kind == "usage"]
    assert [u["cost_usd"] for u in usages] == [pytest.approx(c) for c in costs]
    assert [u["cached_tokens"] for u in usages] == [0, 4_000]
    assert usages[-1]["ask_cost_usd"] == pytest.approx(sum(costs))
    end = next(data for kind, data in events if kind == "ask_end")
    result = events[-1][1]
    expected = {"input_tokens": 10_300, "output_tokens": 150, "cached_tokens": 4_000,
                "cost_usd": pytest.approx(sum(costs))}
    # A REST ask's ask_end is its result; `result` repeats it under its old name.
    assert end["usage"] == result["usage"] == {"tokens": 10_450, **expected}


async def test_an_unpriced_model_reports_tokens_and_no_cost(
    jp_fetch: Fetch, fake: FakeLLM
) -> None:
    fake.push(Turn("Hi.", input_tokens=700, output_tokens=9))
    sid = (await new_session(jp_fetch))["id"]
    events = await ask(jp_fetch, sid, prompt="hi", model="openai:llama3.2")
    usage = next(data for kind, data in events if kind == "usage")
    assert (usage["cost_usd"], usage["ask_cost_usd"], usage["context_window"]) == (
        None, None, None)
    assert events[-1][1]["usage"] == {"tokens": 709, "input_tokens": 700, "output_tokens": 9,
                                      "cached_tokens": 0, "cost_usd": None}


@pytest.mark.parametrize(("ci_extra", "setting"), [
    ({"max_cost_per_kernel": 0.01}, "max_cost_per_kernel = 0.01"),
    ({"max_cost_per_server": 0.01}, "max_cost_per_server = 0.01"),
])
async def test_an_ask_past_the_money_budget_ends_with_limit_reached(
    jp_fetch: Fetch, fake: FakeLLM, ci_extra: dict[str, Any], setting: str
) -> None:
    # $0.015 + $0.0006 (gpt-test's prices above): past $0.01 after the first turn.
    fake.push(step("y = 2", input_tokens=5_000, output_tokens=50), Turn("never sent"))
    sid = (await new_session(jp_fetch))["id"]
    events = await ask(jp_fetch, sid, prompt="make y")
    result = events[-1][1]
    assert result["status"] == "failed" and result["error"]["type"] == "LimitReached"
    message = result["error"]["message"]
    assert f"money budget c.JupyterCI.{setting} (USD)" in message
    assert "has spent $0.0156" in message and "(0 = unlimited)" in message
    assert result["usage"]["cost_usd"] == pytest.approx(0.0156)
    assert fake.calls() == 1 and fake.remaining == 1
