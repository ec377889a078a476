"""Model-written output never runs script in JupyterLab (issue 17, point 1).

The model's code is steered by what it read: each test makes a step output what such code
would (HTML with an event handler or a script, JavaScript, an SVG with script, Markdown with
HTML) and checks that nothing ran, in the generated cell, in the `%%ask` cell, after a reload
and after Restart & Run All. Each mark sets `window.__xss`: it must stay undefined.
"""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.fakellm import FakeLLM, Turn
from tests.ui.lab import WAIT_MS, Lab, Notebook

# The cell JupyterLab adds to a notebook when an ask first succeeds in it (tests/ui/test_panel.py).
LOAD = "%load_ext jupyter_ci"


def mark(name: str) -> str:
    """JavaScript that records `name` in window.__xss if it ever runs."""
    return f"(window.__xss=window.__xss||[]).push(`{name}`)"


# What hostile code in a step displays: every way a Jupyter output can carry script.
HOSTILE_STEP = f"""\
from IPython.display import HTML, Javascript, Markdown, SVG, display
display(HTML('<img src=x onerror="{mark('html-onerror')}">'))
display(HTML('<script>{mark('html-script')}</script>'))
display(Javascript("{mark('javascript')}"))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" width="24" height="24" '
            'onload="{mark('svg-onload')}"><script>{mark('svg-script')}</script>'
            '<rect width="24" height="24" fill="teal"/></svg>'))
display(Markdown('<img src=x onerror="{mark('markdown')}">'))
print("hostile step done")
"""


def code(src: str) -> Turn:
    return Turn("", tool_calls=[("run_python", {"code": src})])


def xss(nb: Notebook) -> object:
    """Return what ran (None when nothing did), after giving handlers time to fire."""
    nb.page.wait_for_timeout(800)
    return nb.page.evaluate("window.__xss")


def trusted(nb: Notebook, index: int) -> bool:
    """Return whether JupyterLab holds the cell at `index` as trusted."""
    return bool(nb.js(f"return panel.content.widgets[{index}].model.trusted;"))


def wait_step_outputs(nb: Notebook, index: int) -> None:
    """Wait until the hostile step's outputs are rendered in the cell at `index`."""
    cell = nb.cell(index)
    expect(cell.locator(".jp-OutputArea")).to_contain_text("hostile step done", timeout=WAIT_MS)
    # The SVG still shows, as an image (where it cannot run script).
    expect(cell.locator("img[src^='data:image/svg+xml']")).to_be_visible(timeout=WAIT_MS)


def test_a_steps_html_javascript_and_svg_never_run_not_even_after_reload_or_rerun(
        lab: Lab, fake: FakeLLM) -> None:
    fake.push(code(HOSTILE_STEP), Turn("Shown."))
    nb = lab.open_notebook("hostile-outputs", [LOAD, "%%ask\nshow the page"])
    nb.run(1)
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("Shown.", timeout=WAIT_MS)
    nb.wait_cell_count(3)
    wait_step_outputs(nb, 2)
    assert xss(nb) is None
    assert not trusted(nb, 2) and not trusted(nb, 1)
    # The HTML is there, sanitized: the images without their handlers, no script element.
    outputs = nb.cell(2).locator(".jp-OutputArea-output")
    expect(outputs.locator("img:not([src^='data:'])")).to_have_count(2)
    expect(outputs.locator("script")).to_have_count(0)
    handlers = "n => [...n.querySelectorAll('*')].filter(e => e.hasAttribute('onerror')).length"
    assert nb.cell(2).evaluate(handlers) == 0
    nb.screenshot("hostile-step-outputs")
    nb.save()

    # Reopened: the notebook is not signed, so its outputs come back untrusted.
    nb = lab.reload(nb)
    expect(nb.cells).to_have_count(3, timeout=WAIT_MS)
    wait_step_outputs(nb, 2)
    assert xss(nb) is None
    assert not trusted(nb, 2)

    # Restart & Run All runs the generated cell again: running it does not trust it.
    nb.wait_kernel_idle()
    nb.page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-run-all'); }")
    nb.page.locator(".jp-Dialog .jp-mod-accept").click(timeout=WAIT_MS)
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text(
        "Reusing the earlier answer", timeout=WAIT_MS)
    nb.wait_cell_done(2)
    wait_step_outputs(nb, 2)
    assert xss(nb) is None
    assert not trusted(nb, 2) and not trusted(nb, 1)
    assert fake.calls() == 2


