"""Issue 18 in a real browser: the notebook an ask leaves runs after a restart, and Run All
is not warned about names the asks above it define."""

from __future__ import annotations

import re
import shutil

from playwright.sync_api import expect

from tests.fakellm import FakeLLM, Turn
from tests.ui.lab import WAIT_MS, Lab, Notebook, read_notebook_file
from tests.ui.test_lab import EXAMPLES, code, wait_answer

# Notebooks start with the cell JupyterLab adds when an ask first succeeds without it.
LOAD = "%load_ext jupyter_ci"
FAILS = "o = {'a': 1}\nprint(o['b'])"
LEANS = "print('b is', o.get('b', 0))"
OWN = "o = {'a': 1}\nprint('b is', o.get('b', 0))"


def restart_and_run_all(nb: Notebook) -> None:
    """Restart the kernel and run every cell, as the menu does (confirming its dialog)."""
    nb.activate()
    # Not awaited: the command waits for the confirmation dialog clicked below.
    nb.page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-run-all'); }")
    nb.page.locator(".jp-Dialog .jp-mod-accept").click(timeout=WAIT_MS)


def ask_cells(nb: Notebook) -> list[int]:
    """Return the indices of the %%ask cells the extension marked."""
    return [i for i in range(nb.cells.count())
            if "jp-ci-ask" in (nb.cell(i).get_attribute("class") or "")]


def test_a_fix_leaning_on_its_failed_attempt_ends_self_contained_and_restart_run_all_passes(
    lab: Lab, fake: FakeLLM
) -> None:
    fake.push(code(FAILS), code(LEANS), Turn("b is 0."), code(OWN), Turn("There is no b."))
    nb = lab.open_notebook("record-fix", [LOAD, "%%ask\nhow many b?", "print('after', o)"])
    nb.run(1)
    wait_answer(nb, 1, "There is no b.")
    nb.wait_cell_count(4)
    nb.wait_cell_done(2)
    # The model was told why, and its self-contained step replaced the leaning one.
    assert "Step 1 reads `o`" in fake.requests[3].messages[-1]["content"]
    log = nb.cell(1).locator(".jp-OutputArea")
    expect(log).to_contain_text("Asking for a self-contained step")
    expect(log).to_contain_text("Step 1: made self-contained")
    assert nb.source(2) == OWN
    attempts = nb.model_json()["cells"][2]["metadata"]["jupyter_ci"]["attempts"]
    assert [(a["attempt"], a["status"]) for a in attempts] == [(1, "error"), (2, "ok"),
                                                               (3, "ok")]
    calls = fake.calls()
    restart_and_run_all(nb)
    expect(nb.cell(3).locator(".jp-OutputArea")).to_have_text(
        re.compile(r"^\s*after \{'a': 1\}\s*$"), timeout=WAIT_MS)
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("Reusing the earlier answer")
    expect(nb.cell(2).locator(".jp-OutputArea")).to_have_text(re.compile(r"^\s*b is 0\s*$"))
    expect(nb.root.locator('[data-mime-type="application/vnd.jupyter.stderr"]')).to_have_count(0)
    assert fake.calls() == calls
    nb.screenshot("record-self-contained")


def test_run_all_of_the_example_warns_of_no_name_the_asks_above_define(bare_lab: Lab) -> None:
    lab = bare_lab
    root = lab.server.root
    # The session's lab root is shared: another test may have copied (and run) them.
    shutil.rmtree(root / "examples", ignore_errors=True)
    shutil.copytree(EXAMPLES, root / "examples")
    lab.goto("examples/getting-started.ipynb")
    nb = lab.reload_target(root / "examples" / "getting-started.ipynb")
    nb.wait_kernel_idle()
    asks = len([c for c in read_notebook_file(nb.path).cells
                if re.match(r"\s*%%?ask\b", c.source)])
    nb.command("notebook:run-all-cells")
    expect(nb.root.locator(".jp-Cell.jp-ci-ask")).to_have_count(asks, timeout=WAIT_MS)
    for index in ask_cells(nb):
        nb.wait_cell_done(index)
        output = nb.cell(index).locator(".jp-OutputArea")
        expect(output).to_contain_text("Done", timeout=WAIT_MS)
        expect(output).not_to_contain_text("restart")
    lab.screenshot("example-run-all-no-warning")


def test_run_all_still_reports_a_name_only_the_kernel_has(lab: Lab, fake: FakeLLM) -> None:
    nb = lab.open_notebook("record-run-all", [
        LOAD, "bonus = 10", "%%ask\nthe monthly total", "%%ask\ndouble it, plus the bonus"])
    nb.run(1)
    nb.wait_cell_done(1)
    # The cell that made `bonus` is deleted: only the kernel has it now.
    nb.js("panel.content.model.sharedModel.deleteCell(1);")
    nb.wait_cell_count(3)
    fake.push(code("monthly = 7\nprint('monthly', monthly)"), Turn("Seven."),
              code("print('doubled', monthly * 2 + bonus)"), Turn("24."),
              code("bonus = 10\nprint('doubled', monthly * 2 + bonus)"), Turn("24 in all."))
    nb.command("notebook:run-all-cells")
    wait_answer(nb, 3, "24 in all.")
    told = fake.requests[4].messages[-1]["content"]
    assert "Step 1 reads `bonus`" in told and "monthly" not in told
    output = nb.cell(3).locator(".jp-OutputArea")
    expect(output).to_contain_text("it reads bonus, which no cell above it")
    expect(output).not_to_contain_text("monthly")
    nb.wait_cell_count(5)
    assert nb.source(4) == "bonus = 10\nprint('doubled', monthly * 2 + bonus)"
    nb.screenshot("record-run-all-missing-name")
