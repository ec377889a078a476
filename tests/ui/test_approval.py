"""Issue 23 in a real browser: approve each step (Run, Edit, Skip, Stop), approve a plan, and
"Fix" a cell's error with a new %%ask cell."""

from __future__ import annotations

import json
import re

from playwright.sync_api import Locator, expect

from tests.fakellm import FakeLLM, Turn
from tests.ui.lab import WAIT_MS, Lab, Notebook

LOAD = "%load_ext jupyter_ci"


def code(src: str, text: str = "") -> Turn:
    return Turn(text, tool_calls=[("run_python", {"code": src})])


def wait_answer(nb: Notebook, index: int, text: str) -> None:
    """Wait until the %%ask cell at `index` shows `text` and has finished."""
    expect(nb.cell(index).locator(".jp-OutputArea")).to_contain_text(text, timeout=WAIT_MS)
    nb.wait_cell_done(index)


def bar(nb: Notebook, index: int, kind: str = "step") -> Locator:
    """Return the approval bar of the cell at `index`, once it shows."""
    found = nb.cell(index).locator(f'[data-jupyter-ci="approval"][data-jupyter-ci-kind="{kind}"]')
    expect(found).to_be_visible(timeout=WAIT_MS)
    return found


def told(fake: FakeLLM, index: int) -> str:
    """Return what the model was sent in its request `index`, as JSON text."""
    return json.dumps(fake.requests[index].messages)


def run_check(nb: Notebook, index: int, expected: str) -> None:
    """Run the cell at `index` and wait until its output is exactly `expected`."""
    nb.run(index)
    expect(nb.cell(index).locator(".jp-OutputArea")).to_have_text(
        re.compile(rf"^\s*{re.escape(expected)}\s*$"), timeout=WAIT_MS)


def test_each_step_waits_and_runs_when_approved(lab: Lab, fake: FakeLLM) -> None:
    step = "x = 1\nprint('x is', x)"
    fake.push(code(step), Turn("Made x."))
    nb = lab.open_notebook("approve-run", [LOAD, "%%ask --approve each\nmake x"])
    lab.panel.open()
    nb.run(1)
    pending = bar(nb, 2)
    # The step's code is in the cell it will run in; nothing ran yet.
    assert nb.source(2) == step
    expect(nb.cell(2).locator(".jp-OutputArea-output")).to_have_count(0)
    # The page answers the kernel's question: its Stdin box is not shown.
    expect(nb.cell(1).locator(".jp-Stdin-input")).to_be_hidden()
    expect(lab.panel.part("approval")).to_be_visible()
    expect(lab.panel.part("clock")).to_contain_text("waiting for your approval")
    nb.screenshot("approval-step")
    pending.locator('[data-jupyter-ci="approve-run"]').click()
    wait_answer(nb, 1, "Made x.")
    nb.wait_cell_count(3)
    expect(nb.cell(2).locator(".jp-OutputArea")).to_have_text(re.compile(r"^\s*x is 1\s*$"))
    expect(nb.root.locator('[data-jupyter-ci="approval"]')).to_have_count(0)
    expect(lab.panel.part("approval")).to_have_count(0)
    assert nb.source(2) == step
    assert "edited your code" not in told(fake, 1)
    assert fake.calls() == 2


def test_an_edited_step_runs_as_edited_and_the_model_is_told(lab: Lab, fake: FakeLLM) -> None:
    fake.push(code("y = 1\nprint('y is', y)"), Turn("Made y."))
    nb = lab.open_notebook("approve-edit", [LOAD, "%%ask --approve each\nmake y",
                                            "print('check', y)"])
    nb.run(1)
    bar(nb, 2).locator('[data-jupyter-ci="approve-edit"]').click()
    edited = "y = 41 + 1\nprint('y is', y)"
    nb.set_source(2, edited)
    run = bar(nb, 2).locator('[data-jupyter-ci="approve-run"]')
    expect(run).to_have_text("Run edited code")
    run.click()
    wait_answer(nb, 1, "Made y.")
    nb.wait_cell_count(4)
    # What ran is the edited code, in the kernel too.
    expect(nb.cell(2).locator(".jp-OutputArea")).to_have_text(re.compile(r"^\s*y is 42\s*$"))
    assert nb.source(2) == edited
    run_check(nb, 3, "check 42")
    sent = told(fake, 1)
    assert "edited your code" in sent and "y = 41 + 1" in sent
    saved = nb.read_saved()
    assert saved.cells[2].metadata["jupyter_ci"]["attempts"][0]["code"] == edited


def test_a_skipped_step_does_not_run_and_the_model_is_told(lab: Lab, fake: FakeLLM) -> None:
    fake.push(code("z = 1\nprint('z is', z)"), Turn("Skipped making z."))
    nb = lab.open_notebook("approve-skip", [LOAD, "%%ask --approve each\nmake z",
                                            "print('z' in globals())"])
    nb.run(1)
    bar(nb, 2).locator('[data-jupyter-ci="approve-skip"]').click()
    wait_answer(nb, 1, "Skipped making z.")
    # The pending cell went with the step: no generated cell, nothing ran.
    nb.wait_cell_count(3)
    expect(nb.generated()).to_have_count(0)
    assert nb.source(2) == "print('z' in globals())"
    run_check(nb, 2, "False")
    assert "skipped step 1" in told(fake, 1)
    assert fake.calls() == 2


