"""The example notebook runs top to bottom headless, against the fake model server."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from tests.fakellm import FakeLLM, Turn
from tests.nbrun import openai_env, text_of

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "getting-started.ipynb"
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
