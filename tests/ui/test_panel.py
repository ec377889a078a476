"""Issue 18 in a real browser: a notebook made in Lab runs headless, the pin leaves the cell
clean, the panel's conversation comes back from the notebook, and the key form checks keys."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
from playwright.sync_api import Browser, expect

from jupyter_ci.kernel.record import pin_of, prompt_hash
from tests.fakellm import FakeLLM, Turn
from tests.nbrun import text_of
from tests.test_headless_pin import runner_env
from tests.ui.lab import WAIT_MS, Lab, Notebook, free_port

LOAD = "%load_ext jupyter_ci"
LOG_STEP = "with open('side.log', 'a') as log:\n    log.write('step ran\\n')"
COUNT = "print(open('side.log').read().count('step ran'))"


def code(src: str, text: str = "") -> Turn:
    return Turn(text, tool_calls=[("run_python", {"code": src})])


def has_class(name: str) -> re.Pattern[str]:
    return re.compile(rf"(^|\s){re.escape(name)}(\s|$)")


def ask_index(nb: Notebook) -> int:
    """Return the index of the notebook's first `%%ask` cell."""
    return int(nb.js("return panel.content.widgets.findIndex("
                     "w => /^%%ask/.test(w.model.sharedModel.getSource()));"))


def wait_ask_done(nb: Notebook, text: str) -> int:
    """Wait until the `%%ask` cell shows `text` and has finished; return its index."""
    expect(nb.root.locator(".jp-OutputArea", has_text=text)).to_have_count(1, timeout=WAIT_MS)
    # Found by its source, not its index: the extension may insert its `%load_ext` cell above
    # it while we wait (a first ask that succeeds), which moves the ask one cell down.
    ask_cell = nb.cells.filter(has=nb.page.locator(".jp-InputArea", has_text="%%ask"))
    expect(ask_cell.first.locator(".jp-InputPrompt")).to_have_text(
        re.compile(r"^\s*\[\d+\]:\s*$"), timeout=WAIT_MS)
    nb.wait_kernel_idle()
    return ask_index(nb)


def loaders(nb: Notebook) -> list[int]:
    """Return the indices of the cells that load the magics."""
    return [i for i in range(nb.cells.count()) if nb.source(i) == LOAD]


def restart_and_run_all(nb: Notebook) -> None:
    """Restart the kernel and run every cell, as Kernel > Restart and Run All does."""
    nb.activate()
    # Not awaited: the command waits for the confirmation dialog clicked below.
    nb.page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-run-all'); }")
    nb.page.locator(".jp-Dialog .jp-mod-accept").click(timeout=WAIT_MS)


# ------------------------------------------------------------ point 4: headless runs


def test_a_notebook_answered_in_lab_runs_headless_with_nbconvert_and_papermill(
    lab: Lab, fake: FakeLLM, tmp_path: Path
) -> None:
    prompt = "append a line to the log"
    fake.push(code(LOG_STEP), Turn("Logged."))
    nb = lab.open_notebook("made-in-lab", [f"%%ask\n{prompt}", COUNT])
    nb.run(0)
    index = wait_ask_done(nb, "Logged.")
    # One cell that loads the magics, above the ask, for runners without the labextension.
    assert loaders(nb) == [0] and index == 1
    assert nb.source(1) == f"%%ask --pin {pin_of(prompt_hash(prompt, None))}\n{prompt}"
    # Reused (no model call): still one such cell.
    nb.run(1)
    nb.wait_cell_done(1)
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("Reusing", timeout=WAIT_MS)
    nb.wait_kernel_idle()
    assert loaders(nb) == [0] and nb.cells.count() == 4
    nb.screenshot("load-cell")
    saved = nb.read_saved()
    assert [c.source for c in saved.cells][::3] == [LOAD, COUNT]
    calls = fake.calls()
    assert calls == 2

    made = tmp_path / "made"
    made.mkdir()
    path = Path(shutil.copy(nb.path, made / "report.ipynb"))
    env = runner_env(fake)
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
         str(path.relative_to(tmp_path)), "--output", "by-nbconvert"],
        cwd=tmp_path, env=env, timeout=180, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    out = nbformat.read(made / "by-nbconvert.ipynb", as_version=4)
    assert "Not asked again" in text_of(out.cells[1])
    assert text_of(out.cells[3]).strip() == "1"

    start = tmp_path / "start"
    start.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "papermill", str(path), str(tmp_path / "by-papermill.ipynb"),
         "--kernel", "python3", "--log-level", "WARNING"],
        cwd=start, env=env, timeout=180, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    out = nbformat.read(tmp_path / "by-papermill.ipynb", as_version=4)
    assert "Not asked again" in text_of(out.cells[1])
    assert text_of(out.cells[3]).strip() == "1"
    assert (start / "side.log").read_text().splitlines() == ["step ran"]
    assert fake.calls() == calls


# ------------------------------------------------------------- point 5: the pin is no edit


def test_writing_the_pin_does_not_mark_the_ask_cell_edited(lab: Lab, fake: FakeLLM) -> None:
    fake.push(code("print('pinned')"), Turn("Pinned."))
    nb = lab.open_notebook("pin-clean", ["%%ask\nprint pinned"])
    nb.run(0)
    index = wait_ask_done(nb, "Pinned.")
    assert nb.source(index).startswith("%%ask --pin ")
    ask = nb.cell(index)
    expect(ask).to_have_class(has_class("jp-ci-ask"))
    expect(ask).not_to_have_class(has_class("jp-mod-dirty"))
    assert nb.js(f"return panel.content.widgets[{index}].model.isDirty;") is False
    nb.screenshot("pin-not-dirty")
    # An edit of the user's own is still one.
    nb.set_source(index, nb.source(index) + " now")
    expect(ask).to_have_class(has_class("jp-mod-dirty"), timeout=WAIT_MS)


