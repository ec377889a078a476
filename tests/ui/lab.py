"""Page objects for the browser tests: a real `jupyter lab`, its notebooks, the jupyter-ci panel."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from playwright.sync_api import Error, Locator, Page, Response, expect

#: jupyter-collaboration is installed (its server part): pages share each notebook's model
#: with the server and with each other (real-time collaboration), which the server autosaves.
COLLABORATION = importlib.util.find_spec("jupyter_server_ydoc") is not None
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]
WAIT_MS = 60_000  # the longest any single wait-for may take
ARTIFACTS = Path(__file__).parent / "artifacts"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
# Anything that could carry a real key or point a kernel at a real provider.
_DROPPED_ENV = ("_API_KEY", "_BASE_URL", "_AUTH_TOKEN")
_NO_NEWS = {"@jupyterlab/apputils-extension:notification": {
    "fetchNews": "false", "checkForUpdates": False}}


# ---------------------------------------------------------------------------- the server


def free_port() -> int:
    """Return a TCP port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def lab_environ(extra: dict[str, str]) -> dict[str, str]:
    """Return this environment without provider keys, Jupyter paths or PYTHONPATH, plus extra."""
    env = {
        k: v for k, v in os.environ.items()
        if not k.endswith(_DROPPED_ENV) and not k.startswith(("JUPYTER", "JPY_"))
        and k != "PYTHONPATH"
    }
    env.update(extra)
    return env


def _all_cells() -> dict[str, Any]:
    """Settings that put every cell in the page, as JupyterLab's default does since 4.3.

    JupyterLab 4.2 (the floor, tests/floors.txt) renders only the cells in view ("full"
    windowing): a test could not find the others to click. "defer" renders them all.
    """
    schema = (Path(sys.prefix) / "share/jupyter/lab/schemas/@jupyterlab/notebook-extension"
              / "tracker.json")
    try:
        default = json.loads(schema.read_text())["properties"]["windowingMode"]["default"]
    except (OSError, ValueError, KeyError):
        return {}
    if default != "full":
        return {}
    return {"@jupyterlab/notebook-extension:tracker": {"windowingMode": "defer"}}


@dataclass
class LabServer:
    """A `jupyter lab` subprocess with its own config, settings and root directory."""

    proc: subprocess.Popen[bytes]
    port: int
    token: str
    root: Path
    log: Path

    @property
    def url(self) -> str:
        """Return the server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10) -> Any:
        """Call the server's REST API with the token; return the decoded JSON (or None)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.url}{path}", data=data, method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def shutdown_kernels(self) -> None:
        """Shut down every kernel (each test starts its own notebook and kernel)."""
        for kernel in self.api("GET", "/api/kernels"):
            with contextlib.suppress(urllib.error.HTTPError):  # already gone
                self.api("DELETE", f"/api/kernels/{kernel['id']}")

    def log_tail(self, lines: int = 60) -> str:
        """Return the end of the server's log."""
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Kill the server's process group (the server and its kernels)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def start_lab(base: Path, env: dict[str, str], timeout: float = 90,
              options: tuple[str, ...] = ()) -> LabServer:
    """Start `jupyter lab` isolated under `base` (with more command-line `options`) and wait
    until /api/status answers."""
    root, config, runtime = base / "root", base / "config", base / "runtime"
    app_settings, user_settings, workspaces = base / "app-settings", base / "user", base / "ws"
    data = base / "data"  # the kernels' record-signing secret: never the user's own
    for folder in (root, config, runtime, data, app_settings, user_settings, workspaces):
        folder.mkdir(parents=True, exist_ok=True)
    (app_settings / "overrides.json").write_text(json.dumps({**_NO_NEWS, **_all_cells()}),
                                                 encoding="utf-8")
    port, token = free_port(), secrets.token_hex(16)
    args = [
        sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.token={token}",
        f"--ServerApp.root_dir={root}", f"--LabApp.app_settings_dir={app_settings}",
        f"--LabApp.user_settings_dir={user_settings}", f"--LabApp.workspaces_dir={workspaces}",
        # window.jupyterapp: run commands and read the notebook model as the UI sees it.
        "--LabApp.expose_app_in_browser=True", *options,
    ]
    if os.geteuid() == 0:
        args.append("--allow-root")
    full_env = lab_environ({**env, "JUPYTER_CONFIG_DIR": str(config),
                            "JUPYTER_RUNTIME_DIR": str(runtime), "JUPYTER_DATA_DIR": str(data)})
    log = base / "jupyter-lab.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(args, cwd=root, env=full_env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    server = LabServer(proc, port, token, root, log)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited ({proc.returncode}):\n{server.log_tail()}")
        try:
            server.api("GET", "/api/status", timeout=2)
            return server
        except (OSError, urllib.error.URLError):
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"jupyter lab did not answer:\n{server.log_tail()}") from None
            time.sleep(0.2)


