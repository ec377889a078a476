"""Cost: the price table, cached tokens read from both real SDKs, the usage events and the
cell's cost line in a real kernel (the server's side: tests/test_cost_server.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from traitlets import TraitError
from traitlets.config import Config

from jupyter_ci import providers
from jupyter_ci.agent.cost import DEFAULT_PRICES, AskUsage, Meter, Rates, price_table
from jupyter_ci.agent.drive import drive
from jupyter_ci.agent.events import AskEnded, Event, Outcome, Usage, event_json
from jupyter_ci.agent.loop import AskLoop
from jupyter_ci.agent.types import CodeResult, ModelReply, ModelRequest, OnText, ToolCall
from jupyter_ci.config import JupyterCI
from jupyter_ci.models.anthropic import AnthropicChatModel
from jupyter_ci.models.base import Endpoint
from jupyter_ci.models.base import Usage as Reported
from jupyter_ci.models.openai import OpenAIChatModel
from jupyter_ci.models.recording import Recording, read, write
from jupyter_ci.models.turn_wire import ReplyReader, line, reply_json
from jupyter_ci.wire.codec import encode
from tests.fakellm import ANTHROPIC_PATH, OPENAI_PATH, FakeLLM, Turn
from tests.kernelrun import Kernel
from tests.nbrun import anthropic_env, openai_env, run_cells, text_of
from tests.test_models import KEY, ask

#: A turn that read a fifth of its prompt from the provider's cache.
CACHED = Turn("Done.", input_tokens=12_345, cached_tokens=2_000, output_tokens=678)
#: Their models in the tables: gpt-4.1-mini (0.40 / 0.10 / 1.60 USD per million tokens)
#: and claude-haiku-4-5 (1.00 / 0.10 / 5.00).
MODELS = {"openai": "gpt-4.1-mini", "anthropic": "claude-haiku-4-5"}
COSTS = {"openai": (10_345 * 0.40 + 2_000 * 0.10 + 678 * 1.60) / 1e6,
         "anthropic": (10_345 * 1.00 + 2_000 * 0.10 + 678 * 5.00) / 1e6}
FRONTEND = {"jupyter_ci_frontend": {"protocol": 2, "generated": []}, "cellId": "ask-cell-1"}


def model_of(provider: str, fake: FakeLLM) -> OpenAIChatModel | AnthropicChatModel:
    """Return the real adapter of `provider`'s priced model, pointed at the fake."""
    if provider == "openai":
        return OpenAIChatModel(providers.PROVIDERS["openai"], MODELS[provider],
                               Endpoint(KEY, fake.openai_base_url, 5.0, 0))
    return AnthropicChatModel(providers.PROVIDERS["anthropic"], MODELS[provider],
                              Endpoint(KEY, fake.anthropic_base_url, 5.0, 0))


# --- the table ---------------------------------------------------------------------------

def test_the_longest_prefix_prices_a_model_and_local_models_have_no_price() -> None:
    table = price_table()
    assert table.rates("openai:gpt-4.1-mini-2025-04-14") == DEFAULT_PRICES["openai:gpt-4.1-mini"]
    assert table.rates("openai:gpt-4.1") == Rates(2.0, 8.0, 0.5, 1_047_576)
    assert table.rates("openai:gpt-5.2-pro") == DEFAULT_PRICES["openai:gpt-5.2-pro"]
    assert table.rates("openai:o4-mini") == DEFAULT_PRICES["openai:o4-mini"]
    opus = table.rates("anthropic:claude-opus-4-1-20250805")
    assert opus is not None and (opus.input, opus.output) == (15.0, 75.0)
    newer = table.rates("anthropic:claude-opus-4-5-20251101")
    assert newer is not None and (newer.input, newer.output) == (5.0, 25.0)
    sonnet = table.rates("anthropic:claude-sonnet-4-5")
    assert sonnet is not None and sonnet.context_window == 200_000
    # Ollama or vLLM behind OPENAI_BASE_URL, replays and the scripted double cost nothing known.
    for model_id in ("openai:llama3.2", "openai:qwen2.5-coder:7b", "replay:recordings",
                     "scripted:demo", "anthropic:claude-test", "openai:gpt-test"):
        assert table.rates(model_id) is None, model_id
        assert table.meter(model_id)(ModelReply(input_tokens=10)) is None


