"""%%ask in an in-process IPython shell with scripted models: no kernel, no HTTP, fast.

The loop, the inline view, limits, memory and usage errors, driven through the real magic
(`shell.run_cell("%%ask -m scripted:<name> ...")`). What needs a real kernel (the comm to the
labextension, nbclient, reuse of a saved notebook, interrupts from a client) and what needs
the real SDKs stays in test_kernel_protocol.py and test_ask_notebooks.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from IPython.core.displaypub import DisplayPublisher
from IPython.core.error import UsageError
from IPython.core.interactiveshell import ExecutionResult, InteractiveShell

import jupyter_ci
from jupyter_ci.agent.errors import LimitReached, ModelConfigError
from jupyter_ci.agent.types import ModelReply, ModelRequest, ToolCall
from jupyter_ci.kernel.magics import UNBOXED_NOTE
from jupyter_ci.kernel.options import USAGE, help_text
from jupyter_ci.models.scripted import ScriptedModel, code_call, register
from tests.nbrun import PROVIDER_VARS

# What makes the magic reuse answers from saved notebooks or pick a model from the environment.
AMBIENT_VARS = (*PROVIDER_VARS, "JUPYTER_CI_MODEL", "JUPYTER_CI_NOTEBOOK", "JPY_SESSION_NAME")


def ours(data: dict[str, Any]) -> bool:
    """Tell a display of the magic's own Markdown (shown as sanitised HTML, source as text)."""
    return 'class="jp-ci-markdown"' in str(data.get("text/html", ""))


@dataclass
class Screen:
    """What the %%ask cell shows, in order: ("display"|"update", data) or (stream, text)."""

    shown: list[tuple[str, Any]] = field(default_factory=list)

    def markdown(self) -> list[str]:
        """Return the Markdown source of every display of ours, in order (updates included)."""
        return [data["text/plain"] for kind, data in self.shown
                if kind in ("display", "update") and ours(data)]

    def stream(self, name: str = "stdout") -> str:
        """Return all text written to one stream."""
        return "".join(text for kind, text in self.shown if kind == name)

    def merged(self) -> list[tuple[str, str]]:
        """Return (kind, Markdown or text) in order, consecutive writes to a stream joined."""
        merged: list[tuple[str, str]] = []
        for kind, item in self.shown:
            text = item if isinstance(item, str) else (
                item["text/plain"] if ours(item) else str(item))
            if merged and kind in ("stdout", "stderr") and merged[-1][0] == kind:
                merged[-1] = (kind, merged[-1][1] + text)
            else:
                merged.append((kind, text))
        return merged

    def clear(self) -> None:
        """Forget what was shown so far."""
        self.shown.clear()


class _Publisher(DisplayPublisher):
    """Record displays instead of printing them."""

    def __init__(self, screen: Screen) -> None:
        super().__init__()
        self.screen = screen

    def publish(self, data: Any, metadata: Any = None, source: Any = None, *,
                transient: Any = None, update: Any = False, **kwargs: Any) -> None:
        self.screen.shown.append(("update" if update else "display", data))


class _Stream(io.StringIO):
    """Record writes; a subclass, so the executor can wrap `write` on the instance."""

    def __init__(self, screen: Screen, name: str) -> None:
        super().__init__()
        self.screen, self.stream_name = screen, name

    def write(self, text: str) -> int:
        self.screen.shown.append((self.stream_name, text))
        return len(text)


@dataclass
class Ask:
    """An in-process shell with jupyter-ci loaded, and what its cells show."""

    shell: InteractiveShell
    screen: Screen

    def run(self, cell: str) -> ExecutionResult:
        """Run a cell as the user would, recording what it writes to stdout and stderr."""
        # Set per cell: pytest puts its own sys.stdout back at the start of each test phase.
        with (contextlib.redirect_stdout(_Stream(self.screen, "stdout")),
              contextlib.redirect_stderr(_Stream(self.screen, "stderr"))):
            result: ExecutionResult = self.shell.run_cell(cell, store_history=True)
        return result

    def ok(self, cell: str) -> ExecutionResult:
        """Run a cell that must succeed."""
        result = self.run(cell)
        assert result.success, (result.error_before_exec or result.error_in_exec, self.screen)
        return result

    @property
    def ns(self) -> dict[str, Any]:
        """Return the user namespace."""
        return dict(self.shell.user_ns)


