"""The first minute in JupyterLab (issue 32.3): the example opens as lab.sh opens it, not
modified, with no news pop-up over the panel, and File > New > Notebook makes the new
notebook at the root, not in examples/."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

from playwright.sync_api import expect

from tests.ui.lab import WAIT_MS, Lab

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: jupyter-collaboration's delay between a change to a notebook's shared model and its save.
SAVE_DELAY_S = 1.0


def lab_sh_url() -> str:
    """Return the page scripts/lab.sh opens (its default_url, held in `page`)."""
    script = (ROOT / "scripts" / "lab.sh").read_text()
    assert '--LabApp.default_url="$page"' in script, "lab.sh's default_url moved"
    found = re.search(r"^page=(\S+)$", script, re.MULTILINE)
    assert found, "scripts/lab.sh sets no page"
    return found.group(1)


def test_the_example_opens_unmodified_and_new_notebooks_land_at_the_root(lab: Lab) -> None:
    root = lab.server.root
    # The session's lab root is shared: another test may have copied (and run) them.
    shutil.rmtree(root / "examples", ignore_errors=True)
    shutil.copytree(EXAMPLES, root / "examples")
    on_disk = root / "examples" / "getting-started.ipynb"
    before = on_disk.read_bytes()
    url = lab_sh_url()
    # lab.sh's page in this test's own workspace (reset), with the test server's token.
    path, _, query = url.partition("?")
    assert path.startswith("/lab/tree/examples/getting-started.ipynb"), url
    lab.page.goto(f"{lab.server.url}{path.replace('/lab/', f'/lab/workspaces/{lab.workspace}/')}"
                  f"?{query + '&' if query else ''}reset&token={lab.server.token}")
    lab.page.wait_for_function("() => !!window.jupyterapp && window.jupyterapp.started",
                               timeout=WAIT_MS)
    example = lab.reload_target(root / "examples" / "getting-started.ipynb")
    example.wait_kernel_idle()
    # Everything the page does as a notebook opens is done: the kernel answered its info
    # (language_info, kernelspec), and the extensions have seen the notebook and its kernel.
    example.page.evaluate("() => window.jupyterapp.restored")
    example.js("const kernel = panel.sessionContext.session.kernel; return Promise.all("
               "[kernel.info, kernel.spec]).then(() => new Promise(r => setTimeout(r, 0)));")
    assert example.js("return panel.context.model.dirty;") is False
    expect(example.root).to_be_visible()
    tab = lab.page.locator("#jp-main-dock-panel .lm-TabBar-tab", has_text="getting-started")
    expect(tab).not_to_have_class(re.compile(r"jp-mod-dirty"))
    # Nor on disk: with collaboration the server saves the notebook a second after any change
    # to its shared model (SAVE_DELAY_S), so opening it must change nothing there either.
    time.sleep(SAVE_DELAY_S * 3)
    assert on_disk.read_bytes() == before
    # No "official Jupyter news?" pop-up over the panel: the environment setup-env.sh makes
    # says never (its overrides.json), as the page reads the setting.
    news = lab.server.api("GET", "/lab/api/settings/@jupyterlab/apputils-extension:notification")
    assert news["schema"]["properties"]["fetchNews"]["default"] == "false", news
    expect(lab.page.locator(".jp-toast-message", has_text="news")).to_have_count(0)
    # File > New > Notebook, as a user does it.
    lab.page.locator(".lm-MenuBar-itemLabel", has_text="File").click()
    lab.page.locator(".lm-Menu-itemLabel", has_text=re.compile("^New$")).hover()
    lab.page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Notebook$")).click()
    select = lab.page.locator(".jp-Dialog button.jp-mod-accept")
    new = lab.page.locator("#jp-main-dock-panel .lm-TabBar-tab", has_text="Untitled")
    expect(select.or_(new).first).to_be_visible(timeout=WAIT_MS)
    if select.count():  # JupyterLab asks which kernel when it has no preferred one
        select.click()
    expect(new).to_have_count(1, timeout=WAIT_MS)
    made = lab.reload_target(root / "Untitled.ipynb")
    assert made.js("return panel.context.path;") == "Untitled.ipynb"
    assert (root / "Untitled.ipynb").exists()
    assert not (root / "examples" / "Untitled.ipynb").exists()
