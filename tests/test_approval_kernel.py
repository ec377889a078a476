"""Approval, reviewed edits and standing instructions in real kernels, with the fake model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakellm import FakeLLM, Turn
from tests.kernelrun import Kernel
from tests.nbrun import anthropic_env, error_of, openai_env, run_cells, text_of

FRONTEND = {"protocol": 2, "generated": []}


def code(src: str) -> Turn:
    return Turn("", tool_calls=[("run_python", {"code": src})])


def tool_results(fake: FakeLLM, index: int) -> list[str]:
    return [m["content"] for m in fake.requests[index].messages if m.get("role") == "tool"]


def value_of(kernel: Kernel, expr: str) -> str:
    run = kernel.execute(f"print(repr({expr}))")
    return "".join(m["content"].get("text", "") for m in run.of_type("stream")).strip()


def test_each_mode_on_stdin_runs_edits_skips_and_stops_as_answered(
    fake: FakeLLM, tmp_path: Path
) -> None:
    kernel = Kernel(openai_env(fake), str(tmp_path))
    try:
        kernel.execute("%load_ext jupyter_ci")
        fake.push(code("a = 1"), code("b = 2"), code("c = 3"), Turn("Done."))
        # Run step 1, edit step 2 (typed line by line), skip the third.
        run = kernel.execute("%%ask --approve each\nset things",
                             answers=["y", "e", "b = 20", "b += 1", "", "s"])
        a, b, c = (value_of(kernel, f"globals().get({n!r})") for n in "abc")
        fake.push(code("d = 4"))
        stopped = kernel.execute("%%ask --approve each\nmore", answers=["q"])
        d = value_of(kernel, "globals().get('d')")
    finally:
        kernel.close()
    assert run.reply["content"]["status"] == "ok"
    assert run.prompts[0] == "jupyter-ci: run step 1? [Y]es / [e]dit / [s]kip / [q] stop: "
    assert (a, b, c) == ("1", "21", "None")
    told = tool_results(fake, 3)
    assert "The user edited your code" in told[1] and "b = 20\nb += 1" in told[1]
    assert "the user skipped step 3" in told[2]
    shown = json.dumps([m["content"] for m in run.iopub])
    assert "Step 1 waits for you" in shown and "a = 1" in shown
    assert stopped.reply["content"]["status"] == "error"
    assert stopped.reply["content"]["ename"] == "AskStopped"
    assert d == "None"


def test_each_mode_refuses_to_start_headless_without_stdin(fake: FakeLLM, tmp_path: Path) -> None:
    fake.push(code("x = 1"))
    nb = run_cells(["x = 0", "%%ask --approve each\nset x", "print('x is', x)"],
                   openai_env(fake), tmp_path)
    error = error_of(nb.cells[2])
    assert error.ename == "NoOneToApprove"
    assert "no one can answer here" in error.evalue and "Nothing ran" in error.evalue
    assert fake.requests == []  # the model was never called
    assert "x is 0" in text_of(nb.cells[3])


def test_an_admins_minimum_is_not_lowered_by_config_or_the_option(
    fake: FakeLLM, tmp_path: Path
) -> None:
    env = {**openai_env(fake), "JUPYTER_CI_APPROVAL_MINIMUM": "each"}
    fake.push(code("x = 1"))
    nb = run_cells(["%config JupyterCI.approval = 'never'", "%%ask --approve never\nset x"],
                   env, tmp_path)
    error = error_of(nb.cells[2])
    assert error.ename == "NoOneToApprove" and "set by the server admin" in error.evalue
    assert "--approve never" not in error.evalue  # no advice the admin's lock forbids
    kernel = Kernel(env, str(tmp_path))
    try:
        kernel.execute("%load_ext jupyter_ci")
        kernel.execute("%config JupyterCI.approval = 'never'")
        run = kernel.execute("%%ask --approve never\nset x", answers=["q"])
    finally:
        kernel.close()
    assert run.prompts == ["jupyter-ci: run step 1? [Y]es / [e]dit / [s]kip / [q] stop: "]
    assert run.reply["content"]["ename"] == "AskStopped"


def test_plan_mode_on_stdin_sends_the_edited_plan_back(fake: FakeLLM, tmp_path: Path) -> None:
    kernel = Kernel(anthropic_env(fake), str(tmp_path))
    try:
        kernel.execute("%load_ext jupyter_ci")
        fake.push(Turn("1. make x\n2. show it"), code("x = 5"), Turn("x is 5."))
        run = kernel.execute("%%ask --approve plan\nmake x",
                             answers=["e", "1. make x = 5", "", ])
    finally:
        kernel.close()
    assert run.reply["content"]["status"] == "ok"
    assert run.prompts[0].startswith("jupyter-ci: carry out this plan?")
    assert "numbered plan" in str(fake.requests[0].body.get("system"))
    sent = json.dumps(fake.requests[1].messages)
    assert "edited and approved" in sent and "1. make x = 5" in sent
    assert "The model's plan" in json.dumps([m["content"] for m in run.iopub])


@pytest.mark.parametrize(("provider", "answer", "decision"), [
    ("openai", json.dumps({"decisions": {}}), "rejected"),  # the page's JSON, nothing accepted
    ("anthropic", "a", "accepted"),  # a word typed on stdin: accept all
])
def test_the_labextensions_cells_give_the_model_an_edit_tool_reviewed_on_stdin(
    fake: FakeLLM, tmp_path: Path, provider: str, answer: str, decision: str
) -> None:
    frontend = {**FRONTEND, "cells": [{"id": "cell-a", "source": "y = 1 / 0",
                                       "error": "ZeroDivisionError: division by zero"}]}
    env = openai_env(fake) if provider == "openai" else anthropic_env(fake)
    kernel = Kernel(env, str(tmp_path))
    try:
        kernel.execute("%load_ext jupyter_ci")
        fake.push(Turn("", tool_calls=[("edit_cell", {"cell_id": "cell-a", "source": "y = 1"})]),
                  Turn("Fixed the division."))
        run = kernel.execute("%ask fix the cell above",
                             {"jupyter_ci_frontend": frontend, "cellId": "ask-1"},
                             answers=[answer])
    finally:
        kernel.close()
    # Each provider's own tool format (OpenAI's functions, Anthropic's input_schema).
    tools = [t.get("name") or t["function"]["name"] for t in fake.requests[0].body["tools"]]
    assert tools == ["run_python", "edit_cell"]
    context = json.dumps(fake.requests[0].messages)
    assert "cell-a" in context and "ZeroDivisionError" in context
    waiting = [d for d in run.comm_data() if d["type"] == "waiting_for_user"]
    assert waiting[0]["kind"] == "edits"
    assert waiting[0]["edits"][0]["old"] == "y = 1 / 0"
    assert waiting[0]["edits"][0]["new"] == "y = 1"
    assert run.prompts == [waiting[0]["question"]]
    end = run.comm_data()[-1]
    assert end["type"] == "ask_end"
    assert [e["decision"] for e in end["edits"]] == [decision]
    # The ask record in the %%ask cell keeps what was proposed and what was decided.
    assert end["record"]["edits"] == [{**waiting[0]["edits"][0], "decision": decision}]
    assert f"{decision} your edit" in json.dumps(fake.requests[1].messages)


def test_standing_instructions_come_from_the_setting_and_agents_files(
    fake: FakeLLM, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / "nb").mkdir(parents=True)
    (project / "AGENTS.md").write_text("Prefer polars.\napi_key = sk-abcdefghijklmnopqrstuv123456")
    (project / "nb" / ".jupyter-ci.md").write_text("Plots in blue.")
    env = {**openai_env(fake), "HOME": str(tmp_path)}
    fake.push(Turn("ok"))
    nb = run_cells(["%config JupyterCI.instructions = 'Answer in French.'",
                    "%ask --show-context hello"], env, project / "nb")
    system = fake.requests[0].messages[0]["content"]
    assert "Answer in French." in system and "Prefer polars." in system
    assert system.index("Prefer polars.") < system.index("Plots in blue.")  # nearest last
    assert "sk-abcdefghijklmnopqrstuv123456" not in system  # redacted like the rest
    assert "Standing instructions" in text_of(nb.cells[2])


def test_headless_the_model_may_propose_edits_which_are_listed_not_applied(
    fake: FakeLLM, tmp_path: Path
) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in
                ["%load_ext jupyter_ci", "total = sum([1, 2]) / 0", "%%ask\nfix the cell above"]]
    target = nb.cells[1].id
    path = tmp_path / "report.ipynb"
    nbformat.write(nb, path)
    fake.push(Turn("", tool_calls=[("edit_cell", {"cell_id": target,
                                                   "source": "total = sum([1, 2])"})]),
              Turn("The division by zero is gone."))
    env = {**openai_env(fake), "JUPYTER_CI_NOTEBOOK": str(path)}
    NotebookClient(nb, allow_errors=True, resources={"metadata": {"path": str(tmp_path)}}
                   ).execute(env=env)
    shown = text_of(nb.cells[2])
    assert "Proposed edits (not applied)" in shown
    assert "-total = sum([1, 2]) / 0" in shown and "+total = sum([1, 2])" in shown
    assert nb.cells[1].source == "total = sum([1, 2]) / 0"
    assert "not applied" in tool_results(fake, 1)[0]
