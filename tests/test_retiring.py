"""Models their providers retire: current defaults, our table held to the SDKs', a note."""

from __future__ import annotations

import re
import typing
from datetime import date, datetime
from pathlib import Path

import pytest

from jupyter_ci import providers
from jupyter_ci.models import retiring
from tests.fakellm import FakeLLM, Turn
from tests.test_magic_inprocess import Ask, ask  # noqa: F401  (the in-process %%ask fixture)

ROOT = Path(__file__).resolve().parents[1]


def anthropic_table() -> dict[str, str]:
    """The anthropic SDK's own table of deprecated models, dates as ISO dates."""
    from anthropic._data import DEPRECATED_MODELS

    def iso(text: str) -> str:
        plain = re.sub(r"(\d+)(st|nd|rd|th)", r"\1", text)
        return datetime.strptime(plain, "%B %d, %Y").date().isoformat()

    return {name: iso(when) for name, when in DEPRECATED_MODELS.items()}


def openai_table() -> dict[str, str]:
    """The openai SDK's deprecated chat models (the list under `ChatModel`, in its source)."""
    import openai.types.shared.chat_model as chat_model

    source = Path(chat_model.__file__).read_text()
    listed = source.split('"""Deprecated values:', 1)[1].split('"""', 1)[0]
    table = {}
    for entry in re.split(r"\n- ", listed):
        when = re.search(r"shutdown\s+date:\s+(\d{4}-\d{2}-\d{2})", entry)
        if when:  # not "Not a supported model ID"
            table.update(dict.fromkeys(re.findall(r'"([^"]+)"', entry), when.group(1)))
    return table


def sdk_models(provider: str) -> set[str]:
    """Every model name the installed SDK lists for its chat calls."""
    if provider == "anthropic":
        from anthropic.types.model_param import ModelParam

        literal = typing.get_args(ModelParam)[0]
    else:
        from openai.types.shared.chat_model import ChatModel as literal
    return set(typing.get_args(literal))


SDK_TABLES = {"anthropic": anthropic_table, "openai": openai_table}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_our_table_is_the_installed_sdks_own(provider: str) -> None:
    ours = {name: when for name, when in retiring.RETIRING[provider].items()}
    theirs = SDK_TABLES[provider]()
    # Every model the SDK deprecates, on its date; a model the SDK stopped listing only
    # once it is retired (a newer SDK drops what its provider no longer serves).
    assert {name: ours.get(name) for name in theirs} == theirs
    dropped = {name: when for name, when in ours.items() if name not in theirs}
    assert all(date.fromisoformat(when) <= date.today() for when in dropped.values()), dropped


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_defaults_and_replacements_are_current_models_of_the_sdk(provider: str) -> None:
    spec = providers.PROVIDERS[provider]
    current = sdk_models(provider) - set(SDK_TABLES[provider]())
    assert spec.default_model in current
    for name in retiring.RETIRING[provider]:
        assert retiring.successor(provider, name) in current, name


def test_the_readme_names_no_retiring_model() -> None:
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"\b(?:claude|gpt|o\d)[\w.-]*\w", readme))
    retired = {name for table in retiring.RETIRING.values() for name in table}
    assert named and not (named & retired), named & retired


def test_the_note_names_the_date_and_the_replacement_in_one_line() -> None:
    note = retiring.note("anthropic:claude-sonnet-4-5", today=date(2026, 11, 2))
    assert note == ("anthropic:claude-sonnet-4-5 is deprecated: Anthropic retires it on "
                    "2026-11-30. Use anthropic:claude-sonnet-5-5 instead (-m "
                    "anthropic:claude-sonnet-5-5).")
    past = retiring.note("openai:o1-preview", today=date(2026, 11, 2))
    assert "OpenAI retired it on 2025-07-28" in past and "openai:gpt-5.5" in past
    assert "openai:gpt-5.4-mini" in retiring.note("openai:gpt-4.1-mini")
    assert retiring.note("openai:gpt-5.5") == "" and retiring.note("replay:x") == ""


def test_a_deprecated_model_asks_with_a_warning_line_in_the_cell(
    ask: Ask, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    with FakeLLM([Turn("Hello.")]) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdefghij")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.anthropic_base_url)
        ask.ok("%%ask -m anthropic:claude-sonnet-4-5\nsay hello")
        assert fake.requests[0].body["model"] == "claude-sonnet-4-5"
    shown = ask.screen.markdown()
    warnings = [m for m in shown if "deprecated" in m]
    assert len(warnings) == 1 and "\n" not in warnings[0].strip()
    assert "anthropic:claude-sonnet-5-5" in warnings[0]
    assert any("Hello." in m for m in shown)
