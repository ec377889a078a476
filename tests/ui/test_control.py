"""Issue 23 in a real browser: edits of the user's own cells, reviewed (a diff in the cell,
Accept / Reject / Undo, Accept all), and the cost of each ask in the panel."""

from __future__ import annotations

import json
import re
from typing import Any

from playwright.sync_api import Locator, expect

from tests.fakellm import FakeLLM, Turn
from tests.ui.lab import WAIT_MS, Lab, Notebook

LOAD = "%load_ext jupyter_ci"
#: A user's cell with what a careless rewrite would lose: trailing spaces, a blank line, a tab.
OLD = "x = 1  \n\nprint(x)\t# keep me\n"
NEW = "x = 2\n\nprint(x)\t# keep me\n"


def edit(cell_id: str, source: str) -> Turn:
    """A model turn that proposes a new source for one cell."""
    return Turn(tool_calls=[("edit_cell", {"cell_id": cell_id, "source": source})])


def cell_id(nb: Notebook, index: int) -> str:
    return str(nb.js(f"return panel.content.widgets[{index}].model.id;"))


def index_of(nb: Notebook, cid: str) -> int:
    return int(nb.js(f"return panel.content.widgets.findIndex(w => w.model.id === {cid!r});"))


def source_of(nb: Notebook, cid: str) -> str:
    return nb.source(index_of(nb, cid))


def review_box(nb: Notebook, cid: str) -> Locator:
    """The review box in the cell with this id."""
    return nb.cell(index_of(nb, cid)).locator('[data-jupyter-ci="edit-review"]')


def wait_answer(nb: Notebook, ask_index: int, text: str) -> None:
    """Wait until the `%%ask` cell shows `text` and has finished, and the kernel is idle."""
    expect(nb.cell(ask_index).locator(".jp-OutputArea")).to_contain_text(text, timeout=WAIT_MS)
    nb.wait_cell_done(ask_index)
    nb.wait_kernel_idle()


def tool_results(fake: FakeLLM) -> list[str]:
    """The tool results the model was sent in its last request (OpenAI's wire)."""
    messages = fake.requests[-1].messages
    return [str(m.get("content")) for m in messages if m.get("role") == "tool"]


def saved_cell(nb: Notebook, cid: str) -> dict[str, Any]:
    """Save the notebook and return the JSON of the cell with this id, as on disk."""
    saved = nb.read_saved()
    cells = [c for c in saved.cells if c.get("id") == cid]
    assert len(cells) == 1, [c.get("id") for c in saved.cells]
    return dict(json.loads(json.dumps(cells[0])))


# ------------------------------------------------------------ point 2: edits, reviewed


def test_a_proposed_edit_is_shown_as_a_diff_accepted_not_run_then_undone(
    lab: Lab, fake: FakeLLM
) -> None:
    nb = lab.open_notebook("edit-accept", [LOAD, OLD, "%%ask\nuse 2 for x in the cell above"])
    nb.run(0)
    nb.wait_cell_done(0)
    target = cell_id(nb, 1)
    fake.push(edit(target, NEW), Turn("x is 2 now."))
    nb.run(2)

    box = review_box(nb, target)
    expect(box).to_be_visible(timeout=WAIT_MS)
    # The diff: the changed line removed and added, the others kept; nothing applied yet.
    expect(box.locator('[data-jupyter-ci-diff="removed"]')).to_have_text(["- x = 1  "])
    expect(box.locator('[data-jupyter-ci-diff="added"]')).to_have_text(["+ x = 2"])
    expect(box.locator('[data-jupyter-ci-diff="same"]')).to_have_count(3)
    assert source_of(nb, target) == OLD
    # The page answers the kernel's question itself: no Stdin box in the %%ask cell.
    expect(nb.cell(2).locator(".jp-Stdin")).to_be_hidden(timeout=WAIT_MS)
    lab.panel.open()
    expect(lab.panel.part("panel-review")).to_contain_text("1 to review", timeout=WAIT_MS)
    nb.screenshot("edit-review-diff")

    box.locator('[data-jupyter-ci="edit-accept"]').click()
    wait_answer(nb, 2, "x is 2 now.")
    assert source_of(nb, target) == NEW
    # Accepted is not run: the cell never ran and has no outputs.
    assert nb.execution_count(1) is None and nb.outputs(1).count() == 0
    assert any("accepted your edit" in r for r in tool_results(fake)), tool_results(fake)
    expect(lab.panel.part("panel-review")).to_contain_text("1 accepted", timeout=WAIT_MS)

    undo = box.locator('[data-jupyter-ci="edit-undo"]')
    expect(undo).to_be_visible(timeout=WAIT_MS)
    nb.screenshot("edit-review-accepted")
    undo.click()
    expect(box).to_have_count(0, timeout=WAIT_MS)
    assert source_of(nb, target) == OLD
    assert not lab.page_errors, lab.page_errors