def test_a_turn_costs_its_uncached_input_cached_input_and_output() -> None:
    rates = Rates(input=2.0, output=8.0, cached_input=0.5)
    reply = ModelReply(input_tokens=1_000_000, output_tokens=500_000, cached_tokens=400_000)
    assert rates.cost(reply) == pytest.approx(600_000 * 2e-6 + 400_000 * 0.5e-6 + 4.0)
    # No cached price: a cache read costs what any input token does.
    assert Rates(2.0, 8.0).cost(reply) == pytest.approx(2.0 + 4.0)


def test_prices_set_by_the_user_come_first_with_or_without_a_provider() -> None:
    ci = JupyterCI(config=Config({"JupyterCI": {"prices": {
        "gpt-4.1-mini": {"input": 1, "output": 2},
        "openai:llama": {"input": 0, "output": 0, "context_window": 8192},
        "anthropic:claude-test": {"input": 3, "output": 15, "cached_input": 0.3}}}}))
    table = price_table(ci.prices)
    assert table.rates("openai:gpt-4.1-mini") == Rates(1.0, 2.0, None, None)
    assert table.rates("someproxy:gpt-4.1-mini-2025") == Rates(1.0, 2.0, None, None)
    assert table.rates("openai:gpt-4.1") == DEFAULT_PRICES["openai:gpt-4.1"]  # untouched
    local = table.meter("openai:llama3.2")
    assert local(ModelReply(input_tokens=5000, output_tokens=50)) == 0.0
    assert local.context_window == 8192
    meter = table.meter("anthropic:claude-test")
    assert meter(ModelReply(input_tokens=1_000_000, cached_tokens=1_000_000)) == 0.3


@pytest.mark.parametrize(("entry", "words"), [
    ("cheap", "must be a dict"),
    ({"input": 1}, "needs 'output'"),
    ({"input": "1", "output": 2}, "['input'] must be a number of USD per million tokens"),
    ({"input": -1, "output": 2}, "0 or more"),
    ({"input": 1, "output": 2, "cached_input": True}, "['cached_input'] must be a number"),
    ({"input": 1, "output": 2, "context_window": 0}, "whole number of tokens above 0"),
    ({"input": 1, "output": 2, "context": 9}, "unknown field(s) context"),
])
def test_a_bad_price_entry_is_refused_naming_it(entry: Any, words: str) -> None:
    with pytest.raises(TraitError) as refused:
        JupyterCI(config=Config({"JupyterCI": {"prices": {"openai:gpt-x": entry}}}))
    said = str(refused.value)
    assert "c.JupyterCI.prices['openai:gpt-x']" in said and words in said
    ci = JupyterCI()
    with pytest.raises(TraitError, match="prices"):  # %config goes the same way
        ci.prices = {"openai:gpt-x": entry}
    assert ci.prices == {}


# --- events ------------------------------------------------------------------------------