def write_notebook(root: Path, name: str, sources: list[str],
                   kernelspec: dict[str, str] = KERNELSPEC) -> Path:
    """Write a notebook of code cells, with the python3 kernelspec, into the server's root."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = dict(kernelspec)
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    path = root / f"{name}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


# ---------------------------------------------------------------------------- the browser

# Run JavaScript against the notebook panel with this id (in the page, `app` is jupyterapp).
_WITH_PANEL = """
([id, body]) => {
  const app = window.jupyterapp;
  const panel = Array.from(app.shell.widgets('main')).find(w => w.id === id);
  if (!panel) { throw new Error('no notebook panel ' + id); }
  return new Function('app', 'panel', body)(app, panel);
}
"""


class Notebook:
    """One open notebook panel, addressed by its widget id."""

    def __init__(self, page: Page, panel_id: str, path: Path) -> None:
        self.page = page
        self.panel_id = panel_id
        self.path = path
        self.root = page.locator(f"[id='{panel_id}']")

    # --- reading the view

    @property
    def cells(self) -> Locator:
        """Return every cell of this notebook, in order."""
        return self.root.locator(".jp-Notebook .jp-Cell")

    def cell(self, index: int) -> Locator:
        """Return the cell at `index`."""
        return self.cells.nth(index)

    def source(self, index: int) -> str:
        """Return a cell's source as its editor shows it."""
        return str(self.js(
            f"return panel.content.widgets[{index}].model.sharedModel.getSource();"))

    def editor_text(self, index: int) -> str:
        """Return the text of a cell's editor in the DOM (what the user sees)."""
        lines = self.cell(index).locator(".jp-InputArea-editor .cm-line").all_inner_texts()
        return "\n".join(line.replace("\u200b", "") for line in lines)

    def prompt(self, index: int) -> str:
        """Return the input prompt text of a cell, e.g. '[3]:'."""
        return self.cell(index).locator(".jp-InputPrompt").inner_text().strip()

    def execution_count(self, index: int) -> int | None:
        """Return the execution count the cell shows, or None."""
        text = self.prompt(index).strip("[]: ")
        return int(text) if text.isdigit() else None

    def outputs(self, index: int) -> Locator:
        """Return the output elements of a cell."""
        return self.cell(index).locator(".jp-OutputArea-output")

    def output_text(self, index: int) -> str:
        """Return all the text a cell's outputs show."""
        return "\n".join(self.outputs(index).all_inner_texts())

    def generated(self) -> Locator:
        """Return the cells generated by %%ask in this notebook."""
        return self.root.locator(".jp-Cell.jp-ci-generated")

    @property
    def collaborative(self) -> bool:
        """Tell whether this page shares the notebook's model (real-time collaboration)."""
        return bool(self.js("return panel.context.model.collaborative === true;"))

    def model_json(self) -> dict[str, Any]:
        """Return the notebook model as nbformat JSON, as the browser holds it now."""
        return dict(self.js("return panel.content.model.toJSON();"))

    # --- acting

    def js(self, body: str) -> Any:
        """Run a JavaScript function body with `app` and `panel` bound; return its result."""
        return self.page.evaluate(_WITH_PANEL, [self.panel_id, body])

    def activate(self) -> None:
        """Bring this notebook to the front."""
        self.js("app.shell.activateById(panel.id);")
        expect(self.root).to_be_visible(timeout=WAIT_MS)

    def wait_kernel_idle(self) -> None:
        """Wait until this notebook's kernel is connected and idle."""
        self.page.wait_for_function(
            """id => {
              const panel = Array.from(window.jupyterapp.shell.widgets('main'))
                .find(w => w.id === id);
              const kernel = panel && panel.sessionContext.session
                && panel.sessionContext.session.kernel;
              return !!kernel && kernel.connectionStatus === 'connected'
                && kernel.status === 'idle';
            }""", arg=self.panel_id, timeout=WAIT_MS)

    def select(self, index: int) -> None:
        """Make a cell the active cell, in command mode."""
        self.activate()
        self.js(f"panel.content.activeCellIndex = {index}; panel.content.mode = 'command';"
                "panel.content.deselectAll();")
        expect(self.cell(index)).to_have_class(_has("jp-mod-active"), timeout=WAIT_MS)

    def run(self, index: int) -> None:
        """Run one cell the way a user does: select it, press Ctrl+Enter (run in place).

        Shift+Enter on the last cell would also add an empty cell below it.
        """
        self.select(index)
        self.cell(index).locator(".jp-InputPrompt").click()
        self.page.keyboard.press("ControlOrMeta+Enter")

    def command(self, command: str, args: dict[str, Any] | None = None) -> Any:
        """Execute an application command with this notebook current."""
        self.activate()
        return self.page.evaluate(
            "([c, a]) => window.jupyterapp.commands.execute(c, a).then(() => null)",
            [command, args or {}])

    def wait_cell_done(self, index: int) -> None:
        """Wait until a cell has run: it shows an execution count and is no longer queued."""
        expect(self.cell(index).locator(".jp-InputPrompt")).to_have_text(
            re.compile(r"^\s*\[\d+\]:\s*$"), timeout=WAIT_MS)

    def wait_cell_count(self, count: int) -> None:
        """Wait until the notebook holds exactly `count` cells."""
        expect(self.cells).to_have_count(count, timeout=WAIT_MS)

    def set_source(self, index: int, text: str) -> None:
        """Type `text` as the whole source of a cell, then leave edit mode."""
        self.select(index)
        editor = self.cell(index).locator(".jp-InputArea-editor .cm-content")
        editor.click()
        self.page.keyboard.press("ControlOrMeta+a")
        self.page.keyboard.type(text)
        self.page.keyboard.press("Escape")
        expect(self.cell(index).locator(".jp-InputArea-editor")).to_have_text(
            re.compile(r"\s*".join(re.escape(line) for line in text.splitlines())), timeout=WAIT_MS)

    def save(self) -> None:
        """Save the notebook (Ctrl+S) and wait until the file on disk has this content."""
        self.activate()
        before = self.path.stat().st_mtime_ns
        self.cell(0).locator(".jp-InputPrompt").click()
        self.page.keyboard.press("ControlOrMeta+s")
        deadline = time.monotonic() + WAIT_MS / 1000
        while self.path.stat().st_mtime_ns == before or self.js(
                "return panel.context.model.dirty;"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.path.name} was not saved")
            time.sleep(0.1)

    def read_saved(self) -> Any:
        """Save, then read the notebook file from disk with nbformat."""
        self.save()
        return read_notebook_file(self.path)

    def screenshot(self, name: str) -> Path:
        """Save a screenshot of the page with this notebook in front."""
        self.activate()
        return screenshot(self.page, name)


