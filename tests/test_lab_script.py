"""scripts/lab.sh prints and opens the example notebook's URL, not the Launcher's."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "examples/getting-started.ipynb"


def test_lab_sh_prints_and_opens_the_example_notebooks_url(tmp_path: Path) -> None:
    # lab.sh itself, in a copy of the repository whose setup step only enters this venv
    # (the real one pip-installs, which the tests must not do to the shared venv).
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "lab.sh", repo / "scripts" / "lab.sh")
    (repo / "scripts" / "setup-env.sh").write_text(f". {Path(sys.executable).parent}/activate\n")
    (repo / "examples").mkdir()
    shutil.copy(ROOT / NOTEBOOK, repo / NOTEBOOK)
    opened = tmp_path / "opened.html"
    browser = tmp_path / "browser.sh"  # stands in for the browser: keeps what it was given
    browser.write_text(f'#!/bin/sh\ncat "${{1#file://}}" > {opened} || echo "$1" > {opened}\n')
    browser.chmod(0o755)
    env = {**os.environ, "HOME": str(tmp_path), "JUPYTER_CI_OPEN_BROWSER": "True",
           **{var: str(tmp_path / name) for var, name in (
               ("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
               ("JUPYTERLAB_SETTINGS_DIR", "settings"),
               ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"))}}
    log = tmp_path / "lab.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["bash", str(repo / "scripts" / "lab.sh"), "--port=0", "--ip=127.0.0.1",
             f"--ServerApp.browser={browser} %s"],
            env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = _printed_url(log, proc)
        assert re.fullmatch(rf"http://127\.0\.0\.1:\d+/lab/tree/{NOTEBOOK}\?token=\w+", url), url
        assert _status(url, log, proc) == 200
        deadline = time.monotonic() + 30
        while not (opened.exists() and opened.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert f"/lab/tree/{NOTEBOOK}?token=" in opened.read_text()
    finally:
        proc.terminate()
        proc.wait(30)


def _printed_url(log: Path, proc: subprocess.Popen[bytes]) -> str:
    """Wait for the URL the server prints for people to open; return it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"http://127\.0\.0\.1:\d+/\S*", log.read_text())
        if found:
            return found.group()
        assert proc.poll() is None, log.read_text()
        time.sleep(0.2)
    raise AssertionError(f"no URL printed:\n{log.read_text()}")


def _status(url: str, log: Path, proc: subprocess.Popen[bytes]) -> int:
    """Open the printed URL; on failure say whether the server still runs, and its log.

    A server that is still running but refuses at first (seen twice on a loaded machine in a
    full run) is asked again for up to 15 s; one that exited fails at once.
    """
    deadline = time.monotonic() + 15
    while True:
        try:
            with urllib.request.urlopen(url, timeout=30) as page:
                return int(page.status)
        except OSError as err:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{url}: {err}; the server's exit code: {proc.poll()}; "
                                     f"its log:\n{log.read_text()[-6000:]}") from err
            time.sleep(0.5)