@pytest.fixture
def ask(shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
        ) -> Iterator[Ask]:
    """Load jupyter-ci into a fresh shell, in an empty folder, with no model configured."""
    for name in AMBIENT_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    screen = Screen()
    monkeypatch.setattr(shell, "display_pub", _Publisher(screen))
    jupyter_ci.load_ipython_extension(shell)
    yield Ask(shell, screen)


def script(request: pytest.FixtureRequest, *replies: ModelReply) -> tuple[str, ScriptedModel]:
    """Register a scripted model named after the test; return its -m value and the model."""
    name = re.sub(r"\W+", "_", request.node.name)
    return f"scripted:{name}", register(name, replies)


def code(src: str, text: str = "") -> ModelReply:
    """Script a reply that runs `src`, after some narration."""
    return dataclasses.replace(code_call(src), text=text)


def answer(text: str) -> ModelReply:
    """Script a final answer."""
    return ModelReply(text=text)


def tool_results(request: ModelRequest) -> list[str]:
    """Return the texts of the tool results a model request carries."""
    return [m.content for m in request.messages if m.role == "tool"]


# --- the loop through the magic --------------------------------------------------------------

def test_a_multi_step_ask_leaves_its_variables_for_later_cells(
    ask: Ask, request: pytest.FixtureRequest
) -> None:
    replies = [code("sales = {'N': [1, 3], 'S': [2]}", "Loading the data."),
               code("totals = {k: sum(v) for k, v in sales.items()}\nprint(totals)"),
               answer("North has the most revenue: **4**.")]
    model_id, model = script(request, *(
        dataclasses.replace(r, input_tokens=11, output_tokens=7) for r in replies))
    ask.ok(f"%%ask -m {model_id}\nsum revenue by region")
    assert ask.ns["totals"] == {"N": 4, "S": 2}
    assert "{'N': 4, 'S': 2}" in ask.screen.stream()
    assert "{'N': 4, 'S': 2}" in tool_results(model.requests[2])[-1]
    shown = "\n".join(ask.screen.markdown())
    assert "Loading the data." in shown and "North has the most revenue: **4**." in shown
    assert "sales = {'N': [1, 3], 'S': [2]}" in shown
    # Three model turns of 11 input + 7 output tokens each.
    assert f"{model_id} · 2 steps · 54 tokens" in shown
    assert len(model.requests) == 3 and not model.replies
    ask.screen.clear()
    ask.ok("print(totals['N'] * 10)")
    assert ask.screen.stream() == "40\n"


def test_the_inline_view_shows_each_steps_code_then_its_final_attempts_outputs(
    ask: Ask, request: pytest.FixtureRequest
) -> None:
    model_id, _ = script(request, code_call("print('one')"),
                         code_call("print('drawn first')\nprint(undefined)"),
                         code_call("undefined = 2\nprint('two', undefined)"), answer("Done."))
    ask.ok(f"%%ask -m {model_id}\ntwo steps")
    seen = ask.screen.merged()
    step2 = "```python\nprint('drawn first')\nprint(undefined)\n```"
    fix = "```python\nundefined = 2\nprint('two', undefined)\n```"
    assert seen[:10] == [
        ("display", f"*Asking {model_id}…*"),
        # This shell is not boxed: its first ask says so, once.
        ("display", f"*⚠ {UNBOXED_NOTE}*"),
        ("display", "**Step 1**\n\n```python\nprint('one')\n```\n\n*running…*"),
        ("update", "**Step 1**\n\n```python\nprint('one')\n```"),
        ("stdout", "one\n"),
        ("display", f"**Step 2**\n\n{step2}\n\n*running…*"),
        # The failed attempt collapses into one line: its output and traceback are gone.
        ("update", "*Step 2: attempt 1 failed: `NameError: name 'undefined' is not "
                   "defined`.*"),
        ("display", f"**Step 2 (fix, attempt 2)**\n\n{fix}\n\n*running…*"),
        ("update", f"**Step 2 (fix, attempt 2)**\n\n{fix}"),
        ("stdout", "two 2\n"),
    ]
    assert ask.screen.stream() == "one\ntwo 2\n" and ask.screen.stream("stderr") == ""
    # The answer streams into one display (updated in place); then the status line that said
    # "Asking" says what the ask took.
    answer_shown, status = seen[10:-1], seen[-1]
    assert answer_shown[0][0] == "display" and "Done.".startswith(answer_shown[0][1])
    assert {kind for kind, _ in answer_shown[1:]} <= {"update"}
    assert answer_shown[-1][1] == "Done."
    assert status == ("update", f"*{model_id} · 2 steps · 0 tokens*")


