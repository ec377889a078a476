"""The example notebook runs top to bottom headless, against the fake model server."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

from tests.fakellm import FakeLLM, Turn
from tests.nbrun import clean_env, openai_env, text_of

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "getting-started.ipynb"
MONTHLY = """revenue = sales.assign(revenue=sales.units * sales.price)
monthly = revenue.groupby([revenue.date.dt.to_period("M"), "region"]).revenue.sum().unstack()
monthly.plot(title="Monthly revenue by region")
growth = (monthly.iloc[-1] / monthly.iloc[0] - 1).sort_values()
print(growth.round(3).to_dict())"""
BEST = """best = monthly[growth.index[-1]]
print(best.idxmax(), round(best.max() - best.drop(best.idxmax()).max(), 2))"""


def test_the_example_notebook_runs_top_to_bottom(fake: FakeLLM, tmp_path: Path) -> None:
    notebook = tmp_path / EXAMPLE.name
    shutil.copy(EXAMPLE, notebook)
    fake.push(Turn("", tool_calls=[("run_python", {"code": MONTHLY})]),
              Turn("East grew most."),
              Turn("", tool_calls=[("run_python", {"code": BEST})]),
              Turn("Its best month beat the next by the margin printed above."))
    nb = nbformat.read(notebook, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute(
        env=openai_env(fake))
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert errors == []
    asks = [c for c in code if c.source.lstrip().startswith("%") and "ask" in c.source[:6]]
    assert len(asks) == 2
    assert "East grew most." in text_of(asks[0])
    last = text_of(asks[1])
    assert "not found" not in last and "beat the next" in last
    # The follow-up's prompt reached the model whole, question mark included.
    assert "and by how much?" in str(fake.requests[2].messages)
    assert len(fake.requests) == 4


def run_example_without_a_key(folder: Path) -> Any:
    """Copy the example and its recordings into `folder`; run it with no provider settings."""
    shutil.copytree(EXAMPLE.parent, folder, dirs_exist_ok=True)
    nb = nbformat.read(folder / EXAMPLE.name, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(folder)}}).execute(env=clean_env())
    return nb


def check_replayed(nb: Any) -> None:
    """Assert the example ran with its recorded answers: a table, a plot, both answers."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert errors == []
    asks = [c for c in code if c.source.lstrip().startswith(("%%ask", "%ask"))]
    assert len(asks) == 2
    data = [o.get("data", {}) for o in asks[0].outputs]
    assert any("<table" in str(d.get("text/html", "")) for d in data), "no table"
    assert any("image/png" in d for d in data), "no plot"
    first, second = text_of(asks[0]), text_of(asks[1])
    assert "replay:recordings" in first and "grew most" in first
    assert "best month" in second and "more than the next best" in second


def test_the_example_runs_with_no_key_replaying_its_recorded_answers(tmp_path: Path) -> None:
    check_replayed(run_example_without_a_key(tmp_path / "examples"))


def test_the_shipped_recordings_are_what_the_script_records(tmp_path: Path) -> None:
    # A prompt edited in the notebook without recording again would leave its ask unanswered.
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "record_example.py"),
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    shipped = sorted((EXAMPLE.parent / "recordings").glob("*.json"))
    assert [p.name for p in shipped] == sorted(p.name for p in tmp_path.glob("*.json"))
    for path in shipped:
        assert json.loads(path.read_text()) == json.loads((tmp_path / path.name).read_text())
    nb = nbformat.read(EXAMPLE, as_version=4)
    prompts = {json.loads(p.read_text())["prompt"] for p in shipped}
    assert all(any(p in c.source for c in nb.cells) for p in prompts)