def test_usage_and_outcome_carry_tokens_and_cost_in_their_json() -> None:
    usage = Usage(12_345, 678, 13_023, cached_tokens=2_000, cost_usd=0.0054228,
                  ask_cost_usd=0.0108456, context_window=1_047_576)
    assert event_json(usage) == {
        "type": "usage", "input_tokens": 12_345, "output_tokens": 678, "ask_tokens": 13_023,
        "cached_tokens": 2_000, "cost_usd": 0.0054228, "ask_cost_usd": 0.0108456,
        "context_window": 1_047_576}
    unpriced = event_json(Usage(10, 2, 12))
    assert (unpriced["cached_tokens"], unpriced["cost_usd"], unpriced["ask_cost_usd"],
            unpriced["context_window"]) == (0, None, None, None)
    outcome = Outcome("done", "42", steps=1, tokens=13_023,
                      usage=AskUsage(12_345, 678, 2_000, 0.1 + 0.2))
    assert encode(outcome.to_wire())["usage"] == {"input_tokens": 12_345, "output_tokens": 678,
                                          "cached_tokens": 2_000, "cost_usd": 0.3}
    assert event_json(AskEnded(outcome))["usage"]["cost_usd"] == 0.3
    assert encode(Outcome("failed").to_wire())["usage"] == {
        "input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "cost_usd": None}


def test_the_cost_line_says_tokens_cached_and_dollars_when_priced() -> None:
    assert AskUsage(12_345, 678, 2_000, 0.0123).line() == (
        "Tokens: 12,345 in (2,000 cached) · 678 out · $0.0123")
    assert AskUsage(1_500_000, 20_000, 0, 3.456).line() == (
        "Tokens: 1,500,000 in · 20,000 out · $3.46")
    assert AskUsage(300, 20).line() == "Tokens: 300 in · 20 out"  # unpriced: no $
    assert AskUsage().line() == ""  # nothing spent (a replay): no line


class Script:
    """A model answering from a list, with the usage each reply reports."""

    def __init__(self, *replies: ModelReply) -> None:
        self.replies = list(replies)
        self.id = "openai:gpt-4.1-mini"

    def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        return self.replies.pop(0)


class Ok:
    def run(self, code: str, timeout: float) -> CodeResult:
        return CodeResult("ok")


def test_the_driver_prices_each_turn_and_the_meter_sums_the_ask() -> None:
    step = ModelReply(tool_calls=(ToolCall("c1", "run_python", '{"code": "x = 1"}'),),
                      input_tokens=1000, output_tokens=100, cached_tokens=0)
    end = ModelReply("Done.", input_tokens=2000, output_tokens=50, cached_tokens=1000)
    events: list[Event] = []
    meter = price_table().meter("openai:gpt-4.1-mini")
    outcome = drive(AskLoop("go"), Script(step, end), Ok(), events.append, price=meter)
    assert outcome.answer == "Done."
    usages = [event_json(e) for e in events if isinstance(e, Usage)]
    first = (1000 * 0.40 + 100 * 1.60) / 1e6
    second = (1000 * 0.40 + 1000 * 0.10 + 50 * 1.60) / 1e6
    assert [u["cost_usd"] for u in usages] == [pytest.approx(first), pytest.approx(second)]
    assert usages[-1]["ask_cost_usd"] == pytest.approx(first + second)
    assert [u["cached_tokens"] for u in usages] == [0, 1000]
    assert {u["context_window"] for u in usages} == {1_047_576}
    assert usages[-1]["ask_tokens"] == 3150
    assert meter.usage() == AskUsage(3000, 150, 1000, pytest.approx(first + second))
    assert outcome.usage == meter.usage()  # the driver's own sums, in its outcome
    # Without a price, the same events say None and the tokens still add up.
    events.clear()
    drive(AskLoop("go"), Script(step, end), Ok(), events.append)
    usage = event_json([e for e in events if isinstance(e, Usage)][-1])
    assert (usage["cost_usd"], usage["ask_cost_usd"], usage["context_window"]) == (
        None, None, None)


# --- both providers' real SDKs against the fake ----------------------------------------

@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_both_sdks_read_cached_tokens_and_the_table_prices_them(
    fake: FakeLLM, provider: str
) -> None:
    model = model_of(provider, fake)
    fake.push(CACHED, CACHED)
    reply = model.complete(ask(), lambda _: None)
    assert (reply.input_tokens, reply.cached_tokens, reply.output_tokens) == (12_345, 2_000, 678)
    assert price_table().meter(model.id)(reply) == pytest.approx(COSTS[provider])
    # The async client (the server's model service) reads and keeps the same counts.
    reported = Reported()
    again = asyncio.run(model.acomplete(ask(), lambda _: None, reported))
    assert (again.input_tokens, again.cached_tokens) == (12_345, 2_000)
    assert (reported.input_tokens, reported.cached_tokens, reported.output_tokens) == (
        12_345, 2_000, 678)


def test_the_fake_speaks_each_providers_own_cache_fields(fake: FakeLLM) -> None:
    fake.push(CACHED, CACHED)
    stream = openai.OpenAI(api_key=KEY, base_url=fake.openai_base_url).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}], stream=True,
        stream_options={"include_usage": True})
    usage = [chunk.usage for chunk in stream if chunk.usage is not None][-1]
    assert usage.prompt_tokens == 12_345 and usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 2_000
    with anthropic.Anthropic(api_key=KEY, base_url=fake.anthropic_base_url).messages.stream(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]) as events:
        message = events.get_final_message()
    # Anthropic leaves cache reads out of input_tokens.
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens) == (10_345, 2_000)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_fake_refuses_a_call_of_a_tool_the_request_did_not_offer(
    fake: FakeLLM, provider: str
) -> None:
    fake.push(Turn(tool_calls=[("edit_cell", {"cell_id": "c1", "source": "x = 2"})]))
    schema = {"type": "object", "properties": {"code": {"type": "string"}}}
    if provider == "openai":
        with pytest.raises(openai.BadRequestError, match="'edit_cell', which this request"):
            openai.OpenAI(api_key=KEY, base_url=fake.openai_base_url, max_retries=0
                          ).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}], tools=[
                    {"type": "function", "function": {"name": "run_python",
                                                      "parameters": schema}}])
    else:
        with pytest.raises(anthropic.BadRequestError, match="offered: run_python"):
            anthropic.Anthropic(api_key=KEY, base_url=fake.anthropic_base_url, max_retries=0
                                ).messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}],
                tools=[{"name": "run_python", "input_schema": schema}])
    assert fake.calls(OPENAI_PATH if provider == "openai" else ANTHROPIC_PATH) == 1