def test_a_failure_nobody_fixed_keeps_its_output_with_the_traceback_as_text(
    ask: Ask, request: pytest.FixtureRequest
) -> None:
    model_id, _ = script(request, code_call("print('partial')\n1/0"), answer("It failed."))
    ask.ok(f"%%ask -m {model_id}\ndivide")
    seen = ask.screen.merged()
    assert ("display",
            "*Step 1, not fixed: its output.*\n\n```python\nprint('partial')\n1/0\n```"
            ) in seen
    assert ("stdout", "partial\n") in seen
    stderr = ask.screen.stream("stderr")
    assert "ZeroDivisionError" in stderr and "\x1b[" not in stderr


def test_an_error_goes_back_to_the_model_which_fixes_it(
    ask: Ask, request: pytest.FixtureRequest
) -> None:
    model_id, model = script(request, code_call("print(undefined_name)"),
                             code_call("undefined_name = 5\nprint(undefined_name)"),
                             answer("Fixed it."))
    ask.ok(f"%%ask -m {model_id}\nprint the thing")
    sent = tool_results(model.requests[1])[-1]
    assert "NameError: name 'undefined_name' is not defined" in sent
    assert "\x1b[" not in sent and "Traceback" in sent
    assert "Fixed it." in "\n".join(ask.screen.markdown())
    assert "LimitReached" not in ask.screen.stream() + ask.screen.stream("stderr")
    ask.screen.clear()
    ask.ok("print(undefined_name + 1)")
    assert ask.screen.stream() == "6\n"


def test_a_malformed_tool_call_is_reported_and_retried(
    ask: Ask, request: pytest.FixtureRequest
) -> None:
    bad = ModelReply(tool_calls=(ToolCall("c1", "run_python", '{"code": "print(1)'),))
    model_id, model = script(request, bad, code_call("print(2)"), answer("Two."))
    ask.ok(f"%%ask -m {model_id}\nprint")
    assert "not valid JSON" in tool_results(model.requests[1])[-1]
    assert "Two." in "\n".join(ask.screen.markdown())
    assert ask.screen.stream() == "2\n"  # the malformed call ran nothing


def test_input_fails_with_a_message_instead_of_hanging(
    ask: Ask, request: pytest.FixtureRequest
) -> None:
    model_id, model = script(request, code_call("name = input('Name? ')"),
                             code_call("name = 'Ada'\nprint(name)"), answer("Ada."))
    ask.ok(f"%%ask -m {model_id} --timeout 20\nask my name")
    sent = tool_results(model.requests[1])[-1]
    assert "input()" in sent and "not available" in sent
    assert "Ada." in "\n".join(ask.screen.markdown()) and ask.ns["name"] == "Ada"


# --- limits end the ask with a typed error; the namespace stays ---------------------------

@pytest.mark.parametrize("spin", ["while True:\n    pass",
                                  "import time\nwhile True:\n    time.sleep(0.05)"],
                         ids=["busy", "sleeping"])