def test_stop_ends_the_ask_before_its_step_runs(lab: Lab, fake: FakeLLM) -> None:
    fake.push(code("w = 1\nprint('w is', w)"), Turn("Never sent."))
    nb = lab.open_notebook("approve-stop", [LOAD, "%%ask --approve each\nmake w",
                                            "print('w' in globals())"])
    lab.panel.open()
    nb.run(1)
    bar(nb, 2)
    # The panel has the same buttons.
    lab.panel.part("approval-stop").click()
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("stopped", timeout=WAIT_MS)
    nb.wait_cell_done(1)
    nb.wait_cell_count(3)
    expect(nb.generated()).to_have_count(0)
    expect(lab.panel.part("ask")).to_have_attribute("data-jupyter-ci-status", "interrupted",
                                                    timeout=WAIT_MS)
    run_check(nb, 2, "False")
    assert fake.calls() == 1


def test_a_plan_is_shown_edited_and_approved(lab: Lab, fake: FakeLLM) -> None:
    plan = "1. Set v to 5.\n2. Print it."
    fake.push(Turn(plan), code("v = 5\nprint('v is', v)"), Turn("v is 5."))
    nb = lab.open_notebook("approve-plan", [LOAD, "%%ask --approve plan\nmake v"])
    nb.run(1)
    shown = bar(nb, 1, "plan")
    box = shown.locator('[data-jupyter-ci="plan"]')
    expect(box).to_have_value(plan)
    nb.screenshot("approval-plan")
    box.click()
    box.press("End")
    box.press("ControlOrMeta+End")
    box.type("\n3. Say it is done.")
    shown.locator('[data-jupyter-ci="approve-plan"]').click()
    wait_answer(nb, 1, "v is 5.")
    nb.wait_cell_count(3)
    expect(nb.cell(2).locator(".jp-OutputArea")).to_have_text(re.compile(r"^\s*v is 5\s*$"))
    sent = told(fake, 1)
    assert "edited and approved" in sent and "3. Say it is done." in sent
    assert fake.calls() == 3


def test_fix_asks_below_a_cell_with_an_error(lab: Lab, fake: FakeLLM) -> None:
    fake.push(Turn("It divides by zero."), Turn("Still dividing by zero."))
    nb = lab.open_notebook("fix", [LOAD, "ratio = 1 / 0"])
    nb.run(1)
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("ZeroDivisionError",
                                                                 timeout=WAIT_MS)
    nb.select(1)
    cell_id = str(nb.js("return panel.content.widgets[1].model.id;"))
    fix = nb.cell(1).locator('.jp-cell-toolbar [data-command="jupyter-ci:fix-cell"]')
    expect(fix).to_be_visible(timeout=WAIT_MS)
    nb.screenshot("fix-toolbar")
    fix.click()
    nb.wait_cell_count(3)
    wait_answer(nb, 2, "It divides by zero.")
    # (The answered ask got its pin in the first line.)
    magic, prompt = nb.source(2).split("\n")
    assert magic.startswith("%%ask") and "-m" not in magic
    assert prompt == f"Fix the error in the cell above (cell {cell_id})."
    # The model was sent the notebook's cells with their errors, and may edit them.
    request = fake.requests[0].body
    assert "edit_cell" in json.dumps(request.get("tools", []))
    sent = told(fake, 0)
    assert cell_id in sent and "ZeroDivisionError: division by zero" in sent
    # The panel's Fix button does the same for the active cell; none for a cell without error.
    lab.panel.open()
    nb.select(0)
    expect(lab.panel.part("fix")).to_have_count(0)
    nb.select(1)
    lab.panel.part("fix").click()
    nb.wait_cell_count(4)
    wait_answer(nb, 2, "Still dividing by zero.")
    assert nb.source(2).endswith(f"(cell {cell_id}).")
    assert nb.source(3).endswith(f"(cell {cell_id}).")


def test_first_waits_once_and_a_fix_waits_in_its_own_cell(lab: Lab, fake: FakeLLM) -> None:
    # `each`: a fix of a failed step waits too, shown in the step's own cell.
    fixed = "q = 3\nprint('q is', q)"
    fake.push(code("print(q)"), code(fixed), Turn("Fixed q."))
    nb = lab.open_notebook("approve-fix", [LOAD, "%%ask --approve each\nprint q"])
    nb.run(1)
    bar(nb, 2).locator('[data-jupyter-ci="approve-run"]').click()
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("NameError", timeout=WAIT_MS)
    fix = nb.cell(2).locator('[data-jupyter-ci="approval"]')
    expect(fix).to_contain_text("attempt 2", timeout=WAIT_MS)
    assert nb.source(2) == fixed
    fix.locator('[data-jupyter-ci="approve-run"]').click()
    wait_answer(nb, 1, "Fixed q.")
    nb.wait_cell_count(3)
    expect(nb.cell(2).locator(".jp-OutputArea")).to_have_text(re.compile(r"^\s*q is 3\s*$"))
    # `first`: the first step waits, the next ones run on.
    fake.push(code("r = 1\nprint('r is', r)"), code("print('r again', r + 1)"), Turn("Two."))
    nb.set_source(1, "%%ask --approve first\nprint r twice")
    nb.run(1)
    bar(nb, 2).locator('[data-jupyter-ci="approve-run"]').click()
    wait_answer(nb, 1, "Two.")
    nb.wait_cell_count(4)
    expect(nb.cell(3).locator(".jp-OutputArea")).to_contain_text("r again 2")
    expect(nb.root.locator('[data-jupyter-ci="approval"]')).to_have_count(0)
