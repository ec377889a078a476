"""The main path, walked as a user walks it, with every output on it read (issue 31).

Open the example and Run All; ask in a new notebook; run one's own cells after the ask;
reload the page and run them again; Restart & Run All. Every output must hold only what its
cell's own code printed or displayed: no error, warning or traceback of our machinery (as
IPython 8 printed "ERROR! Session/line number was not unique in database" into the cell
after an ask). scripts/test.sh walks it on the newest and on the oldest Jupyter stack.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.fakellm import FakeLLM, Turn
from tests.ui.lab import WAIT_MS, Lab, Notebook

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: What no output on the path may say.
STRAY = re.compile(r"ERROR!|Traceback|Warning|Exception|not unique|jupyter-ci:")
#: The example's first ask, as a model would answer it: a chart, then the growth per region.
EXAMPLE_STEP = """\
monthly = sales.groupby([sales["date"].dt.strftime("%Y-%m"), "region"])["revenue"].sum()
monthly = monthly.unstack()
monthly.plot(title="Monthly revenue by region")
growth = (monthly.iloc[-1] / monthly.iloc[0] - 1).sort_values()
growth
"""
MINE = {"print(x + 1)": "42\n", "x * 2": "82"}


def code(src: str) -> Turn:
    return Turn("", tool_calls=[("run_python", {"code": src})])


def cells(nb: Notebook) -> list[dict[str, Any]]:
    """Return the notebook's cells as the browser holds them (nbformat JSON)."""
    found: list[dict[str, Any]] = nb.model_json()["cells"]
    return found


def text_of(output: dict[str, Any]) -> str:
    """Return the text an output shows (a stream's, a result's or display's plain text)."""
    if output["output_type"] == "stream":
        return "".join(output["text"])
    if output["output_type"] == "error":
        return f"{output['ename']}: {output['evalue']}"
    return "".join(output.get("data", {}).get("text/plain", ""))


def strays(nb: Notebook) -> list[str]:
    """Return every output of the notebook that no cell's own code meant: errors, stderr,
    and text that speaks of errors, warnings or jupyter-ci itself."""
    found = []
    for index, cell in enumerate(cells(nb)):
        for output in cell.get("outputs", []):
            bad = (output["output_type"] == "error" or output.get("name") == "stderr"
                   or STRAY.search(text_of(output)))
            if bad:
                found.append(f"cell {index}: {text_of(output)[:300]}")
    return found


def index_of(nb: Notebook, source: str) -> int:
    """Return the index of the cell with this source."""
    sources = ["".join(c["source"]) for c in cells(nb)]
    return sources.index(source)


def run_mine(nb: Notebook) -> None:
    """Run the user's own cells after the ask and check each shows exactly its own output."""
    for source, shown in MINE.items():
        index = index_of(nb, source)
        nb.run(index)
        nb.wait_cell_done(index)
        outputs = cells(nb)[index]["outputs"]
        assert [text_of(o) for o in outputs] == [shown], (source, outputs)


def test_the_main_path_shows_only_what_each_cell_itself_outputs(
        lab: Lab, fake: FakeLLM) -> None:
    # The example, Run All: its two asks answered by the model, their code run here.
    root = lab.server.root
    # The session's lab root is shared: another test may have copied (and run) them.
    shutil.rmtree(root / "examples", ignore_errors=True)
    shutil.copytree(EXAMPLES, root / "examples")
    fake.push(code(EXAMPLE_STEP), Turn("**East** grew most."), Turn("March, by a little."))
    lab.goto("examples/getting-started.ipynb")
    example = lab.reload_target(root / "examples" / "getting-started.ipynb")
    example.wait_kernel_idle()
    example.command("notebook:run-all-cells")
    expect(example.generated()).to_have_count(1, timeout=WAIT_MS)
    asks = example.root.locator(".jp-Cell.jp-ci-ask")
    expect(asks.nth(1).locator(".jp-OutputArea")).to_contain_text("March", timeout=WAIT_MS)
    expect(example.generated().locator(".jp-RenderedImage img")).to_have_count(1)
    assert strays(example) == []
    example.screenshot("journey-example")

    # A new notebook: an ask, then the user's own cells, which use what the step made.
    fake.push(code("x = 41\nprint('x is', x)"), Turn("`x` is **41**."))
    nb = lab.open_notebook("journey", ["%%ask\nmake x, the answer minus one", *MINE])
    nb.run(0)
    ask = nb.root.locator(".jp-Cell.jp-ci-ask")
    expect(ask.locator(".jp-OutputArea")).to_contain_text("is 41", timeout=WAIT_MS)
    expect(nb.generated()).to_have_count(1, timeout=WAIT_MS)
    run_mine(nb)
    assert strays(nb) == []
    calls = fake.calls()

    # Reloaded: the same kernel, the same outputs.
    nb.save()
    nb = lab.reload(nb)
    nb.wait_kernel_idle()
    run_mine(nb)
    assert strays(nb) == []

    # Restart & Run All: the ask's answer is reused, its step runs again, no model call.
    ask = nb.root.locator(".jp-Cell.jp-ci-ask")
    last = index_of(nb, list(MINE)[-1])
    before = nb.prompt(last)
    nb.activate()
    nb.page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-run-all'); }")
    nb.page.locator(".jp-Dialog .jp-mod-accept").click(timeout=WAIT_MS)
    expect(ask.locator(".jp-OutputArea")).to_contain_text("Reusing the earlier answer",
                                                          timeout=WAIT_MS)
    expect(nb.cell(last).locator(".jp-InputPrompt")).not_to_have_text(before, timeout=WAIT_MS)
    nb.wait_cell_done(last)
    for source, shown in MINE.items():
        assert [text_of(o) for o in cells(nb)[index_of(nb, source)]["outputs"]] == [shown]
    assert strays(nb) == []
    assert fake.calls() == calls
    nb.screenshot("journey-restart-run-all")
    # Nor did the page log an error on the way (a refused request of ours is one).
    assert lab.console_errors == [] and lab.page_errors == []
