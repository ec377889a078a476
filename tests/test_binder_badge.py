"""README's Binder badge: written from the repository's remote, never a placeholder."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "binder_badge.py"
OPENS = "?urlpath=lab/tree/examples/getting-started.ipynb"


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("binder_badge", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("remote", "spec"), [
    ("https://github.com/ana/jupyter-ci.git", "gh/ana/jupyter-ci/HEAD"),
    ("git@github.com:ana/jupyter-ci.git", "gh/ana/jupyter-ci/HEAD"),
    ("ssh://git@github.com/ana/jupyter-ci", "gh/ana/jupyter-ci/HEAD"),
    ("https://gitlab.com/team/sub/jupyter-ci.git", "gl/team%2Fsub%2Fjupyter-ci/HEAD"),
    ("https://git.example.org/ana/jupyter-ci",
     "git/https%3A%2F%2Fgit.example.org%2Fana%2Fjupyter-ci.git/HEAD"),
])
def test_each_kind_of_remote_gets_its_binder_url(remote: str, spec: str) -> None:
    assert script().binder_url(remote) == f"https://mybinder.org/v2/{spec}{OPENS}"


def test_the_readme_holds_no_placeholder_but_the_scripts_markers() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "OWNER/" not in readme
    assert script().BLOCK.search(readme), "no binder-badge markers"
    assert "scripts/binder_badge.py" in readme


def test_the_script_writes_the_badge_from_origin_and_changes_nothing_without_one(
    tmp_path: Path
) -> None:
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    before = (tmp_path / "README.md").read_text()
    run = [sys.executable, str(SCRIPT), "--readme", str(tmp_path / "README.md")]
    none = subprocess.run(run, capture_output=True, text=True, check=False)
    assert none.returncode == 1 and "No `origin` remote" in none.stderr
    assert (tmp_path / "README.md").read_text() == before
    subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin",
                    "git@github.com:ana/jupyter-ci.git"], check=True)
    for _ in range(2):  # writing it again leaves one badge
        subprocess.run(run, capture_output=True, check=True)
    after = (tmp_path / "README.md").read_text()
    badges = re.findall(r"\[!\[Binder\]\(https://mybinder\.org/badge_logo\.svg\)\]\(([^)]+)\)",
                        after)
    assert badges == [f"https://mybinder.org/v2/gh/ana/jupyter-ci/HEAD{OPENS}"]
    assert after.replace(badges[0], "") != before and len(after.splitlines()) <= len(
        before.splitlines()) + 1


@pytest.mark.parametrize("local", ["/work/jupyter-ci", "file:///work/jupyter-ci", "../jupyter-ci"])
def test_a_clone_of_a_local_path_gets_a_clear_message_and_no_badge(
    tmp_path: Path, local: str
) -> None:
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin", local], check=True)
    before = (tmp_path / "README.md").read_text()
    done = subprocess.run([sys.executable, str(SCRIPT), "--readme", str(tmp_path / "README.md")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"`origin` is {local!r}, not a public git server's URL" in done.stderr
    assert "--remote https://github.com/" in done.stderr
    assert (tmp_path / "README.md").read_text() == before
