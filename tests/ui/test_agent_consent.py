"""The user's consent to agents in their notebooks, from the page (issue 34, point 1): opening
a notebook in JupyterLab, by the user's own click or key in it, tells the server (by default,
agents may then edit and run it), while a navigation alone (a web page sending the browser to
/lab/tree/<notebook>) grants nothing (issue 41, point 3); two commands, in the palette and the
notebook's context menu, let agents into one notebook or stop letting them. (The server's
side: tests/test_notebook_door.py.)"""

from __future__ import annotations

import re
import time
from typing import Any

from playwright.sync_api import expect

from tests.ui.lab import WAIT_MS, Lab, Notebook, write_notebook

ALLOW = "Let agents edit and run this notebook"
STOP = "Stop letting agents edit and run this notebook"


def consent(lab: Lab, path: str) -> Any:
    """Return what the server says of agents in the notebook at `path`."""
    return lab.server.api("GET", f"/jupyter-ci/notebooks/consent?path={path}")


def wait_consent(lab: Lab, path: str, allowed: bool) -> Any:
    """Wait until the server says agents may (or may not) change the notebook."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while (state := consent(lab, path))["allowed"] is not allowed:
        assert time.monotonic() < deadline, state
        time.sleep(0.2)
    return state


def context_menu(nb: Notebook) -> list[str]:
    """Open the notebook's context menu on its first cell; return its labels (then close it)."""
    nb.cell(0).locator(".jp-InputPrompt").click(button="right")
    menu = nb.page.locator(".lm-Menu").last
    expect(menu).to_be_visible(timeout=WAIT_MS)
    labels = [text.strip() for text in menu.locator(".lm-Menu-itemLabel").all_inner_texts()]
    nb.page.keyboard.press("Escape")
    return labels


def touch(nb: Notebook) -> None:
    """The user clicks in the notebook (a real, trusted click of the browser's)."""
    nb.cell(0).locator(".jp-InputPrompt").click()


def test_a_navigation_to_a_notebook_grants_agents_nothing(lab: Lab) -> None:
    """The attack: another site sends the browser to /lab/tree/<notebook>; JupyterLab opens it,
    and the agent that site drives would then write into it."""
    write_notebook(lab.server.root, "consent-navigated", ["x = 1"])
    lab.page.goto("about:blank")
    lab.goto("consent-navigated.ipynb")  # the navigation: JupyterLab opens the notebook
    nb = lab.reload_target(lab.server.root / "consent-navigated.ipynb")
    nb.wait_kernel_idle()
    # The page read its consent (and runs its kernel), yet told the server nothing.
    time.sleep(2)
    assert consent(lab, "consent-navigated.ipynb")["why"] == "not_opened"
    # A script's click is no gesture of the user's either.
    nb.page.evaluate("() => document.querySelector('.jp-Notebook').dispatchEvent("
                     "new PointerEvent('pointerdown', {bubbles: true}))")
    time.sleep(1)
    assert consent(lab, "consent-navigated.ipynb")["allowed"] is False
    touch(nb)
    assert wait_consent(lab, "consent-navigated.ipynb", True)["why"] == "opened"


def test_opening_a_notebook_lets_agents_in_and_the_commands_change_it(lab: Lab) -> None:
    write_notebook(lab.server.root, "consent-never-opened", ["x = 1"])
    assert consent(lab, "consent-never-opened.ipynb")["allowed"] is False
    nb = lab.open_notebook("consent", ["x = 1"])
    touch(nb)
    state = wait_consent(lab, "consent.ipynb", True)
    assert state["why"] == "opened" and state["setting"] == "opened", state
    assert consent(lab, "consent-never-opened.ipynb")["allowed"] is False
    labels = context_menu(nb)
    assert ALLOW in labels and STOP in labels, labels
    # The user stops letting agents in: the server hears it, the commands show it.
    nb.command("jupyter-ci:stop-agents")
    assert wait_consent(lab, "consent.ipynb", False)["why"] == "not_opened"
    expect(lab.page.locator(".jp-toast-message").last).to_contain_text(
        "Agents may not edit or run consent.ipynb", timeout=WAIT_MS)
    assert nb.js("return app.commands.isToggled('jupyter-ci:allow-agents');") is False
    # And lets them in again, for good (not only for this server's run).
    nb.command("jupyter-ci:allow-agents")
    assert wait_consent(lab, "consent.ipynb", True)["why"] == "allowed"
    nb.page.wait_for_function(
        "() => window.jupyterapp.commands.isToggled('jupyter-ci:allow-agents')", timeout=WAIT_MS)
    # In the palette too.
    nb.page.keyboard.press("ControlOrMeta+Shift+c")
    palette = nb.page.locator("#command-palette")
    expect(palette).to_be_visible(timeout=WAIT_MS)
    palette.locator("input").fill("agents edit and run")
    expect(palette.locator(".lm-CommandPalette-itemLabel", has_text=re.compile(
        "^(Let|Stop letting) agents edit and run this notebook$"))).to_have_count(
            2, timeout=WAIT_MS)
    nb.page.keyboard.press("Escape")
    lab.screenshot("agent-consent")


def test_a_renamed_notebook_is_opened_under_its_new_path(lab: Lab) -> None:
    nb = lab.open_notebook("consent-before", ["x = 1"])
    touch(nb)
    wait_consent(lab, "consent-before.ipynb", True)
    nb.js("return panel.context.rename('consent-after.ipynb');")
    nb.page.wait_for_function(
        "id => Array.from(window.jupyterapp.shell.widgets('main')).find(w => w.id === id)"
        ".context.path.endsWith('consent-after.ipynb')", arg=nb.panel_id, timeout=WAIT_MS)
    assert wait_consent(lab, "consent-after.ipynb", True)["allowed"] is True


def test_the_server_s_message_shows_when_it_refuses(lab: Lab) -> None:
    nb = lab.open_notebook("consent-gone", ["x = 1"])
    touch(nb)
    wait_consent(lab, "consent-gone.ipynb", True)
    nb.path.unlink()  # the file went away under the page: the server cannot say
    nb.activate()  # the command ends once the user closes its dialog: not waited for
    nb.page.evaluate("() => { window.jupyterapp.commands.execute('jupyter-ci:stop-agents'); }")
    dialog = lab.page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("agents in this notebook", timeout=WAIT_MS)
    expect(dialog).to_contain_text("consent-gone.ipynb")
    lab.screenshot("agent-consent-refused")
    # Its one button: "Close" on JupyterLab 4.6, "Dismiss" on 4.2 (the floors).
    dialog.get_by_role("button", name=re.compile(r"^(Close|Dismiss)$")).click()
    expect(dialog).to_have_count(0, timeout=WAIT_MS)
