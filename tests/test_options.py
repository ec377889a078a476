"""Parsing %%ask options and turning model ids into adapters."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from jupyter_ci import providers
from jupyter_ci.agent.errors import ModelConfigError
from jupyter_ci.config import JupyterCI
from jupyter_ci.kernel.magics import AskMagics
from jupyter_ci.kernel.options import USAGE, ask_parser, help_text, parse_options
from jupyter_ci.models.resolve import ModelSettings, default_model_id, endpoint_for, resolve_model
from jupyter_ci.models.service import ServiceModel


def test_options_then_prompt_kept_verbatim() -> None:
    opts = parse_options("-m anthropic:claude-x --timeout 5 --new what's \"up\"", "more")
    assert opts.model == "anthropic:claude-x" and opts.timeout == 5 and opts.new
    assert opts.prompt == "what's \"up\"\nmore"


def test_double_dash_ends_options() -> None:
    assert parse_options("-- -5 times 3", None).prompt == "-5 times 3"


@pytest.mark.parametrize("line", ["--max-steps 0 x", "--bogus x", "--timeout abc x", "", "-m"])
def test_bad_options_are_usage_errors(line: str) -> None:
    with pytest.raises(UsageError, match="%%ask"):
        parse_options(line, None)


README = Path(__file__).resolve().parents[1] / "README.md"


def _readme_use_section() -> str:
    return README.read_text(encoding="utf-8").split("\n## Use\n", 1)[1].split("\n## ", 1)[0]


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options a user types (`--pin` is written by the extension, and hidden)."""
    return [action for action in parser._actions
            if action.option_strings and action.help != argparse.SUPPRESS]


def test_the_pin_is_parsed_but_kept_out_of_the_usage() -> None:
    assert parse_options("--pin 0a1b2c -m openai:x", "plot").pin == "0a1b2c"
    assert parse_options("--pin 0a1b2c Which month?", None).prompt == "Which month?"
    assert "--pin" not in USAGE and "--pin" not in help_text()


def _usage_form(action: argparse.Action) -> str:
    """Write an option as the usage line does: `-m MODEL`, `--new`."""
    flag = action.option_strings[0]
    return flag if action.nargs == 0 else f"{flag} {action.metavar}"


def test_the_usage_line_is_the_parsers() -> None:
    parser = ask_parser()
    assert USAGE.startswith("%%ask [-m MODEL] [--timeout SECONDS]")
    assert all(f"[{_usage_form(a)}]" in USAGE for a in _options(parser))
    assert "usage:" not in USAGE and "\n" not in USAGE
    with pytest.raises(UsageError) as err:
        parse_options("--bogus x", None)
    assert str(err.value).endswith(f"\nUsage: {USAGE}")
    # `%%ask?` shows the usage and each option's help string.
    doc = AskMagics.ask.__doc__ or ""
    assert doc == help_text() and f"Usage: {USAGE}" in doc
    assert all(a.help and a.help.split(" (")[0] in " ".join(doc.split()) for a in _options(parser))


def test_the_readme_quotes_the_usage_line() -> None:
    block = re.split(r"```\w*\n", _readme_use_section(), maxsplit=2)[1]
    assert USAGE in block.splitlines(), f"README.md's usage block must hold:\n{USAGE}"


def test_the_readme_option_table_lists_every_option_and_its_default() -> None:
    rows = [line.split(" | ") for line in _readme_use_section().splitlines()
            if line.startswith("| `")]
    table = {row[0].removeprefix("| ").strip("`"): row[-1].removesuffix("|").strip()
             for row in rows}
    forms = {_usage_form(a): a for a in _options(ask_parser())}
    assert set(table) == {*forms, "--"}
    for form, action in forms.items():
        trait = JupyterCI.class_traits().get(action.dest)
        if trait is not None and isinstance(trait.default_value, (int, float)):
            assert table[form] == f"{trait.default_value:g}", form


def test_no_key_says_what_to_set() -> None:
    with pytest.raises(ModelConfigError) as err:
        default_model_id(ModelSettings(), {})
    assert "OPENAI_API_KEY" in str(err.value) and "ANTHROPIC_API_KEY" in str(err.value)


def test_default_follows_the_key_present() -> None:
    assert default_model_id(ModelSettings(), {"ANTHROPIC_API_KEY": "k"}).startswith("anthropic:")
    assert default_model_id(ModelSettings("openai:x"), {}) == "openai:x"


def test_local_server_needs_a_model_name() -> None:
    with pytest.raises(ModelConfigError, match="JUPYTER_CI_MODEL"):
        default_model_id(ModelSettings(), {"OPENAI_BASE_URL": "http://localhost:11434/v1"})
    ep = endpoint_for(providers.PROVIDERS["openai"], ModelSettings(), {"OPENAI_BASE_URL": "http://h/v1"})
    assert ep.base_url == "http://h/v1" and ep.api_key == "not-needed"


@pytest.mark.parametrize("spec", ["gpt-4", "google:gemini", ":x"])
def test_bad_model_ids(spec: str) -> None:
    with pytest.raises(ModelConfigError):
        resolve_model(spec, ModelSettings(), {"OPENAI_API_KEY": "k"})


def test_missing_key_for_the_chosen_provider() -> None:
    with pytest.raises(ModelConfigError, match="ANTHROPIC_API_KEY"):
        resolve_model("anthropic:claude-x", ModelSettings(), {"OPENAI_API_KEY": "k"})


def test_the_broker_replaces_keys_under_jupyter_server() -> None:
    env = {"JUPYTER_CI_BROKER_URL": "http://127.0.0.1:8888/jupyter-ci/broker",
           "JUPYTER_CI_BROKER_TOKEN": "tok", "JUPYTER_CI_BROKER_PROVIDERS": "anthropic"}
    assert default_model_id(ModelSettings(), env) == "anthropic:claude-sonnet-5-5"
    ep = endpoint_for(providers.PROVIDERS["anthropic"], ModelSettings(), env)
    # The kernel's credential and the server's model service, never a provider's URL.
    assert ep.api_key == "tok" and str(ep.base_url).endswith("/jupyter-ci/broker")
    assert isinstance(resolve_model("anthropic:claude-x", ModelSettings(), env), ServiceModel)
    with pytest.raises(ModelConfigError, match="no key for openai"):
        endpoint_for(providers.PROVIDERS["openai"], ModelSettings(), env)


def test_adapters_are_reused_per_model_and_endpoint() -> None:
    env = {"OPENAI_API_KEY": "k1"}
    first = resolve_model("openai:a", ModelSettings(), env)
    assert resolve_model("openai:a", ModelSettings(), env) is first
    assert resolve_model("openai:b", ModelSettings(), env) is not first
    assert resolve_model("openai:a", ModelSettings(), {"OPENAI_API_KEY": "k2"}) is not first


def test_an_endpoint_never_shows_its_key() -> None:
    from jupyter_ci.models.base import Endpoint

    assert "sk-secret" not in repr(Endpoint("sk-secret", "http://h/v1"))