class Panel:
    """The jupyter-ci side panel."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.root = page.locator('[data-jupyter-ci="panel"]')

    def part(self, name: str) -> Locator:
        """Return the element(s) with data-jupyter-ci=name inside the panel."""
        return self.root.locator(f'[data-jupyter-ci="{name}"]')

    def open(self) -> None:
        """Open the panel from its tab in the right sidebar."""
        tab = self.page.locator('.jp-SideBar.jp-mod-right [data-id="jupyter-ci-panel"]')
        expect(tab).to_be_visible(timeout=WAIT_MS)
        if "lm-mod-current" not in (tab.get_attribute("class") or ""):
            tab.click()
        expect(self.root).to_be_visible(timeout=WAIT_MS)

    def ask(self, prompt: str) -> None:
        """Type a prompt and press Enter."""
        box = self.part("prompt")
        expect(box).to_be_enabled(timeout=WAIT_MS)
        box.click()
        box.fill(prompt)
        expect(box).to_have_value(prompt)
        box.press("Enter")

    def message(self, kind: str) -> Locator:
        """Return the panel message of this kind."""
        return self.root.locator(f'[data-jupyter-ci="message"][data-jupyter-ci-kind="{kind}"]')


class Lab:
    """The JupyterLab page of one test."""

    def __init__(self, page: Page, server: LabServer, workspace: str) -> None:
        self.page = page
        self.server = server
        self.workspace = workspace
        self.panel = Panel(page)
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        self.page_error_stacks: list[str] = []
        self.upstream_page_errors: list[str] = []  # tests/ui/fixtures.py UPSTREAM_PAGE_ERRORS
        # Under real-time collaboration the server saves each shared notebook itself, so a
        # save from the page (Ctrl+S, trusting a notebook) can find the file newer than the
        # page's copy and JupyterLab asks whether to overwrite it (JupyterLab's and
        # jupyter-collaboration's race: seen about 1 run in 4; the contents are the same,
        # both being the shared document). Answer as a user would: what a test judges is
        # what the page and the file hold after the save, which this dialog would block.
        page.add_locator_handler(
            page.locator(".jp-Dialog", has_text="has changed on disk"),
            lambda dialog: dialog.locator("button", has_text="Overwrite").click())

    def goto(self, tree: str = "") -> None:
        """Load JupyterLab in this test's fresh workspace, optionally opening a file."""
        path = f"/lab/workspaces/{self.workspace}" + (f"/tree/{tree}" if tree else "")
        self.page.goto(f"{self.server.url}{path}?reset&token={self.server.token}")
        self.page.wait_for_function("() => !!window.jupyterapp && window.jupyterapp.started",
                                    timeout=WAIT_MS)
        self.page.evaluate("() => window.jupyterapp.restored")
        expect(self.page.locator("#jp-main-dock-panel")).to_be_visible(timeout=WAIT_MS)
        # The file browser only takes room from the notebook in screenshots.
        self.page.evaluate("() => window.jupyterapp.shell.collapseLeft()")

    def screenshot(self, name: str) -> Path:
        """Save a screenshot of the whole page under tests/ui/artifacts/."""
        return screenshot(self.page, name)

    def response_bodies(self) -> list[str]:
        """Return a list that gathers the body of every response the page gets from now on."""
        bodies: list[str] = []

        def keep(response: Response) -> None:
            with contextlib.suppress(Error):  # bodies of redirects and aborted requests
                bodies.append(response.text())

        self.page.on("response", keep)
        return bodies

    def open_notebook(self, name: str, sources: list[str],
                      kernelspec: dict[str, str] = KERNELSPEC) -> Notebook:
        """Write a notebook with these cells and open it; wait for its kernel to be idle."""
        path = write_notebook(self.server.root, name, sources, kernelspec)
        relative = path.relative_to(self.server.root).as_posix()
        if self.page.url == "about:blank":
            self.goto(relative)
        else:
            # The command's result is the widget: not returned (too deep to serialize).
            self.page.evaluate(
                "p => window.jupyterapp.commands.execute('docmanager:open', {path: p})"
                ".then(() => null)", relative)
        notebook = self.reload_target(path)
        expect(notebook.cells).to_have_count(len(sources), timeout=WAIT_MS)
        notebook.wait_kernel_idle()
        return notebook

    def reload(self, notebook: Notebook) -> Notebook:
        """Load the page again, unsaved changes lost, and reopen `notebook` (on its kernel)."""
        # JupyterLab asks before leaving a page with unsaved changes: leave.
        self.page.once("dialog", lambda dialog: dialog.accept())
        self.goto(notebook.path.relative_to(self.server.root).as_posix())
        return self.reload_target(notebook.path)

    def reload_target(self, path: Path) -> Notebook:
        """Return the open notebook at `path` (its kernel may be busy)."""
        tab = self.page.locator("#jp-main-dock-panel .lm-TabBar-tab", has_text=path.name)
        expect(tab).to_have_count(1, timeout=WAIT_MS)
        panel_id = tab.get_attribute("data-id")
        assert panel_id, f"no widget id on the tab of {path.name}"
        return Notebook(self.page, panel_id, path)


def read_notebook_file(path: Path) -> Any:
    """Read a notebook file with nbformat, waiting out a save the server is writing."""
    # jupyter_server writes a file in place (its "atomic" writing keeps a backup, it renames
    # nothing in), so a reader can meet the file empty or half written while the server saves.
    deadline = time.monotonic() + WAIT_MS / 1000
    while True:
        try:
            return nbformat.read(path, as_version=4)
        except (nbformat.reader.NotJSONError, json.JSONDecodeError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def screenshot(page: Page, name: str) -> Path:
    """Save a screenshot of the whole page as tests/ui/artifacts/<name>.png."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def _has(css_class: str) -> re.Pattern[str]:
    """Match a class attribute that contains `css_class`."""
    return re.compile(rf"(^|\s){re.escape(css_class)}(\s|$)")