def test_cached_tokens_survive_the_service_wire_and_recordings(tmp_path: Path) -> None:
    reply = ModelReply("hi", input_tokens=12_345, output_tokens=678, cached_tokens=2_000)
    read_back = ReplyReader(lambda _: None).feed(line({"reply": reply_json(reply)}))
    assert read_back == reply
    older = {"reply": {"text": "hi", "input_tokens": 3, "output_tokens": 1, "tool_calls": []}}
    assert ReplyReader(lambda _: None).feed(line(older)) == ModelReply("hi", (), 3, 1, 0)
    path = write(tmp_path, Recording("p", "openai:gpt-4.1-mini", (reply,)))
    assert read(path).turns == (reply,)


# --- the cell, in a real kernel ------------------------------------------------------------

@pytest.fixture
def priced_kernel(fake: FakeLLM, tmp_path: Path) -> Iterator[Kernel]:
    k = Kernel(openai_env(fake, "openai:gpt-4.1-mini"), str(tmp_path))
    assert k.execute("%load_ext jupyter_ci").reply["content"]["status"] == "ok"
    yield k
    k.close()


def test_a_kernel_ask_ends_its_log_with_its_tokens_and_cost(
    fake: FakeLLM, priced_kernel: Kernel
) -> None:
    fake.push(Turn(tool_calls=[("run_python", {"code": "x = 6 * 7"})], input_tokens=10_000,
                   cached_tokens=0, output_tokens=300),
              Turn("x is 42.", input_tokens=10_400, cached_tokens=8_000, output_tokens=40))
    run = priced_kernel.execute("%%ask\nmake x", FRONTEND)
    assert run.reply["content"]["status"] == "ok"
    data = run.comm_data()
    usages = [d for d in data if d["type"] == "usage"]
    costs = [(10_000 * 0.40 + 300 * 1.60) / 1e6,
             (2_400 * 0.40 + 8_000 * 0.10 + 40 * 1.60) / 1e6]
    assert [u["cost_usd"] for u in usages] == [pytest.approx(c) for c in costs]
    assert usages[-1]["ask_cost_usd"] == pytest.approx(sum(costs))
    assert usages[-1]["context_window"] == 1_047_576
    end = data[-1]
    assert end["type"] == "ask_end" and end["usage"] == {
        "input_tokens": 20_400, "output_tokens": 340, "cached_tokens": 8_000,
        "cost_usd": pytest.approx(sum(costs))}
    shown = json.dumps([m["content"] for m in run.of_type("display_data", "update_display_data")],
                       ensure_ascii=False)
    assert f"Tokens: 20,400 in (8,000 cached) · 340 out · ${sum(costs):.4f}" in shown