def test_reject_leaves_the_cell_byte_for_byte_as_it_was(lab: Lab, fake: FakeLLM) -> None:
    nb = lab.open_notebook("edit-reject", [LOAD, OLD, "%%ask\nuse 2 for x in the cell above"])
    nb.run(0)
    nb.wait_cell_done(0)
    target = cell_id(nb, 1)
    # Metadata of its own, which a rejected edit must not touch either.
    nb.js("panel.content.widgets[1].model.setMetadata('tags', ['mine']);")
    before = saved_cell(nb, target)
    assert before["source"] == OLD and before["metadata"]["tags"] == ["mine"]
    fake.push(edit(target, NEW), Turn("Left as it was."))
    nb.run(2)

    box = review_box(nb, target)
    expect(box.locator('[data-jupyter-ci="edit-reject"]')).to_be_visible(timeout=WAIT_MS)
    box.locator('[data-jupyter-ci="edit-reject"]').click()
    wait_answer(nb, 2, "Left as it was.")
    expect(box).to_have_count(0, timeout=WAIT_MS)
    assert any("rejected your edit" in r for r in tool_results(fake)), tool_results(fake)
    assert saved_cell(nb, target) == before


def test_several_edits_are_accepted_together_from_the_ask_cell(lab: Lab, fake: FakeLLM) -> None:
    sources = [LOAD, "a = 1", "b = 1", "%%ask\nset a and b to 2"]
    nb = lab.open_notebook("edit-all", sources)
    nb.run(0)
    nb.wait_cell_done(0)
    first, second = cell_id(nb, 1), cell_id(nb, 2)
    fake.push(Turn(tool_calls=[("edit_cell", {"cell_id": first, "source": "a = 2"}),
                               ("edit_cell", {"cell_id": second, "source": "b = 2"})]),
              Turn("Both set."))
    nb.run(3)

    area = nb.cell(3).locator('[data-jupyter-ci="review-area"]')
    expect(area).to_contain_text("2 proposed edits", timeout=WAIT_MS)
    expect(review_box(nb, first)).to_be_visible(timeout=WAIT_MS)
    expect(review_box(nb, second)).to_be_visible(timeout=WAIT_MS)
    nb.screenshot("edit-review-several")
    area.locator('[data-jupyter-ci="edits-accept-all"]').click()
    wait_answer(nb, 3, "Both set.")
    assert (source_of(nb, first), source_of(nb, second)) == ("a = 2", "b = 2")
    assert sum("accepted your edit" in r for r in tool_results(fake)) == 2
    # Keep: the accepted source stays, the cell no longer offers Undo.
    review_box(nb, first).locator('[data-jupyter-ci="edit-keep"]').click()
    expect(review_box(nb, first)).to_have_count(0, timeout=WAIT_MS)
    expect(review_box(nb, second).locator('[data-jupyter-ci="edit-undo"]')).to_be_visible()
    assert source_of(nb, first) == "a = 2"


# ------------------------------------------------------------ point 3: cost


#: The test's own prices (USD per million tokens) for the fake model, set in its kernel.
PRICES = {"input": 2.0, "output": 8.0, "cached_input": 0.5, "context_window": 200_000}


def priced(input_tokens: int, output_tokens: int, cached: int) -> float:
    """What the price table above makes of these tokens."""
    fresh = input_tokens - cached
    return (fresh * PRICES["input"] + cached * PRICES["cached_input"]
            + output_tokens * PRICES["output"]) / 1_000_000


def test_the_panel_shows_each_ask_cost_the_notebook_total_and_the_context(
    lab: Lab, fake: FakeLLM
) -> None:
    config = f"%config JupyterCI.prices = {json.dumps({'openai:gpt-test': PRICES})}"
    nb = lab.open_notebook("cost", [LOAD, "%%ask\nsay hi", config, "%%ask\ncount to 3"])
    nb.run(0)
    nb.wait_cell_done(0)
    lab.panel.open()

    # Unpriced (no price covers the fake model): tokens without money.
    fake.push(Turn("Hi.", input_tokens=1_500, output_tokens=12))
    nb.run(1)
    wait_answer(nb, 1, "Hi.")
    costs = lab.panel.part("cost")
    expect(costs).to_have_text(["1,500 in · 12 out"], timeout=WAIT_MS)

    nb.run(2)
    nb.wait_cell_done(2)
    fake.push(Turn(tool_calls=[("run_python", {"code": "print(1, 2, 3)"})],
                   input_tokens=300, output_tokens=40),
              Turn("Counted.", input_tokens=46_000, output_tokens=25, cached_tokens=2_000))
    nb.run(3)
    wait_answer(nb, 3, "Counted.")
    cost = priced(46_300, 65, 2_000)
    assert f"{cost:.4f}" == "0.0901"
    expect(costs).to_have_text(
        ["1,500 in · 12 out", f"46,300 in (2,000 cached) · 65 out · ${cost:.4f}"],
        timeout=WAIT_MS)
    expect(lab.panel.part("cost-total")).to_have_text(re.compile(
        rf"2 asks · 47,800 in \(2,000 cached\) · 77 out · \${cost:.4f} \(\+ 1 without a price\)"))
    # The last turn filled 46,000 of 200,000 tokens.
    expect(lab.panel.part("context")).to_have_text("context 23% of 200k")
    lab.screenshot("panel-cost")
