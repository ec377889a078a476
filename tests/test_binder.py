"""Build the project as Binder does (binder/postBuild in a fresh venv) and open the example.

repo2docker builds an image from binder/ (no Docker engine here): it installs
binder/environment.yml, then runs binder/postBuild from the repository's root. This test
runs that same postBuild in a fresh venv made from a copy of the repository's files (what a
clone holds), with no provider key: the labextension must be installed, JupyterLab must open
the example at the README's Binder URL, and the example must run top to bottom in that
venv's kernel, its asks replayed, showing a table and a plot. Packages come from the
package index pip is configured with, as in test_packaging.py.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.request
import venv
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.nbrun import clean_env
from tests.test_example_notebook import check_replayed

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TOKEN = "binder-test-token"
EXAMPLE_URL = "lab/tree/examples/getting-started.ipynb"


def run(*args: str | Path, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return ANSI.sub("", done.stdout + done.stderr)


def copy_of_the_repository(target: Path) -> Path:
    """Copy the files a clone would hold (tracked, or new and not ignored), nothing built."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():  # a file deleted but not yet committed is listed too
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read().decode()


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[Path, Path, dict[str, str]]]:
    """Build the repository copy as binder/postBuild says; yield (repo, venv bin, env)."""
    repo = copy_of_the_repository(tmp_path / "repo")
    assert not (repo / "jupyter_ci" / "labextension").exists()  # built by postBuild, not copied
    venv.create(tmp_path / "venv", with_pip=True)
    bin_dir = tmp_path / "venv" / "bin"
    # No provider key or model anywhere; `python` and `pip` are the fresh venv's, as in the
    # image, where the environment's Python is first on the PATH.
    env = clean_env(PATH=f"{bin_dir}:{clean_env()['PATH']}", VIRTUAL_ENV=str(bin_dir.parent),
                    JUPYTER_CONFIG_DIR=str(tmp_path / "config"))
    env.pop("JUPYTER_CI_MODEL", None)
    env.pop("PYTHONPATH", None)  # the venv must run its own installed copy
    run("bash", repo / "binder" / "postBuild", cwd=repo, env=env)
    yield repo, bin_dir, env


def test_binder_builds_the_project_and_opens_the_example_without_a_key(
        lab: tuple[Path, Path, dict[str, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    repo, bin_dir, env = lab
    listed = run(bin_dir / "jupyter", "labextension", "list", cwd=repo, env=env)
    assert re.search(r"jupyter-ci v\S+ enabled\s+OK", listed), listed
    assert re.search(r"jupyter_ci enabled", run(bin_dir / "jupyter", "server", "extension",
                                               "list", cwd=repo, env=env))

    port = free_port()
    server = subprocess.Popen(
        [bin_dir / "jupyter", "lab", "--no-browser", "--allow-root", f"--port={port}",
         f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={repo}"],
        cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status, page = get(f"{base}/{EXAMPLE_URL}?token={TOKEN}")
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "no server"
                time.sleep(0.3)
        # The README's Binder URL opens the example, with our labextension in the page.
        assert status == 200
        page_config = json.loads(re.search(
            r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page,
            re.S).group(1))  # type: ignore[union-attr]
        assert "jupyter-ci" in {e["name"] for e in page_config["federated_extensions"]}
        status, body = get(f"{base}/api/contents/examples/getting-started.ipynb?token={TOKEN}")
        assert status == 200 and json.loads(body)["type"] == "notebook"
        # The server extension is on, and holds no key: the panel is told so.
        _, config = get(f"{base}/jupyter-ci/config?token={TOKEN}")
        assert "No model provider is configured" in json.loads(config)["problem"]
    finally:
        server.terminate()
        server.wait(timeout=30)

    # The example, top to bottom in the venv's own kernel, with no key.
    kernels = tmp_path / "kernels"
    run(bin_dir / "python", "-m", "ipykernel", "install", "--prefix", kernels,
        "--name", "binder-venv", cwd=repo, env=env)
    monkeypatch.setenv("JUPYTER_PATH", str(kernels / "share" / "jupyter"))
    folder = repo / "examples"
    nb = nbformat.read(folder / "getting-started.ipynb", as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="binder-venv",
                   resources={"metadata": {"path": str(folder)}}).execute(env=env)
    check_replayed(nb)
