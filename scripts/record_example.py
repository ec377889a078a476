"""(Re)write examples/recordings/: the example notebook's asks, answered by a scripted model.

Runs the notebook's code cells in an in-process IPython shell with jupyter-ci loaded, the
asks answered by a scripted stand-in for a model (its code below; its final answers are
computed from the results, so they are true for the example's data) and recorded with
c.JupyterCI.record_dir. The output is deterministic: tests/test_example_notebook.py checks
the shipped recordings equal a fresh run, so edit a prompt here and in the notebook together,
then run `python scripts/record_example.py`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "getting-started.ipynb"
OUT = ROOT / "examples" / "recordings"

MONTHLY = """\
monthly = (sales.groupby([sales["date"].dt.to_period("M"), "region"])["revenue"]
           .sum().unstack("region").round(0))
monthly"""
PLOT = """\
import matplotlib.pyplot as plt

ax = monthly.plot(figsize=(9, 4), marker="o", title="Monthly revenue by region")
ax.set_xlabel("month")
ax.set_ylabel("revenue")
plt.show()

growth = (monthly.iloc[-1] / monthly.iloc[0] - 1).sort_values(ascending=False)
print(growth.map("{:+.1%}".format).to_string())"""
BEST = """\
region = growth.index[0]
by_month = monthly[region].sort_values(ascending=False)
best, runner_up = by_month.index[0], by_month.index[1]
print(f"{region}: best month {best}, revenue {by_month.iloc[0]:,.0f}, "
      f"{by_month.iloc[0] - by_month.iloc[1]:,.0f} more than {runner_up}")"""


def replies(ns: dict[str, Any]) -> list[Any]:
    """Script both asks: narration, code, then answers read from the kernel's results."""
    from jupyter_ci.agent.types import ModelReply, ModelRequest, ToolCall

    def run(text: str, code: str, call_id: str) -> ModelReply:
        return ModelReply(text, (ToolCall(call_id, "run_python", json.dumps({"code": code})),))

    def grew(_: ModelRequest) -> ModelReply:
        growth, monthly = ns["growth"], ns["monthly"]
        top = growth.index[0]
        return ModelReply(
            f"**{top} grew most**: its revenue went from {monthly[top].iloc[0]:,.0f} in "
            f"{monthly.index[0]} to {monthly[top].iloc[-1]:,.0f} in {monthly.index[-1]} "
            f"({growth.iloc[0]:+.1%}). Step 1's table has every month; `monthly` and "
            "`growth` are now variables of this kernel.")

    def best(_: ModelRequest) -> ModelReply:
        by_month = ns["by_month"]
        return ModelReply(
            f"**{by_month.index[0]}** was {ns['region']}'s best month, with "
            f"{by_month.iloc[0]:,.0f} in revenue: {by_month.iloc[0] - by_month.iloc[1]:,.0f} "
            f"more than the next best, {by_month.index[1]}.")

    return [
        run("I'll total the revenue per month and region first.", MONTHLY, "call_monthly"),
        run("Now the line chart, and each region's growth from the first month to the last.",
            PLOT, "call_plot"),
        grew,
        run("Looking at that region's months, best first.", BEST, "call_best"),
        best,
    ]


@contextlib.contextmanager
def in_folder(path: Path) -> Iterator[None]:
    """Run in `path`, as a kernel started for the notebook would."""
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def record(out: Path, log: Callable[[str], None] = print) -> list[Path]:
    """Run the example's cells with the scripted model, recording its asks into `out`."""
    os.environ["MPLBACKEND"] = "agg"  # no display here; the notebook's kernel shows the plot
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    import jupyter_ci
    from jupyter_ci.models.scripted import register

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    jupyter_ci.load_ipython_extension(shell)
    register("example", replies(shell.user_ns))
    cells = json.loads(EXAMPLE.read_text(encoding="utf-8"))["cells"]
    with tempfile.TemporaryDirectory() as tmp, in_folder(EXAMPLE.parent):
        shell.run_cell(f'%config JupyterCI.record_dir = "{tmp}"')
        shell.run_cell('%config JupyterCI.model = "scripted:example"')
        for cell in cells:
            if cell["cell_type"] != "code":
                continue
            with contextlib.redirect_stdout(io.StringIO()):
                result = shell.run_cell("".join(cell["source"]))
            if not result.success:
                raise SystemExit(f"A cell of {EXAMPLE.name} failed: {result.error_in_exec!r}")
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        written = []
        for path in sorted(Path(tmp).glob("*.json")):
            written.append(Path(shutil.copy(path, out / path.name)))
            log(f"{out / path.name}: {json.loads(path.read_text())['prompt']!r}")
    return written


def main() -> None:
    """Write the recordings (to examples/recordings/, or the folder given)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    record(args.out)


if __name__ == "__main__":
    main()
