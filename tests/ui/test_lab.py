"""Issue 3 in a real browser: %%ask steps become cells, re-runs reuse, the panel, Stop."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.fakellm import FakeLLM, Turn
from tests.ui.lab import WAIT_MS, Lab, Notebook


def code(src: str, text: str = "") -> Turn:
    return Turn(text, tool_calls=[("run_python", {"code": src})])


def has_class(name: str) -> re.Pattern[str]:
    return re.compile(rf"(^|\s){re.escape(name)}(\s|$)")


def wait_answer(nb: Notebook, index: int, text: str) -> None:
    """Wait until the %%ask cell at `index` shows `text` and has finished."""
    expect(nb.cell(index).locator(".jp-OutputArea")).to_contain_text(text, timeout=WAIT_MS)
    nb.wait_cell_done(index)


def test_three_steps_become_three_cells_below_the_ask(lab: Lab, fake: FakeLLM) -> None:
    fake.push(
        code("import pandas as pd\n"
             "df = pd.DataFrame({'region': list('NSEW'), 'revenue': [4, 2, 5, 1]})\ndf",
             "Loading the data."),
        code("import matplotlib.pyplot as plt\ndf.plot.bar(x='region', y='revenue')\nplt.show()"),
        code("best = df.loc[df.revenue.idxmax(), 'region']\nprint('best region:', best)"),
        Turn("**E** has the most revenue."),
    )
    nb = lab.open_notebook("three", ["%%ask\nplot revenue by region", "print('later', best)"])
    nb.run(0)
    wait_answer(nb, 0, "E has the most revenue.")
    nb.wait_cell_count(5)
    expect(nb.generated()).to_have_count(3)
    for index in (1, 2, 3):
        expect(nb.cell(index)).to_have_class(has_class("jp-ci-generated"))
        expect(nb.cell(index)).to_have_attribute("data-jupyter-ci-step", str(index))
        nb.wait_cell_done(index)
    expect(nb.cell(1).locator("table.dataframe")).to_be_visible()
    expect(nb.cell(2).locator(".jp-OutputArea-output img")).to_be_visible()
    expect(nb.cell(3).locator(".jp-OutputArea")).to_contain_text("best region: E")
    counts = [nb.execution_count(i) for i in range(4)]
    assert all(isinstance(c, int) for c in counts) and counts == sorted(counts), counts
    # The %%ask cell keeps a progress log and the answer; the steps' outputs are not repeated.
    ask = nb.cell(0)
    expect(ask.locator(".jp-OutputArea")).to_contain_text("Step 3: done")
    assert ask.locator("table.dataframe").count() == 0 and ask.locator("img").count() == 0
    assert "best region" not in nb.output_text(0)
    expect(ask.locator(".jp-RenderedMarkdown strong", has_text="E")).to_be_visible()
    nb.screenshot("three-steps")
    nb.run(4)
    expect(nb.cell(4).locator(".jp-OutputArea")).to_have_text(re.compile(r"later E"),
                                                              timeout=WAIT_MS)
    assert fake.calls() == 4


def test_a_fixed_error_leaves_one_clean_cell(lab: Lab, fake: FakeLLM) -> None:
    fake.push(code("print(undefined_thing)"),
              code("undefined_thing = 7\nprint('fixed', undefined_thing)"), Turn("Fixed."))
    nb = lab.open_notebook("fixed", ["%%ask\nprint the thing"])
    nb.run(0)
    wait_answer(nb, 0, "Fixed.")
    nb.wait_cell_count(2)
    expect(nb.cell(1).locator(".jp-OutputArea")).to_have_text(re.compile(r"^\s*fixed 7\s*$"))
    assert "undefined_thing = 7" in nb.source(1)
    saved = nb.read_saved()
    generated = saved.cells[1]
    assert [o["output_type"] for o in generated.outputs] == ["stream"]
    attempts = generated.metadata["jupyter_ci"]["attempts"]
    assert [(a["status"], a["ename"]) for a in attempts] == [("error", "NameError"), ("ok", None)]
    assert attempts[0]["code"] == "print(undefined_thing)"
    record = saved.cells[0].metadata["jupyter_ci"]
    assert record["status"] == "done" and record["steps"] == 1
    assert generated.metadata["jupyter_ci"]["ask_id"] == record["ask_id"]
    nb.screenshot("fixed-error")


def test_restart_and_run_all_reuses_the_answer(lab: Lab, fake: FakeLLM) -> None:
    fake.push(code("base = 20\nprint('base', base)"), Turn("Base is 20."))
    nb = lab.open_notebook("rerun", ["%%ask\nset base", "print('double', base * 2)"])
    nb.run(0)
    wait_answer(nb, 0, "Base is 20.")
    nb.wait_cell_count(3)
    calls = fake.calls()
    nb.activate()
    # Not awaited: the command waits for the confirmation dialog clicked below.
    nb.page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-run-all'); }")
    nb.page.locator(".jp-Dialog .jp-mod-accept").click(timeout=WAIT_MS)
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("double 40", timeout=WAIT_MS)
    expect(nb.cell(0).locator(".jp-OutputArea")).to_contain_text("Reusing the earlier answer")
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("base 20")
    assert [nb.execution_count(i) for i in range(3)] == [1, 2, 3]
    nb.wait_cell_count(3)
    assert fake.calls() == calls
    nb.screenshot("restart-run-all")


def test_refresh_and_an_edited_prompt_ask_again_and_replace_the_cells(
    lab: Lab, fake: FakeLLM
) -> None:
    fake.push(code("v = 1\nprint('v is', v)"), Turn("One."))
    nb = lab.open_notebook("refresh", ["%%ask\nmake v", "print('after', v)"])
    nb.run(0)
    wait_answer(nb, 0, "One.")
    nb.wait_cell_count(3)
    first_id = nb.cell(1).get_attribute("data-jupyter-ci-ask-id")
    for source, value, answer in (("%%ask --refresh\nmake v", 2, "Two."),
                                  ("%%ask\nmake v three", 3, "Three.")):
        fake.push(code(f"v = {value}\nprint('v is', v)"), Turn(answer))
        nb.set_source(0, source)
        nb.run(0)
        wait_answer(nb, 0, answer)
        expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text(f"v is {value}")
        nb.wait_cell_count(3)
        expect(nb.generated()).to_have_count(1)
    assert nb.cell(1).get_attribute("data-jupyter-ci-ask-id") != first_id
    assert fake.calls() == 6


def test_asking_from_the_panel(lab: Lab, fake: FakeLLM) -> None:
    fake.push(code("from_panel = 5\nprint('panel made', from_panel)", "On it."),
              Turn("Made `from_panel` from the panel."))
    nb = lab.open_notebook("panel", ["start = 0"])
    nb.select(0)
    lab.panel.open()
    lab.panel.ask("make from_panel")
    nb.wait_cell_count(3)
    assert nb.source(1) == "%%ask\nmake from_panel"
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("panel made 5",
                                                                 timeout=WAIT_MS)
    wait_answer(nb, 1, "from the panel.")
    entry = lab.panel.part("ask").last
    expect(entry).to_have_attribute("data-jupyter-ci-status", "done", timeout=WAIT_MS)
    expect(entry).to_contain_text("make from_panel")
    expect(entry.locator('[data-jupyter-ci="step"]')).to_have_count(1)
    expect(entry.locator('[data-jupyter-ci="answer"]')).to_contain_text("from the panel.")
    nb.screenshot("panel-ask")


def test_stop_interrupts_a_long_step_and_keeps_its_cell(lab: Lab, fake: FakeLLM) -> None:
    fake.push(code("import time\nprint('sleeping', flush=True)\ntime.sleep(60)"))
    nb = lab.open_notebook("stop", ["%%ask\nsleep a while", "print('alive')"])
    lab.panel.open()
    nb.run(0)
    nb.wait_cell_count(3)
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("sleeping", timeout=WAIT_MS)
    lab.panel.part("stop").click()
    expect(nb.cell(1)).to_have_class(has_class("jp-ci-interrupted"), timeout=20_000)
    expect(nb.cell(0).locator(".jp-OutputArea")).to_contain_text("AskInterrupted")
    expect(lab.panel.part("ask").last).to_have_attribute("data-jupyter-ci-status",
                                                         "interrupted")
    nb.run(2)
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("alive", timeout=WAIT_MS)
    nb.screenshot("stopped")


def test_the_panel_says_when_no_notebook_is_open(lab: Lab) -> None:
    lab.goto()
    lab.panel.open()
    expect(lab.panel.message("no-notebook")).to_be_visible(timeout=WAIT_MS)
    expect(lab.panel.part("send")).to_be_disabled()


def test_each_ask_goes_to_its_own_notebook(lab: Lab, fake: FakeLLM) -> None:
    fake.push(code("in_b = 1\nprint('b step')"), Turn("B done."))
    first = lab.open_notebook("two-a", ["a = 1"])
    second = lab.open_notebook("two-b", ["%%ask\nonly in b"])
    second.run(0)
    wait_answer(second, 0, "B done.")
    second.wait_cell_count(2)
    first.activate()
    first.wait_cell_count(1)
    expect(first.generated()).to_have_count(0)
    assert first.model_json()["cells"][0]["source"] == "a = 1"
