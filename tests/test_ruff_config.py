"""The project's ruff settings leave notebooks alone: saved model-written cells break no check."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
# What a model writes in a hurry: an unused import, unsorted imports, two statements a line.
MODEL_CELL = "import os\nimport pandas as pd\nx = pd.DataFrame({'a': [1]})  ;  y=1\nx\n"


def ruff(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_ruff_skips_notebooks_in_examples_and_user_folders(tmp_path: Path) -> None:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%%ask\nPlot it."), nbformat.v4.new_code_cell(
        MODEL_CELL)]
    for place in ("examples/getting-started.ipynb", "analysis.ipynb", "work/data/mine.ipynb"):
        (tmp_path / place).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, tmp_path / place)
    done = ruff(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr

    # The same code in a Python file is still checked: the settings were read, not ignored.
    (tmp_path / "module.py").write_text(MODEL_CELL)
    flagged = ruff(tmp_path)
    assert flagged.returncode == 1 and "F401" in flagged.stdout, flagged.stdout
