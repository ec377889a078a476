"""A notebook's box in JupyterLab (issue 41, point 1): the status bar and the panel say whether
the kernel is boxed; "Run this notebook unboxed" switches its kernel after saying what it gives
up (and "Run this notebook boxed" back); a host the box refused is offered once per host and
notebook as "Allow <host> for this notebook", after which a re-run reaches it. The choices are
the server's (server/sandbox/choices.py), never in the notebook file."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fakellm import FakeLLM, Turn
from tests.ui.lab import WAIT_MS, Lab, Notebook
from tests.ui.test_lab import LOAD, code, wait_answer

WHO = "import os\nprint('boxed:', os.environ.get('JUPYTER_CI_BOXED'))"


@pytest.fixture
def listener() -> Iterator[int]:
    """A web server on loopback, standing for a host on the internet; yield its port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    yield int(httpd.server_address[1])
    httpd.shutdown()


def run_and_read(nb: Notebook, index: int) -> str:
    """Run a cell as the user does; return its output once it has run."""
    nb.run(index)
    nb.wait_cell_done(index)
    expect(nb.outputs(index)).not_to_have_count(0, timeout=WAIT_MS)
    return nb.output_text(index)


def test_the_status_bar_says_boxed_and_the_command_unboxes_after_a_warning(lab: Lab) -> None:
    nb = lab.open_notebook("box-switch", [WHO])
    badge = lab.page.locator('[data-jupyter-ci="box-badge"]')
    expect(badge).to_have_text("Boxed", timeout=WAIT_MS)
    assert "without its secrets" in (badge.get_attribute("title") or "")
    lab.panel.open()
    expect(lab.panel.part("box-line")).to_contain_text("Boxed: code here reads and writes",
                                                       timeout=WAIT_MS)
    assert "boxed: notebook" in run_and_read(nb, 0)
    lab.screenshot("box-badge")
    # The command says what it gives up before it does anything.
    nb.activate()
    nb.page.evaluate("() => { window.jupyterapp.commands.execute('jupyter-ci:run-unboxed'); }")
    dialog = lab.page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("all your rights", timeout=WAIT_MS)
    expect(dialog).to_contain_text("~/.ssh")
    lab.screenshot("box-unbox-dialog")
    dialog.get_by_role("button", name="Run unboxed").click()
    expect(badge).to_have_text("Unboxed", timeout=WAIT_MS)
    expect(lab.panel.part("box-line")).to_contain_text(
        "Unboxed (you chose 'Run this notebook unboxed' for it): the code an ask runs here has "
        "all your rights", timeout=WAIT_MS)
    nb.wait_kernel_idle()
    assert "boxed: None" in run_and_read(nb, 0)
    # Kept by the server for this notebook, not in its file.
    assert "unboxed" not in json.dumps(json.loads(nb.path.read_text())["metadata"]).lower()
    # And boxed again, from the badge itself.
    badge.click()
    lab.page.locator(".jp-Dialog").get_by_role("button", name="Run boxed").click()
    expect(badge).to_have_text("Boxed", timeout=WAIT_MS)
    nb.wait_kernel_idle()
    assert "boxed: notebook" in run_and_read(nb, 0)


def test_a_refused_host_is_offered_once_and_a_rerun_reaches_it_once_allowed(
    lab: Lab, listener: int
) -> None:
    host = f"127.0.0.1:{listener}"
    fetch = ("import urllib.request\ntry:\n"
             f"    print(urllib.request.urlopen('http://{host}/', timeout=20).read())\n"
             "except Exception as err:\n    print('refused:', err)")
    nb = lab.open_notebook("box-hosts", [fetch])
    said = run_and_read(nb, 0)
    assert "refused:" in said and f"Allow {host} for this notebook" in said, said
    offer = lab.page.locator(".jp-toast-message", has_text=f"refused a connection to {host}")
    expect(offer).to_have_count(1, timeout=WAIT_MS)
    lab.screenshot("box-allow-offer")
    # Refused again: the same host of the same notebook is not offered twice.
    assert "refused:" in run_and_read(nb, 0)
    nb.page.wait_for_timeout(1000)
    expect(offer).to_have_count(1)
    lab.page.get_by_role("button", name=f"Allow {host} for this notebook").click()
    expect(lab.page.locator(".jp-toast-message", has_text=f"{host} is allowed")).to_have_count(
        1, timeout=WAIT_MS)
    # The same kernel reaches it now, without a restart.
    expect(nb.outputs(0)).to_contain_text("refused:")
    assert "b'ok'" in run_and_read(nb, 0)
    # Kept by the server for this notebook, not in its file (whose outputs may say it).
    assert host not in json.dumps(json.loads(nb.path.read_text())["metadata"])


def test_an_ask_whose_step_is_refused_a_host_offers_it_and_the_next_run_reaches_it(
    lab: Lab, fake: FakeLLM, listener: int
) -> None:
    host = f"127.0.0.1:{listener}"
    fetch = ("import urllib.request\ntry:\n"
             f"    print(urllib.request.urlopen('http://{host}/', timeout=20).read())\n"
             "except Exception as err:\n    print('refused:', err)")
    fake.push(code(fetch), Turn("The page was refused by the box."))
    nb = lab.open_notebook("box-ask-hosts", [LOAD, "%%ask\nfetch the page"])
    nb.run(1)
    wait_answer(nb, 1, "The page was refused by the box.")
    # The model's step ran in the box, and was refused: offered once the ask has run.
    expect(nb.cell(2).locator(".jp-OutputArea")).to_contain_text("refused:", timeout=WAIT_MS)
    lab.page.get_by_role("button", name=f"Allow {host} for this notebook").click(
        timeout=WAIT_MS)
    expect(lab.page.locator(".jp-toast-message", has_text=f"{host} is allowed")).to_have_count(
        1, timeout=WAIT_MS)
    # Run again (the step cell, as the user re-runs it): it reaches the host now.
    assert "b'ok'" in run_and_read(nb, 2)
