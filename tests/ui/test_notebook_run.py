"""run_in_notebook in a real browser without real-time collaboration (the page path): an MCP
client's code lands as a new last cell of the notebook open in JupyterLab, marked, with its
outputs; the caller gets the same outputs. (The refusals, with no page or no extension, are
tests/test_notebook_run.py; with collaboration, the door needs no page:
tests/ui/test_notebook_door.py.)"""

from __future__ import annotations

import importlib.util
import json
import re
import urllib.error
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from tests.fakellm import FakeLLM
from tests.ui.fixtures import _lab_page
from tests.ui.lab import WAIT_MS, Lab, LabServer, start_lab


@pytest.fixture(scope="module")
def page_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """A `jupyter lab` whose pages do not share their notebooks (no real-time collaboration:
    turned off where jupyter-collaboration is installed, absent on the floors' stack)."""
    off = ("--YDocExtension.disable_rtc=True",) if importlib.util.find_spec(
        "jupyter_server_ydoc") else ()
    server = start_lab(tmp_path_factory.mktemp("page-lab"), {}, options=off)
    yield server
    server.stop()


@pytest.fixture
def lab(request: pytest.FixtureRequest, browser: Browser, page_server: LabServer,
        fake: FakeLLM) -> Iterator[Lab]:
    """A fresh page on that server."""
    yield from _lab_page(request, browser, page_server, fake)

CODE = "print('from the client')\nx * 2"


def test_code_from_an_mcp_client_lands_as_a_marked_cell_with_its_outputs(lab: Lab) -> None:
    nb = lab.open_notebook("external", ["x = 21"])
    nb.run(0)  # the page loads jupyter-ci in the kernel before its first request
    nb.wait_cell_done(0)
    reply = lab.server.api("POST", "/jupyter-ci/notebooks/run",
                           {"path": "external.ipynb", "code": CODE}, timeout=60)
    assert reply["status"] == "ok", reply
    texts = [o.get("text") or o.get("data", {}).get("text/plain") for o in reply["outputs"]]
    assert texts == ["from the client\n", "42"]
    nb.wait_cell_count(2)
    assert nb.source(1) == CODE
    cell = nb.cell(1)
    expect(cell).to_have_class(re.compile(r"(^|\s)jp-ci-external(\s|$)"), timeout=WAIT_MS)
    assert cell.get_attribute("data-jupyter-ci-badge") == "from an MCP client"
    expect(cell.locator(".jp-OutputArea")).to_contain_text("from the client", timeout=WAIT_MS)
    expect(cell.locator(".jp-OutputArea")).to_contain_text("42")
    nb.wait_cell_done(1)
    assert nb.execution_count(1) == reply["execution_count"]
    saved = nb.model_json()["cells"][1]
    assert saved["metadata"]["jupyter_ci"] == {"external": "mcp"}
    assert [o["output_type"] for o in saved["outputs"]] == ["stream", "execute_result"]
    nb.screenshot("external-cell")


def test_a_kernel_the_page_has_not_loaded_jupyter_ci_in_is_refused_and_no_cell_stays(
    lab: Lab
) -> None:
    nb = lab.open_notebook("external-unloaded", ["y = 1"])  # no cell run: nothing loaded
    with pytest.raises(urllib.error.HTTPError) as refused:
        lab.server.api("POST", "/jupyter-ci/notebooks/run",
                       {"path": "external-unloaded.ipynb", "code": "y = 2"}, timeout=60)
    assert refused.value.code == 409
    assert "%load_ext jupyter_ci" in json.loads(refused.value.read())["message"]
    nb.wait_cell_count(1)


def test_every_run_in_one_kernel_fills_its_own_cell_in_the_page_and_the_saved_file(
    lab: Lab
) -> None:
    nb = lab.open_notebook("external-several", ["x = 21"])
    nb.run(0)
    nb.wait_cell_done(0)
    codes = [f"print('run {n}')\nx + {n}" for n in range(3)]
    replies = [lab.server.api("POST", "/jupyter-ci/notebooks/run",
                              {"path": "external-several.ipynb", "code": code}, timeout=60)
               for code in codes]
    assert [r["status"] for r in replies] == ["ok"] * 3, replies
    nb.wait_cell_count(1 + len(codes))
    for n, reply in enumerate(replies, start=1):
        assert nb.source(n) == codes[n - 1]
        expect(nb.outputs(n)).to_have_count(2, timeout=WAIT_MS)
        nb.wait_cell_done(n)
        assert nb.execution_count(n) == reply["execution_count"], (n, reply)
        assert nb.output_text(n).split() == ["run", str(n - 1), str(21 + n - 1)]
    saved = nb.read_saved()
    for n, reply in enumerate(replies, start=1):
        cell = saved.cells[n]
        assert cell.execution_count == reply["execution_count"]
        assert cell.metadata["jupyter_ci"] == {"external": "mcp"}
        assert [(o.output_type, o.get("text") or o.get("data", {}).get("text/plain"))
                for o in cell.outputs] == [("stream", f"run {n - 1}\n"),
                                           ("execute_result", str(21 + n - 1))]