def test_a_runaway_loop_times_out_and_the_shell_recovers(
    ask: Ask, request: pytest.FixtureRequest, spin: str
) -> None:
    model_id, model = script(request, code_call(f"x_before = 1\n{spin}"),
                             code_call("print('recovered', x_before)"), answer("Done."))
    ask.ok(f"%%ask -m {model_id} --timeout 0.5\nspin")
    assert "Timed out after 0.5 s" in tool_results(model.requests[1])[-1]
    assert "*Step 1: attempt 1 timed out and was interrupted.*" in ask.screen.markdown()
    assert "recovered 1" in ask.screen.stream()
    ask.screen.clear()
    ask.ok("print(x_before + 1)")
    assert ask.screen.stream() == "2\n"


@pytest.mark.parametrize(("options", "steps", "message"), [
    ("--max-fixes 2", ["1/0", "1/0"], "ZeroDivisionError"),
    ("--max-steps 1", ["a = 1", "b = 2"], "limit of 1 step"),
], ids=["max-fixes", "max-steps"])
def test_limits_end_the_ask_with_an_error_and_the_namespace_stays(
    ask: Ask, request: pytest.FixtureRequest, options: str, steps: list[str], message: str
) -> None:
    ask.ok("kept = 'state'")
    model_id, model = script(request, *(code_call(s) for s in steps))
    result = ask.run(f"%%ask -m {model_id} {options}\ngo")
    assert isinstance(result.error_in_exec, LimitReached), result.error_in_exec
    assert message in str(result.error_in_exec)
    # The error is shown as its message, not as a stack of jupyter-ci frames.
    assert f"LimitReached: {result.error_in_exec.message}" in ask.screen.stream()
    assert "jupyter_ci" not in ask.screen.stream()
    assert "ask failed*" in ask.screen.markdown()[-1]
    assert ask.ns["kept"] == "state" and not model.replies
    if options == "--max-steps 1":
        assert ask.ns["a"] == 1 and "b" not in ask.ns  # the first step ran, the second not
    ask.screen.clear()
    ask.ok("print('alive', kept)")
    assert ask.screen.stream() == "alive state\n"


# --- memory ----------------------------------------------------------------------------------

def test_a_follow_up_ask_remembers_and_new_forgets(
    ask: Ask, request: pytest.FixtureRequest
) -> None:
    model_id, model = script(request, code_call("x = 21"), answer("x is 21."),
                             code_call("y = x * 2\nprint(y)"), answer("It is 42."),
                             answer("Fresh start."))
    ask.ok(f"%%ask -m {model_id}\ncreate x")
    ask.ok(f"%ask -m {model_id} double it")
    assert "It is 42." in "\n".join(ask.screen.markdown()) and ask.ns["y"] == 42
    follow_up = model.requests[2].messages
    text = json.dumps([m.content for m in follow_up])
    assert "create x" in text and "x = 21" in text and "x is 21." in text
    # Earlier asks come as user/assistant pairs before this ask's own user turn.
    roles = [m.role for m in follow_up]
    assert roles == ["user", "assistant", "user"]
    ask.ok(f"%%ask -m {model_id} --new\nhello")
    # --new: only this ask's own user turn, no earlier asks.
    fresh = model.requests[4].messages
    assert [m.role for m in fresh] == ["user"]
    assert not model.replies


def test_a_failed_ask_is_remembered_for_the_follow_up(
    ask: Ask, request: pytest.FixtureRequest
) -> None:
    model_id, model = script(request, code_call("1/0"), answer("It divided by zero."))
    assert not ask.run(f"%%ask -m {model_id} --max-fixes 1\ndivide").success
    ask.ok(f"%ask -m {model_id} why did that fail")  # a trailing ? would ask IPython for help
    remembered = json.dumps([m.content for m in model.requests[1].messages])
    assert "divide" in remembered and "The ask failed" in remembered


# --- usage and configuration errors ----------------------------------------------------------