# ------------------------------------------------- point 5: the panel's conversation


def test_a_fresh_browser_shows_the_asks_of_an_answered_notebook(
    lab: Lab, fake: FakeLLM, browser: Browser
) -> None:
    answer = "Made **fresh**: <b>three</b>."
    fake.push(code("fresh = 3\nprint('fresh', fresh)"), Turn(answer))
    nb = lab.open_notebook("fresh-browser", ["%%ask\nmake fresh", "x = 1"])
    nb.run(0)
    wait_ask_done(nb, "Made")
    nb.save()
    # Another browser: nothing in its local storage.
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    try:
        other = Lab(context.new_page(), lab.server, f"{lab.workspace}-fresh")
        other.goto(nb.path.relative_to(lab.server.root).as_posix())
        kept = other.page.evaluate("() => Object.keys(window.localStorage)")
        assert not [k for k in kept if k.startswith("jupyter-ci:")]
        other.reload_target(nb.path)
        other.panel.open()
        entry = other.panel.part("ask")
        expect(entry).to_have_count(1, timeout=WAIT_MS)
        expect(entry).to_have_attribute("data-jupyter-ci-status", "done")
        expect(entry.locator(".jp-ci-prompt-text")).to_have_text("make fresh")
        expect(entry.locator('[data-jupyter-ci="step"]')).to_have_count(1)
        # Read from the notebook, which this browser cannot verify: plain text, never HTML.
        expect(entry.locator('[data-jupyter-ci="answer-text"]')).to_have_text(answer)
        expect(entry.locator("strong, b")).to_have_count(0)
        other.screenshot("conversation-from-records")
    finally:
        context.close()


def test_restart_and_run_all_twice_leaves_one_entry_per_ask(lab: Lab, fake: FakeLLM) -> None:
    fake.push(code("base = 20\nprint('base', base)"), Turn("Base is 20."))
    nb = lab.open_notebook("rerun-panel", ["%%ask\nset base", "print('double', base * 2)"])
    lab.panel.open()
    nb.run(0)
    wait_ask_done(nb, "Base is 20.")
    entries = lab.panel.part("ask")
    expect(entries).to_have_count(1, timeout=WAIT_MS)
    for _ in range(2):
        nb.command("notebook:clear-all-cell-outputs")
        restart_and_run_all(nb)
        expect(nb.cells.last.locator(".jp-OutputArea")).to_have_text(
            re.compile(r"^\s*double 40\s*$"), timeout=WAIT_MS)
        nb.wait_kernel_idle()
        expect(entries).to_have_count(1)
    expect(entries).to_have_attribute("data-jupyter-ci-status", "done")
    expect(entries.locator(".jp-ci-ask-status")).to_have_text("reused")
    assert fake.calls() == 2
    lab.screenshot("rerun-one-entry")


# ------------------------------------------------------------ point 5: the key form


WRONG = "sk-wrong-KEY-in-the-form-1357"
RIGHT = "sk-right-KEY-in-the-form-2468"


def test_the_key_form_says_saved_and_checks_the_base_url_and_key(
    bare_lab: Lab, fake: FakeLLM
) -> None:
    lab = bare_lab
    responses = lab.response_bodies()
    lab.open_notebook("key-form", ["x = 1"])
    lab.panel.open()
    status = lab.panel.part("key-status")

    def save(key: str, url: str) -> None:
        lab.panel.part("key-input").fill(key)
        lab.panel.part("key-url").fill(url)
        lab.panel.part("key-save").click()
        expect(lab.panel.part("key-input")).to_have_value("")

    # Nothing listens there: named as unreachable, by the URL typed, not the broker's.
    nowhere = f"http://127.0.0.1:{free_port()}/v1"
    save(WRONG, nowhere)
    expect(status).to_contain_text(f"could not reach {nowhere}", timeout=WAIT_MS)
    # Shown, though the provider now counts as configured (the form stays open to say so).
    expect(status).to_be_visible()
    expect(status).to_have_attribute("data-jupyter-ci-failed", "true")
    assert "broker" not in status.inner_text() and str(lab.server.port) not in status.inner_text()
    lab.screenshot("key-form-unreachable")
    # The provider answers 401: the key is wrong, and it is not kept.
    fake.api_key = RIGHT
    save(WRONG, fake.openai_base_url)
    expect(status).to_contain_text("refused this key", timeout=WAIT_MS)
    expect(status).to_contain_text("not saved")
    expect(status).to_have_attribute("data-jupyter-ci-failed", "true")
    lab.screenshot("key-form-wrong-key")
    # The right key: saved, and checked.
    save(RIGHT, fake.openai_base_url)
    expect(status).to_contain_text("OpenAI key saved", timeout=WAIT_MS)
    expect(status).to_contain_text(f"{fake.openai_base_url} answered")
    expect(status).to_have_attribute("data-jupyter-ci-failed", "false")
    expect(lab.panel.message("no-model")).to_have_count(0)
    lab.screenshot("key-form-checked")
    for key in (WRONG, RIGHT):
        assert key not in lab.page.content()
        assert not [r for r in responses if key in r]
        assert key not in lab.server.log.read_text()
