"""The notebook door in a real browser, with Jupyter's real-time collaboration: an agent's cell,
sent over MCP (the SDK's client, Streamable HTTP), appears and fills live in a notebook open in
JupyterLab, and its user can stop it with the toolbar's stop button; with the page closed, the
cells and their outputs are there when the notebook is opened. (The server side, consent and
refusals: tests/test_notebook_door.py. Without collaboration, the floors' JupyterLab, the door
is tests/ui/test_notebook_run.py's.)"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable
from typing import Any

from playwright.sync_api import expect

from tests.test_mcp import http, texts
from tests.ui.lab import WAIT_MS, Lab, read_notebook_file, write_notebook

#: Prints one line a second, then gives a value: long enough to see it fill.
TICKS = ("import time\nfor i in range(4):\n    print('tick', i, flush=True)\n"
         "    time.sleep(1)\nx * 2")


class Call:
    """A REST call made in a thread, so the page can be watched while it runs."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.result = call()
            except BaseException as exc:  # reported by done()
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def done(self, timeout: float = 90) -> Any:
        """Return the call's result once it has come."""
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the call did not return"
        if self.error is not None:
            raise self.error
        return self.result


def tools(lab: Lab, *calls: tuple[str, dict[str, Any]]) -> Call:
    """Call MCP tools in turn over one connection, in a thread; its result: their results."""
    async def call() -> list[Any]:
        async with http(lab.server.url, lab.server.token) as mcp:
            return [await mcp.call_tool(name, args) for name, args in calls]

    return Call(lambda: asyncio.run(call()))


def run(lab: Lab, path: str, code: str) -> Call:
    """Start an agent's run of `code` at the end of `path` (run_in_notebook)."""
    return tools(lab, ("run_in_notebook", {"path": path, "code": code}))


def allow(lab: Lab, path: str) -> None:
    """Let agents change the notebook, as the user's command does."""
    state = lab.server.api("PUT", "/jupyter-ci/notebooks/consent", {"path": path,
                                                                     "allow": True})
    assert state["allowed"] is True, state


def test_an_agents_cell_appears_and_fills_live_in_the_open_notebook(lab: Lab) -> None:
    nb = lab.open_notebook("door-live", ["x = 21"])
    nb.run(0)
    nb.wait_cell_done(0)
    allow(lab, "door-live.ipynb")
    call = run(lab, "door-live.ipynb", TICKS)
    nb.wait_cell_count(2)
    cell = nb.cell(1)
    # While it runs: the prompt says so, and the first ticks show before the run ends.
    expect(cell.locator(".jp-InputPrompt")).to_contain_text("*", timeout=WAIT_MS)
    expect(cell.locator(".jp-OutputArea")).to_contain_text("tick 1", timeout=WAIT_MS)
    assert call.thread.is_alive(), "the page saw the outputs only after the run"
    [reply] = call.done()
    assert not reply.is_error and "tick 3" in texts(reply) and "42" in texts(reply)
    expect(cell.locator(".jp-OutputArea")).to_contain_text("42", timeout=WAIT_MS)
    nb.wait_cell_done(1)
    assert nb.source(1) == TICKS and f"cell 1, id {nb.model_json()['cells'][1]['id']}" in \
        texts(reply)
    expect(cell).to_have_class(re.compile(r"(^|\s)jp-ci-external(\s|$)"), timeout=WAIT_MS)
    assert cell.get_attribute("data-jupyter-ci-badge") == "from an MCP client"
    held = nb.model_json()["cells"][1]
    assert held["metadata"]["jupyter_ci"] == {"external": "mcp", "ran_by": "mcp"}
    nb.screenshot("door-live")


def test_with_the_page_closed_the_notebook_opens_with_the_agents_cell_and_outputs(
    lab: Lab
) -> None:
    path = write_notebook(lab.server.root, "door-closed", ["x = 5"])
    allow(lab, "door-closed.ipynb")
    inserted, ran, reply = tools(
        lab, ("insert_cell", {"path": "door-closed.ipynb", "source": "x = 21"}),
        ("run_cell", {"path": "door-closed.ipynb", "cell": 1}),
        ("run_in_notebook", {"path": "door-closed.ipynb",
                             "code": "print('while closed')\nx * 2"})).done()
    assert not (inserted.is_error or ran.is_error or reply.is_error), texts(reply)
    lab.goto("door-closed.ipynb")
    nb = lab.reload_target(path)
    nb.wait_cell_count(3)
    assert [nb.source(i) for i in range(3)] == ["x = 5", "x = 21", "print('while closed')\nx * 2"]
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("while closed",
                                                                 timeout=WAIT_MS)
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("42")
    nb.wait_cell_done(2)
    assert nb.execution_count(2) == nb.execution_count(1) + 1  # the one kernel, in order
    saved = read_notebook_file(path)
    assert [c.source for c in saved.cells][2] == "print('while closed')\nx * 2"
    assert saved.cells[2].outputs[0].text == "while closed\n"
    nb.screenshot("door-closed")


def test_the_user_stops_an_agents_run_with_the_stop_button(lab: Lab) -> None:
    nb = lab.open_notebook("door-stop", ["x = 1"])
    nb.run(0)
    nb.wait_cell_done(0)
    allow(lab, "door-stop.ipynb")
    call = run(lab, "door-stop.ipynb", "import time\nprint('sleeping', flush=True)\n"
               "time.sleep(120)")
    nb.wait_cell_count(2)
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("sleeping", timeout=WAIT_MS)
    nb.activate()
    nb.root.locator(".jp-Toolbar [data-jp-item-name='interrupt'] button").click()
    [reply] = call.done(timeout=60)
    assert reply.is_error and "KeyboardInterrupt" in texts(reply), texts(reply)
    expect(nb.cell(1).locator(".jp-OutputArea")).to_contain_text("KeyboardInterrupt",
                                                                 timeout=WAIT_MS)
    # The kernel and the user's state are still there.
    nb.run(0)
    nb.wait_cell_done(0)
    nb.screenshot("door-stopped")