def test_what_a_step_publishes_into_the_ask_cell_runs_no_script(lab: Lab, fake: FakeLLM) -> None:
    # The step leaves a thread behind that displays HTML while the model thinks: it lands in
    # the %%ask cell's own output area, which the user ran (trusted, unless guarded).
    late = ("import threading\nfrom IPython.display import HTML, display\n"
            f"threading.Timer(0.5, lambda: display(HTML('<b>late</b><img src=x onerror="
            f"\"{mark('ask-cell')}\">'))).start()\nprint('timer set')")
    fake.push(code(late), Turn("Done waiting.", first_delay=2.5))
    nb = lab.open_notebook("hostile-ask-cell", [LOAD, "%%ask\nwait a little"])
    nb.run(1)
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("Done waiting.",
                                                                 timeout=WAIT_MS)
    expect(nb.cell(1).locator(".jp-OutputArea b", has_text="late")).to_be_visible()
    assert xss(nb) is None
    assert not trusted(nb, 1)


def test_trust_notebook_is_the_users_explicit_choice(lab: Lab, fake: FakeLLM) -> None:
    # The way to see a widget or a JS chart: trust the notebook. That trusts the outputs it
    # shows; a run in a kernel where model code ran is untrusted again (test_planted_hooks).
    fake.push(code(HOSTILE_STEP), Turn("Shown."))
    nb = lab.open_notebook("trusted-by-choice", [LOAD, "%%ask\nshow the page"])
    nb.run(1)
    nb.wait_cell_count(3)
    wait_step_outputs(nb, 2)
    assert xss(nb) is None
    nb.activate()
    # Trusting saves the notebook: the page answers JupyterLab's 'File Changed' dialog that
    # real-time collaboration may raise then (tests/ui/lab.py, Lab).
    nb.page.evaluate("() => { window.jupyterapp.commands.execute('notebook:trust'); }")
    nb.page.locator(".jp-Dialog .jp-mod-accept").click(timeout=WAIT_MS)
    # An image's error handler runs when its load fails, after the scripts: wait for it.
    nb.page.wait_for_function("() => (window.__xss || []).includes('html-onerror')",
                              timeout=WAIT_MS)
    assert trusted(nb, 2)
    ran = xss(nb)
    nb.run(2)
    nb.wait_cell_done(2)
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("hostile step done",
                                                                 timeout=WAIT_MS)
    assert not trusted(nb, 2)
    assert xss(nb) == ran  # the run's own outputs ran nothing more


def test_the_trust_setting_documents_its_risk_and_trusts_generated_outputs(
        lab: Lab, fake: FakeLLM) -> None:
    plugin = "/lab/api/settings/jupyter-ci:plugin"
    schema = lab.server.api("GET", plugin)["schema"]["properties"]["trustGeneratedOutputs"]
    assert schema["default"] is False
    assert re.search(r"Risk: .*script", schema["description"])
    lab.server.api("PUT", plugin, {"raw": '{"trustGeneratedOutputs": true}'})
    try:
        fake.push(code(HOSTILE_STEP), Turn("Shown."))
        nb = lab.open_notebook("trusted-by-setting", [LOAD, "%%ask\nshow the page"])
        nb.run(1)
        nb.wait_cell_count(3)
        expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("hostile step done",
                                                                     timeout=WAIT_MS)
        nb.page.wait_for_function("() => Array.isArray(window.__xss)", timeout=WAIT_MS)
        assert trusted(nb, 2)
    finally:
        lab.server.api("PUT", plugin, {"raw": "{}"})
