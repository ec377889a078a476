"""`%%ask --show-context` and `--dry-run`: what the model is sent, redacted, with token counts."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.agent.disclosure import request_parts
from jupyter_ci.agent.prompts import RUN_PYTHON, SYSTEM_PROMPT, user_message
from jupyter_ci.agent.types import Message, ModelRequest, ToolCall
from tests.fakellm import FakeLLM, Turn
from tests.kernelrun import Kernel
from tests.nbrun import TEST_KEY, anthropic_env, error_of, openai_env, run_cells, text_of

SECRET = "sk-proj-SECRETSECRETSECRET0123456789"
# A variable whose name is secret, a value the redactor knows by its form, and the
# kernel's own key read from its environment.
SECRETS_CELL = (f"import os\napi_key = '{SECRET}'\nnotes = 'call with key {SECRET}'\n"
                "leak = os.environ.get('OPENAI_API_KEY') or os.environ['ANTHROPIC_API_KEY']\n"
                "rows = [1, 2, 3]")
FRONTEND = {"jupyter_ci_frontend": {"protocol": 2, "generated": []}, "cellId": "ask-cell-1"}
PART = re.compile(r"^\*\*(?P<name>.+?)\*\* · (?P<tokens>[\d,]+) tokens$", re.MULTILINE)


def shown_parts(text: str) -> tuple[str, dict[str, int], int]:
    """Return the summary line, each part's tokens by name, and the total a cell shows."""
    summary = text.split("\n", 1)[0]
    found = {m["name"].replace("\\", ""): int(m["tokens"].replace(",", ""))
             for m in PART.finditer(text)}
    total = found.pop("Total")
    assert f"about {total:,} tokens" in summary
    return summary, found, total


def test_dry_run_shows_what_would_be_sent_and_calls_no_model_runs_nothing(
    fake: FakeLLM, tmp_path: Path
) -> None:
    fake.push(Turn("", tool_calls=[("run_python", {"code": "answer = 42"})]), Turn("Set."))
    nb = run_cells(["rows = [1, 2, 3]", "%%ask --dry-run\nset answer to 42",
                    "print('answer' in globals())"], openai_env(fake), tmp_path)
    dry = nb.cells[2]
    assert error_of(dry) is None, text_of(dry)
    shown = text_of(dry)
    summary, parts, total = shown_parts(shown)
    assert summary.startswith("Would send (dry run: nothing was sent, nothing ran) to "
                              "openai:gpt-test")
    assert SYSTEM_PROMPT.splitlines()[0] in shown and "rows: list" in shown
    assert "set answer to 42" in shown
    assert {"System prompt", "Tool run_python", "Kernel context: Variables",
            "Message 1 (user): prompt"} <= set(parts)
    assert sum(parts.values()) == total and all(n > 0 for n in parts.values())
    assert fake.calls() == 0
    assert text_of(nb.cells[3]).strip() == "False"  # nothing ran
    # Folded: one display whose HTML is a <details> with the summary line.
    html = dry.outputs[0]["data"]["text/html"]
    assert "<details><summary>Would send" in html and "<script" not in html


def test_a_dry_run_remembers_nothing_and_records_nothing(fake: FakeLLM, tmp_path: Path
                                                         ) -> None:
    kernel = Kernel(openai_env(fake), str(tmp_path))
    try:
        kernel.execute("%load_ext jupyter_ci")
        run = kernel.execute("%%ask --dry-run\nplot rows", FRONTEND)
        assert run.reply["content"]["status"] == "ok"
        assert run.of_type("comm_open", "comm_msg") == []  # no ask for the panel, no ask_end
        shown = json.dumps([m["content"] for m in run.of_type("display_data")])
        assert "Would send" in shown and "plot rows" in shown
        # The next real ask has no memory of the dry run (no earlier prompt and answer;
        # the input history still lists the cell, as it lists every cell run).
        fake.push(Turn("Nothing to do."))
        assert kernel.execute("%%ask\nhello").reply["content"]["status"] == "ok"
        assert [m["role"] for m in fake.requests[0].messages] == ["system", "user"]
    finally:
        kernel.close()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_show_context_shows_the_redacted_context_and_never_a_secret(
    fake: FakeLLM, tmp_path: Path, provider: str
) -> None:
    fake.push(Turn("", tool_calls=[("run_python", {"code": "total = sum(rows)\nprint(total)"})]),
              Turn("The total is **6**."))
    env = openai_env(fake) if provider == "openai" else anthropic_env(fake)
    nb = run_cells([SECRETS_CELL, "%%ask --show-context\nsum the rows"], env, tmp_path)
    ask = nb.cells[2]
    assert error_of(ask) is None, text_of(ask)
    shown = json.dumps(ask.outputs)
    assert SECRET not in shown and TEST_KEY not in shown
    text = text_of(ask)
    summary, parts, total = shown_parts(text[text.index("Sent in the last model call"):])
    assert summary.startswith(f"Sent in the last model call to {provider}:")
    assert "api_key: str = [redacted]" in text and "[redacted]" in text
    # The last call carried the step's result: the model's tool call and its output.
    assert "Message 2 (model)" in parts and "Message 3 (code result)" in parts
    assert "total = sum(rows)" in text and "\n6\n" in text
    assert sum(parts.values()) == total
    assert "The total is **6**." in text
    assert SECRET not in json.dumps([r.body for r in fake.requests])


