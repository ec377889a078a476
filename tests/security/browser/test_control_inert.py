"""What approval and review show is text, never live HTML (issue 23 against a hostile model).

A model steered by what it read proposes a plan, a step and an edit of the user's cell that
carry HTML with event handlers and script. The page shows each where the user decides (the
plan box, the step's cell, the diff in the target cell, the panel): each mark sets
`window.__xss`, which must stay undefined, and the hostile text must be there as text.
"""

from __future__ import annotations

from playwright.sync_api import expect

from tests.fakellm import FakeLLM, Turn
from tests.ui.lab import WAIT_MS, Lab, Notebook

LOAD = "%load_ext jupyter_ci"


def mark(name: str) -> str:
    """JavaScript that records `name` in window.__xss if it ever runs."""
    return f"(window.__xss=window.__xss||[]).push(`{name}`)"


HOSTILE = (f'<img src=x onerror="{mark("img")}"><script>{mark("script")}</script>'
           f'<svg onload="{mark("svg")}"></svg>')


def xss(nb: Notebook) -> object:
    """Return what ran (None when nothing did), after giving handlers time to fire."""
    nb.page.wait_for_timeout(800)
    return nb.page.evaluate("window.__xss")


def test_a_hostile_plan_is_shown_as_text(lab: Lab, fake: FakeLLM) -> None:
    plan = f"1. Load the data {HOSTILE}\n2. Plot it."
    fake.push(Turn(plan))
    nb = lab.open_notebook("inert-plan", [LOAD, "%%ask --approve plan\nplot the data"])
    lab.panel.open()
    nb.run(1)
    shown = nb.cell(1).locator('[data-jupyter-ci="approval"][data-jupyter-ci-kind="plan"]')
    expect(shown).to_be_visible(timeout=WAIT_MS)
    expect(shown.locator('[data-jupyter-ci="plan"]')).to_have_value(plan)
    assert nb.page.locator("img[src='x']").count() == 0
    assert xss(nb) is None
    shown.locator('[data-jupyter-ci="approve-stop"]').click()
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("AskStopped", timeout=WAIT_MS)
    assert fake.calls() == 1  # stopped at its plan: nothing ran, the model was not called again
    assert xss(nb) is None


def test_a_hostile_step_waits_as_text(lab: Lab, fake: FakeLLM) -> None:
    step = f"note = \'\'\'{HOSTILE}\'\'\'"
    fake.push(Turn("", tool_calls=[("run_python", {"code": step})]))
    nb = lab.open_notebook("inert-step", [LOAD, "%%ask --approve each\nmake a note"])
    lab.panel.open()
    nb.run(1)
    pending = nb.cell(2).locator('[data-jupyter-ci="approval"][data-jupyter-ci-kind="step"]')
    expect(pending).to_be_visible(timeout=WAIT_MS)
    assert nb.source(2) == step  # the code as text in its (not yet run) cell
    expect(lab.panel.part("approval")).to_contain_text("<img src=x", timeout=WAIT_MS)
    assert nb.page.locator("img[src='x']").count() == 0
    assert xss(nb) is None
    pending.locator('[data-jupyter-ci="approve-stop"]').click()
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("AskStopped", timeout=WAIT_MS)
    assert xss(nb) is None


def test_a_hostile_edit_is_shown_as_a_text_diff(lab: Lab, fake: FakeLLM) -> None:
    nb = lab.open_notebook("inert-edit", [LOAD, "x = 1", "%%ask\nchange the cell above"])
    nb.run(0)
    nb.wait_cell_done(0)
    target = str(nb.js("return panel.content.widgets[1].model.id;"))
    fake.push(Turn("", tool_calls=[("edit_cell", {"cell_id": target,
                                                  "source": f"x = 1  # {HOSTILE}"})]),
              Turn("Left as it was."))
    lab.panel.open()
    nb.run(2)
    box = nb.cell(1).locator('[data-jupyter-ci="edit-review"]')
    expect(box.locator('[data-jupyter-ci-diff="added"]')).to_have_text(
        [f"+ x = 1  # {HOSTILE}"], timeout=WAIT_MS)
    expect(lab.panel.part("panel-review")).to_be_visible(timeout=WAIT_MS)
    assert nb.page.locator("img[src='x']").count() == 0
    assert xss(nb) is None
    box.locator('[data-jupyter-ci="edit-reject"]').click()
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("Left as it was.",
                                                                 timeout=WAIT_MS)
    assert nb.source(1) == "x = 1"
    assert xss(nb) is None
