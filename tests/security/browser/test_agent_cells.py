"""An agent's cell cannot make the user's own later cells run script (issue 34, point 1).

An agent (an MCP client) runs a cell in the user's notebook that plants hooks in its kernel
(tests/security/browser/test_planted_hooks.py's): an IPython `post_run_cell` callback, an HTML
formatter, a patched `_repr_html_`, a patched displayhook. With Jupyter's real-time
collaboration the cell comes into the open page through the notebook's shared document, from
the server (the notebook door), not from the page's own kernel messages: the page must still
untrust the cell and mark its kernel, so that none of the kernel's later outputs, the user's
own next cells' included, runs script in this page or in another page of the same notebook.
Without collaboration the cell comes through the page (run_in_notebook's page path). Each
mark sets `window.__xss`: it must stay undefined.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from tests.fakellm import FakeLLM
from tests.security.browser.test_planted_hooks import MINE, PLANT, trust_notebook
from tests.security.browser.test_untrusted_outputs import trusted, xss
from tests.test_mcp import texts
from tests.ui.fixtures import _lab_page
from tests.ui.lab import COLLABORATION, WAIT_MS, Lab, LabServer, Notebook, start_lab
from tests.ui.test_notebook_door import allow, run


@pytest.fixture(scope="module")
def page_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """A `jupyter lab` whose pages do not share their notebooks (collaboration turned off)."""
    off = ("--YDocExtension.disable_rtc=True",) if importlib.util.find_spec(
        "jupyter_server_ydoc") else ()
    server = start_lab(tmp_path_factory.mktemp("agent-page-lab"), {}, options=off)
    yield server
    server.stop()


@pytest.fixture
def page_lab(request: pytest.FixtureRequest, browser: Browser, page_server: LabServer,
             fake: FakeLLM) -> Iterator[Lab]:
    """A fresh page on the server without collaboration."""
    yield from _lab_page(request, browser, page_server, fake)


def run_mine(nb: Notebook, first: int) -> None:
    """Run the user's cells, one by one, and wait for each to finish."""
    for index in range(first, first + len(MINE)):
        nb.run(index)
        nb.wait_cell_done(index)


def open_trusted(lab: Lab, nb: Notebook) -> Notebook:
    """Open the same notebook in another page of the browser, and trust it there too."""
    other = Lab(lab.page.context.new_page(), lab.server, f"{lab.workspace}-2")
    other.goto(nb.path.relative_to(lab.server.root).as_posix())
    tab = other.reload_target(nb.path)
    tab.wait_kernel_idle()
    trust_notebook(tab)
    assert trusted(tab, 1)
    return tab


def plant_and_run_mine(lab: Lab, name: str, second_page: bool) -> list[Notebook]:
    """Open the user's trusted notebook (in two pages), let an agent plant hooks in its
    kernel, run the user's cells; return the pages."""
    nb = lab.open_notebook(name, ["x = 1", *MINE])
    # The user's own notebook, trusted (as one signed by them opens): its cells are trusted
    # before they run, so a run gives them no new trust to take back.
    trust_notebook(nb)
    nb.run(0)
    nb.wait_cell_done(0)
    assert trusted(nb, 1)
    pages = [nb, open_trusted(lab, nb)] if second_page else [nb]
    allow(lab, f"{name}.ipynb")
    [reply] = run(lab, f"{name}.ipynb", PLANT).done()
    assert not reply.is_error and "planted" in texts(reply), texts(reply)
    agent = 1 + len(MINE)
    for page in pages:
        page.wait_cell_count(agent + 1)
        expect(page.cell(agent).locator(".jp-OutputArea")).to_contain_text("planted",
                                                                          timeout=WAIT_MS)
        expect(page.cell(agent)).to_have_attribute("data-jupyter-ci-badge",
                                                   "from an MCP client", timeout=WAIT_MS)
        assert not trusted(page, agent)
    run_mine(nb, 1)
    for page in pages:
        # The hooks ran and their HTML shows, sanitized: the images without their handlers.
        expect(page.cell(1).locator(".jp-OutputArea")).to_contain_text("hooked", timeout=WAIT_MS)
        expect(page.cell(2).locator(".jp-OutputArea s")).to_have_text("shown", timeout=WAIT_MS)
        expect(page.cell(3).locator(".jp-OutputArea i")).to_have_text("1.5", timeout=WAIT_MS)
        expect(page.cell(4).locator(".jp-OutputArea em")).to_have_text("frame", timeout=WAIT_MS)
        assert xss(page) is None
        assert not any(trusted(page, i) for i in range(1, 1 + len(MINE)))
    return pages


def test_an_agents_cell_through_the_shared_notebook_plants_no_script_in_the_users_cells(
        lab: Lab) -> None:
    # With collaboration, a second page of the notebook sees the agent's cell and the user's
    # runs only through the shared document: its trusted cells must not run their script.
    pages = plant_and_run_mine(lab, "agent-hooks", second_page=COLLABORATION)
    assert all(page.collaborative == COLLABORATION for page in pages)
    pages[-1].screenshot("agent-planted-hooks")


def test_an_agents_cell_through_the_page_plants_no_script_in_the_users_cells(
        page_lab: Lab) -> None:
    [nb] = plant_and_run_mine(page_lab, "agent-hooks-page", second_page=False)
    assert not nb.collaborative
    assert re.fullmatch(r"\[\d+\]:", nb.prompt(1 + len(MINE)))