@pytest.fixture
def kernel(fake: FakeLLM, tmp_path: Path) -> Iterator[Kernel]:
    started = Kernel(openai_env(fake), str(tmp_path))
    assert started.execute("%load_ext jupyter_ci").reply["content"]["status"] == "ok"
    yield started
    started.close()


def test_with_the_labextension_the_parts_go_to_the_panel_with_each_call(
    fake: FakeLLM, kernel: Kernel
) -> None:
    kernel.execute(SECRETS_CELL)
    fake.push(Turn("Done."))
    run = kernel.execute("%%ask --show-context\nsay done", FRONTEND)
    assert run.reply["content"]["status"] == "ok"
    data = [d for d in run.comm_data() if d["type"] != "text"]
    assert [d["type"] for d in data] == ["ask_start", "request_sent", "thinking", "usage",
                                         "ask_end"]
    context: dict[str, Any] = data[1]
    assert context["ask_id"] == data[0]["ask_id"] and context["protocol"] == 2
    parts = context["parts"]
    assert [p["name"] for p in parts][:2] == ["System prompt", "Tool run_python"]
    assert all(set(p) == {"name", "tokens", "text"} for p in parts)
    sent = fake.requests[0].messages
    # The parts are the request's own text: the user message is its parts joined.
    user = "".join(p["text"] for p in parts if p["name"].startswith(
        ("Kernel context", "Message 1")))
    assert user == sent[-1]["content"]
    assert SECRET not in json.dumps(data) and TEST_KEY not in json.dumps(data)
    # Without the option the panel still gets its disclosure; the cell shows none.
    fake.push(Turn("Done again."))
    again = kernel.execute("%%ask\nsay done again", FRONTEND)
    assert [d["type"] for d in again.comm_data() if d["type"] != "text"] == [
        "ask_start", "request_sent", "thinking", "usage", "ask_end"]
    shown = json.dumps([m["content"] for m in again.of_type("display_data",
                                                            "update_display_data")])
    assert "Sent in the last model call" not in shown
    assert "Sent in the last model call" in json.dumps(
        [m["content"] for m in run.of_type("display_data")])


def test_parts_cut_the_context_message_at_its_sections_and_add_up() -> None:
    context = "## Variables\nx: int = 1\n\n## Names only in this kernel\nOnly in this kernel: y"
    request = ModelRequest(SYSTEM_PROMPT, (
        Message("user", "earlier"), Message("assistant", "earlier answer"),
        Message("user", user_message("now", context)),
        Message("assistant", "", tool_calls=(ToolCall("c1", "run_python", '{"code": "1"}'),)),
    ), (RUN_PYTHON,))
    parts = request_parts(request)
    assert [p.name for p in parts] == [
        "System prompt", "Tool run_python", "Message 1 (user)", "Message 2 (model)",
        "Kernel context: Variables", "Kernel context: Names only in this kernel",
        "Message 3 (user): prompt", "Message 4 (model)"]
    assert "".join(p.text for p in parts[4:7]) == request.messages[2].content
    assert parts[-1].text.endswith('[tool call run_python: {"code": "1"}]')
    assert [p.tokens for p in parts[4:7]] == [(len(p.text) + 3) // 4 for p in parts[4:7]]
