"""A step cannot make the user's own later cells run script (issue 31, point 3).

Model-written code can leave hooks in its kernel: an IPython `post_run_cell` callback, an
HTML formatter, a patched `_repr_html_`, a patched displayhook. JupyterLab trusts every cell
the user runs, so whatever those hooks add to the user's own outputs would run on Jupyter's
origin. Once model code ran in a kernel, none of its outputs may run script until it
restarts; a sandboxed kernel's never. Each mark sets `window.__xss`: it must stay undefined.
"""

from __future__ import annotations

from playwright.sync_api import expect

from tests.fakellm import FakeLLM, Turn
from tests.security.browser.test_untrusted_outputs import LOAD, code, mark, trusted, xss
from tests.ui.lab import WAIT_MS, Lab, Notebook

# What hostile code in a step leaves behind; the step itself shows nothing.
PLANT = f"""\
from IPython.display import HTML, display
import pandas as pd
ip = get_ipython()
def _mark(name):
    return '<img src=x onerror="' + {mark('{0}')!r}.format(name) + '">'
ip.events.register('post_run_cell', lambda result: display(HTML('<b>hooked</b>'
                   + _mark('post_run_cell'))))
ip.display_formatter.formatters['text/html'].for_type(
    float, lambda value: '<i>' + str(value) + '</i>' + _mark('formatter'))
pd.DataFrame._repr_html_ = lambda self: '<em>frame</em>' + _mark('repr_html')
_compute = ip.displayhook.compute_format_data
def _patched(result):
    data, metadata = _compute(result)
    if isinstance(result, int):
        data['text/html'] = '<s>shown</s>' + _mark('displayhook')
    return data, metadata
ip.displayhook.compute_format_data = _patched
print('planted')
"""
# The user's own cells after the ask: each meets one of the hooks.
MINE = ["print('mine')", "40 + 2", "0.5 + 1", "import pandas as pd\npd.DataFrame({'a': [1]})"]
OWN_SCRIPT = f"from IPython.display import HTML\nHTML('<img src=x onerror=\"{mark('own')}\">')"


def trust_notebook(nb: Notebook) -> None:
    """Trust the notebook as its user does (File > Trust Notebook)."""
    nb.activate()
    nb.page.evaluate("() => { window.jupyterapp.commands.execute('notebook:trust'); }")
    nb.page.locator(".jp-Dialog .jp-mod-accept").click(timeout=WAIT_MS)


def run_mine(nb: Notebook, first: int) -> None:
    """Run the user's cells, one by one, and wait for each to finish."""
    for index in range(first, first + len(MINE)):
        nb.run(index)
        nb.wait_cell_done(index)


def test_hooks_a_step_planted_run_no_script_in_the_users_cells_until_a_restart(
        lab: Lab, fake: FakeLLM) -> None:
    fake.push(code(PLANT), Turn("Planted."))
    nb = lab.open_notebook("planted-hooks", [LOAD, "%%ask\nset things up", *MINE, OWN_SCRIPT])
    # The user's own notebook, trusted (as one signed by them opens): its cells are trusted
    # before they run, so a run gives them no new trust to take back.
    trust_notebook(nb)
    assert trusted(nb, 2)
    nb.run(0)
    nb.wait_cell_done(0)
    nb.run(1)
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("Planted.", timeout=WAIT_MS)
    nb.wait_cell_count(8)  # the step's cell came in below the ask
    first = 3
    run_mine(nb, first)
    # The hooks ran and their HTML shows, sanitized: the images without their handlers.
    expect(nb.cell(first).locator(".jp-OutputArea")).to_contain_text("hooked")
    expect(nb.cell(first + 1).locator(".jp-OutputArea s")).to_have_text("shown")
    expect(nb.cell(first + 2).locator(".jp-OutputArea i")).to_have_text("1.5")
    expect(nb.cell(first + 3).locator(".jp-OutputArea em")).to_have_text("frame")
    assert xss(nb) is None
    assert not any(trusted(nb, i) for i in range(first, first + len(MINE)))
    nb.screenshot("planted-hooks")

    # A reloaded page asks the server, and holds the kernel's outputs untrusted too.
    nb.save()
    nb = lab.reload(nb)
    nb.wait_kernel_idle()
    run_mine(nb, first)
    expect(nb.cell(first).locator(".jp-OutputArea")).to_contain_text("hooked")
    assert xss(nb) is None

    # A restart starts a process without the hooks: the user's own script runs again.
    nb.activate()
    nb.page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-kernel'); }")
    nb.page.locator(".jp-Dialog .jp-mod-accept").click(timeout=WAIT_MS)
    nb.wait_kernel_idle()
    nb.run(first + len(MINE))
    nb.wait_cell_done(first + len(MINE))
    nb.page.wait_for_function("() => Array.isArray(window.__xss)", timeout=WAIT_MS)
    assert nb.page.evaluate("window.__xss") == ["own"]
    assert trusted(nb, first + len(MINE))


SANDBOXED = {"name": "python3-sandboxed", "display_name": "Python 3 (sandboxed)",
             "language": "python"}


def test_a_sandboxed_kernels_outputs_never_run_script(lab: Lab, fake: FakeLLM) -> None:
    nb = lab.open_notebook("boxed-outputs", [OWN_SCRIPT], SANDBOXED)
    nb.run(0)
    nb.wait_cell_done(0)
    expect(nb.outputs(0).locator("img")).to_have_count(1, timeout=WAIT_MS)
    assert xss(nb) is None and not trusted(nb, 0)
    # Not even when the user trusts the notebook: code in a box may be anyone's.
    trust_notebook(nb)
    assert xss(nb) is None and not trusted(nb, 0)
    nb.run(0)
    nb.wait_cell_done(0)
    assert xss(nb) is None and not trusted(nb, 0)
