"""scripts/lab.sh: opens the example notebook and prints how to reach the REST API and MCP.

It runs for real, in this repository, with a home, Jupyter folders and a session root of its
own (nothing of the user's is touched) and a stand-in browser. The suite's setup
(scripts/test.sh) installed `.venv`, so lab.sh must start without installing anything.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakellm import FakeLLM, Turn

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "examples/getting-started.ipynb"
# The README's REST quick start, exactly as README.md shows it; run as a user pastes it.
README_REST = "\n" + (ROOT / "tests" / "rest_quickstart.sh").read_text()


@dataclass
class Lab:
    printed: str  # lab.sh's output up to its block of instructions
    opened: Path  # what the stand-in browser was given
    token_file: Path


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """Run scripts/lab.sh on a free port until its instructions are printed."""
    opened, browser = tmp_path / "opened.html", tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\ncat "${{1#file://}}" > {opened} || echo "$1" > {opened}\n')
    browser.chmod(0o755)
    env = {name: value for name, value in os.environ.items()
           if name not in ("JUPYTER_TOKEN", "JUPYTER_TOKEN_FILE", "VIRTUAL_ENV")}
    env.update({"HOME": str(tmp_path), "JUPYTER_CI_OPEN_BROWSER": "True",
                "OPENAI_API_KEY": "k", "JUPYTER_CI_MODEL": "openai:gpt-test",
                **{var: str(tmp_path / name) for var, name in (
                    ("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                    ("JUPYTER_DATA_DIR", "data"), ("JUPYTERLAB_SETTINGS_DIR", "settings"),
                    ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"))}})
    with FakeLLM([Turn(tool_calls=[("run_python", {"code": "x ** 2"})]),
                  Turn("x squared is 1764.")]) as fake:
        env["OPENAI_BASE_URL"] = fake.openai_base_url
        log = tmp_path / "lab.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                ["bash", "scripts/lab.sh", "--port=0", "--ip=127.0.0.1",
                 f"--JupyterCI.session_root={tmp_path / 'sessions'}",
                 f"--ServerApp.browser={browser} %s"],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield Lab(_printed(log, proc), opened, tmp_path / "data" / "jupyter-ci-token")
        finally:
            proc.terminate()
            proc.wait(60)


def test_lab_sh_prints_how_to_reach_the_server_and_it_works_as_printed(lab: Lab) -> None:
    assert "jupyter-ci setup:" not in lab.printed  # installed already: nothing reinstalled
    token = lab.token_file.read_text()
    assert stat.S_IMODE(lab.token_file.stat().st_mode) == 0o600 and len(token) >= 32
    url = re.search(rf"ready: (http://127\.0\.0\.1:\d+)/lab/tree/{NOTEBOOK}"
                    r"\?file-browser-path=/&token=(\w+)", lab.printed)
    assert url and url.group(2) == token, lab.printed
    pasted = [line.strip() for line in lab.printed.splitlines()
              if line.startswith("  ")]  # the two lines to paste, as printed
    assert pasted[0] == f"export URL={url.group(1)} JUPYTER_TOKEN={token}"
    assert json.loads(_bash("\n".join(pasted))) == []  # no session yet
    mcp = next(line for line in lab.printed.splitlines() if "claude mcp add" in line)
    assert '"$URL/jupyter-ci/mcp" --header "Authorization: token $JUPYTER_TOKEN"' in mcp
    reply = _bash(pasted[0] + '\ncurl -sS -o /dev/null -w "%{http_code}" -X POST '
                  '-H "Authorization: token $JUPYTER_TOKEN" -H "Content-Type: application/json" '
                  '-H "Accept: application/json, text/event-stream" $URL/jupyter-ci/mcp -d '
                  """'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": """
                  """{"protocolVersion": "2025-06-18", "capabilities": {}, """
                  """"clientInfo": {"name": "t", "version": "1"}}}'""")
    assert reply == "200"
    deadline = time.monotonic() + 30  # a hang guard: the browser stand-in runs as it starts
    while not (lab.opened.exists() and lab.opened.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert re.search(rf"/lab/tree/{NOTEBOOK}\?file-browser-path=(/|%2F)(&|&amp;)token=\w",
                     lab.opened.read_text()), lab.opened.read_text()


def test_the_readmes_rest_quick_start_works_after_lab_sh(lab: Lab) -> None:
    export = next(line.strip() for line in lab.printed.splitlines()
                  if line.strip().startswith("export URL="))
    out = _bash(export + README_REST, stderr=True)
    assert '"execution_count": 1' in out and '"42"' in out, out
    events = re.findall(r"^event: (\w+)\ndata: (.*)$", out, re.MULTILINE)
    result = json.loads(events[-1][1])
    assert events[-1][0] == "result" and result["status"] == "done", out
    assert result["answer"] == "x squared is 1764." and '"1764"' in out
    assert not re.search(r'"status": "error"|Traceback|"message"', out), out
    # A wrong token: the server's own message, no Python traceback, no Jupyter HTML page.
    wrong = _bash(export + "\nJUPYTER_TOKEN=wrong" + README_REST, stderr=True)
    assert "Forbidden: missing or invalid token" in wrong and "no session" in wrong
    assert not re.search("Traceback|KeyError|_xsrf|<html", wrong), wrong


def _bash(script: str, stderr: bool = False) -> str:
    """Run lines in a new bash, as a user pastes them in another terminal; return the output."""
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/")})
    return done.stdout + (done.stderr if stderr else "")


def _printed(log: Path, proc: subprocess.Popen[bytes]) -> str:
    """Wait for lab.sh's block of instructions (after its closing rule); return its output."""
    deadline = time.monotonic() + 120  # a hang guard
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if re.search(r"^Stop the server with Ctrl-C here\.$", text, re.MULTILINE):
            return text
        assert proc.poll() is None, text
        time.sleep(0.2)
    raise AssertionError(f"no instructions printed:\n{log.read_text()}")


def test_the_readme_shows_the_rest_quick_start_this_file_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = [line for line in README_REST.splitlines() if line and not line.startswith("#")]
    assert "```bash\n" + "\n".join(lines) + "\n```" in readme