@pytest.mark.parametrize(("cell", "message"), [
    ("%ask --max-steps 0 x", "--max-steps must be a positive number, got 0."),
    ("%%ask --max-steps 0\nx", "--max-steps must be a positive number, got 0."),
    ("%%ask --max-steps zero\nx", "argument --max-steps: invalid int value: 'zero'"),
    ("%ask --timeout -1 go", "--timeout must be a positive number, got -1."),
    ("%ask --bogus x", "unrecognized arguments: --bogus"),
    ("%ask -m", "argument -m/--model: expected one argument"),
    ("%ask", "write what you want after the magic."),
    ("%ask -m scripted:x --new", "write what you want after the magic."),
], ids=["zero-steps-line", "zero-steps-cell", "not-an-int", "negative-timeout", "unknown-option",
        "missing-value", "no-prompt", "options-only"])
def test_bad_options_are_usage_errors_with_the_usage(ask: Ask, cell: str, message: str) -> None:
    result = ask.run(cell)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    assert str(result.error_in_exec) == f"%%ask: {message}\nUsage: {USAGE}"
    # IPython prints a UsageError on stderr, without a traceback.
    assert f"UsageError: %%ask: {message}" in ask.screen.stream("stderr")
    assert "Traceback" not in ask.screen.stream() + ask.screen.stream("stderr")


def test_the_help_is_the_parsers(ask: Ask) -> None:
    for kind in ("line", "cell"):
        magic = ask.shell.find_magic("ask", kind)
        assert magic is not None and magic.__doc__ == help_text()


@pytest.mark.parametrize(("model", "expected"), [
    ("scripted:nobody", "No scripted model is registered as 'nobody'."),
    ("google:gemini", "Unknown model provider 'google'"),
    ("gpt-4", "is not of the form provider:model"),
    ("", "No model is configured for %%ask."),
], ids=["unregistered-scripted", "unknown-provider", "no-provider", "no-key"])
def test_model_errors_end_the_ask_clearly_and_the_namespace_stays(
    ask: Ask, model: str, expected: str
) -> None:
    ask.ok("y = 1")
    result = ask.run(f"%%ask {'-m ' + model if model else ''}\nanything")
    error = result.error_in_exec
    assert isinstance(error, ModelConfigError), error
    assert expected in str(error)
    if not model:  # no key anywhere: say what to set
        assert "OPENAI_API_KEY" in str(error) and "ANTHROPIC_API_KEY" in str(error)
    assert f"ModelConfigError: {error.message}" in ask.screen.stream()
    assert ask.ns["y"] == 1


def test_an_answer_after_an_unfixed_failure_is_not_a_clean_done(
    ask: Ask, request: pytest.FixtureRequest
) -> None:
    model_id, _ = script(request, code_call("print('loaded')"), code_call("print(orders)"),
                         answer("Revenue peaked in March."))
    ask.ok(f"%%ask -m {model_id}\nbest month")
    status = ask.screen.merged()[-1]
    assert status == ("update", f"*Done with an unresolved error in step 2: NameError: name "
                                f"'orders' is not defined ({model_id} · 2 steps · 0 tokens)*")


def test_a_fixed_failure_ends_as_a_clean_done(ask: Ask, request: pytest.FixtureRequest) -> None:
    model_id, _ = script(request, code_call("print(orders)"),
                         code_call("orders = 3\nprint(orders)"), answer("Three."))
    ask.ok(f"%%ask -m {model_id}\nhow many")
    assert ask.screen.merged()[-1] == ("update", f"*{model_id} · 1 step · 0 tokens*")


def test_a_one_line_ask_ending_in_a_question_mark_is_a_prompt_not_a_help_request(
    ask: Ask, request: pytest.FixtureRequest
) -> None:
    model_id, model = script(request, answer("March, by 12%."))
    ask.ok(f"%ask -m {model_id} Which month was best, and by how much?")
    assert "not found" not in ask.screen.stream() + ask.screen.stream("stderr")
    assert "Which month was best, and by how much?" in model.requests[0].messages[0].content
    assert "March, by 12%." in "\n".join(ask.screen.markdown())