def test_a_headless_ask_shows_the_cost_line_under_its_answer(
    fake: FakeLLM, tmp_path: Path
) -> None:
    fake.push(CACHED)
    nb = run_cells(["%%ask\nsay done"], anthropic_env(fake, "anthropic:claude-haiku-4-5"),
                   tmp_path)
    shown = text_of(nb.cells[1])
    assert "Done." in shown
    assert f"Tokens: 12,345 in (2,000 cached) · 678 out · ${COSTS['anthropic']:.4f}" in shown


def test_an_unpriced_model_shows_tokens_only(fake: FakeLLM, tmp_path: Path) -> None:
    fake.push(Turn("Done.", input_tokens=900, output_tokens=10))
    nb = run_cells(["%%ask\nsay done"], openai_env(fake, "openai:llama3.2"), tmp_path)
    shown = text_of(nb.cells[1])
    assert "Tokens: 900 in · 10 out" in shown and "$" not in shown.split("Tokens:")[1]


def test_a_meter_without_rates_counts_tokens_only() -> None:
    meter = Meter(None)
    assert meter(ModelReply(input_tokens=5, output_tokens=2, cached_tokens=1)) is None
    assert meter.usage() == AskUsage(5, 2, 1, None) and meter.context_window is None


def test_the_mcp_ask_result_ends_with_the_cost_line() -> None:
    from jupyter_ci.mcp import results

    said = results.ask_result({"status": "done", "answer": "42", "steps": [], "usage": {
        "tokens": 13_023, "input_tokens": 12_345, "output_tokens": 678, "cached_tokens": 2_000,
        "cost_usd": 0.0123}})
    text = said.content[0].text  # type: ignore[union-attr]
    assert text.endswith("[Tokens: 12,345 in (2,000 cached) · 678 out · $0.0123]")
    unpriced = results.ask_result({"status": "done", "answer": "42", "steps": [],
                                   "usage": {"input_tokens": 5, "output_tokens": 1,
                                             "cost_usd": None}})
    assert unpriced.content[0].text.endswith("[Tokens: 5 in · 1 out]")  # type: ignore[union-attr]


def test_the_money_budget_reserves_settles_and_follows_its_holders() -> None:
    from jupyter_ci.server.broker.budget import Budgets

    budget = Budgets()
    budget.money.per_kernel, budget.money.per_server = 1.0, 1.5
    budget.open("k1")
    first = budget.reserve("k1", 100, usd=0.6)
    second = budget.reserve("k1", 100, usd=0.6)  # two at once: both see 0 spent yet
    assert not isinstance(first, str) and not isinstance(second, str)
    refused = budget.reserve("k1", 100, usd=0.1)
    assert isinstance(refused, str) and "max_cost_per_kernel = 1 (USD)" in refused
    assert "$1.20 more is reserved" in refused
    budget.settle(first, 50, usd=0.25)
    budget.settle(second, 50, usd=0.25)
    assert budget.money.kernel_used["k1"] == 0.5 and budget.money.server_reserved == 0
    budget.rebind("k1", "k2")
    assert budget.money.kernel_used == {"k2": 0.5}
    again = budget.reserve("k2", 10, usd=0.6)
    assert not isinstance(again, str)
    budget.settle(again, 10, usd=again.usd)  # a hang-up with no report: its reservation
    assert "max_cost_per_kernel" in str(budget.reserve("k2", 1))
    budget.open("k3")
    third = budget.reserve("k3", 10, usd=0.5)
    assert not isinstance(third, str)
    budget.settle(third, 10, usd=0.5)
    assert "max_cost_per_server = 1.5 (USD)" in str(budget.reserve("k3", 1))
    budget.close("k2")
    assert "k2" not in budget.money.kernel_used
    assert budget.money.server_used == pytest.approx(1.6)
