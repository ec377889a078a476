"""A kept headless answer is shown only while it still describes what the steps produced.

An ask answered headless keeps its steps and its answer, with a digest of each step's outputs
and of the notebook it ran in. The next headless run of that cell runs the kept steps (their
code is not asked again); when the outputs or the notebook differ, the model is asked once,
with no tools, for the answer from this run's outputs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat

from tests.fakellm import FakeLLM, Turn
from tests.nbrun import clean_env, error_of, openai_env, run_cells, text_of
from tests.test_headless_pin import folder, runner_env

ASK = "%%ask\nwhat is the region's total?"
STEP = "print('region total', region_total)"


def code(src: str, text: str = "") -> Turn:
    return Turn(text, tool_calls=[("run_python", {"code": src})])


def parameterised(where: Path) -> Path:
    """Write a notebook whose first cell holds papermill's parameters."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("region_total = 0",
                                          metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("%load_ext jupyter_ci"),
                nbformat.v4.new_code_cell(ASK)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    where.mkdir(parents=True, exist_ok=True)
    path = where / "report.ipynb"
    nbformat.write(nb, path)
    return path


def papermill(path: Path, value: int, fake: FakeLLM) -> Any:
    """Run the notebook with papermill, `region_total` set to `value`; return the ask cell."""
    out = path.with_name(f"out-{value}.ipynb")
    subprocess.run([sys.executable, "-m", "papermill", str(path), str(out), "-p",
                    "region_total", str(value), "--kernel", "python3", "--log-level",
                    "WARNING"], cwd=path.parent, env=runner_env(fake), check=True,
                   timeout=180, capture_output=True)
    cells = nbformat.read(out, as_version=4).cells
    return next(cell for cell in cells if cell.source == ASK)


def test_papermill_runs_with_two_parameter_values_get_two_true_answers(
    fake: FakeLLM, tmp_path: Path
) -> None:
    path = parameterised(tmp_path)
    fake.push(code(STEP), Turn("The region's total is 111."))
    first = text_of(papermill(path, 111, fake))
    assert "region total 111" in first and "The region's total is 111." in first
    assert fake.calls() == 2
    fake.push(Turn("The region's total is 222."))
    second = text_of(papermill(path, 222, fake))
    assert "region total 222" in second and "The region's total is 222." in second
    assert "111" not in second
    # One model turn, with no tools, written from this run's outputs; the code is not asked.
    assert fake.calls() == 3
    request = fake.requests[2]
    assert not request.body.get("tools")
    assert "region total 222" in json.dumps(request.messages) and STEP in json.dumps(
        request.messages)
    # The first value again: its answer was kept beside the second, and is true again.
    third = text_of(papermill(path, 111, fake))
    assert fake.calls() == 3 and "The region's total is 111." in third


def test_a_second_notebook_with_the_same_ask_does_not_show_the_first_ones_answer(
    fake: FakeLLM, tmp_path: Path
) -> None:
    cells = ["region_total = 5", ASK]
    fake.push(code(STEP), Turn("In the first notebook, 5."))
    run_cells(cells, openai_env(fake), folder(tmp_path / "one"))
    fake.push(Turn("Here it is 5 too."))
    other = text_of(run_cells(cells, openai_env(fake), folder(tmp_path / "two")).cells[2])
    assert "region total 5" in other and "Here it is 5 too." in other
    assert "first notebook" not in other and fake.calls() == 3


def test_without_a_model_the_earlier_answer_shows_marked_as_written_for_other_outputs(
    fake: FakeLLM, tmp_path: Path
) -> None:
    where = folder(tmp_path / "nb")
    fake.push(code(STEP), Turn("It is 111."))
    run_cells(["region_total = 111", ASK], openai_env(fake), where)
    nb = run_cells(["region_total = 222", ASK], clean_env(), where)
    shown = text_of(nb.cells[2])
    assert error_of(nb.cells[2]) is None, shown
    assert "region total 222" in shown and "It is 111." in shown
    assert "written for an earlier run with other outputs" in shown
    assert fake.calls() == 2


def test_a_tool_call_in_the_new_answer_is_refused_not_run(
    fake: FakeLLM, tmp_path: Path
) -> None:
    where = folder(tmp_path / "nb")
    fake.push(code(STEP), Turn("It is 111."))
    run_cells(["region_total = 111", ASK], openai_env(fake), where)
    fake.push(Turn("It is 222.", tool_calls=[("run_python", {"code": "print('ran anyway')"})],
                   unoffered_tools=True))  # a model that calls a tool it was not offered
    nb = run_cells(["region_total = 222", ASK], openai_env(fake), where)
    shown = text_of(nb.cells[2])
    assert "It is 222." in shown and "ran anyway" not in shown and "It is 111." not in shown
    assert fake.calls() == 3


def test_a_model_that_writes_no_new_answer_is_said_to_have_given_none(
    fake: FakeLLM, tmp_path: Path
) -> None:
    where = folder(tmp_path / "nb")
    fake.push(code(STEP), Turn("It is 111."))
    run_cells(["region_total = 111", ASK], openai_env(fake), where)
    fake.push(Turn(""))  # a model is configured; its reply holds no text
    nb = run_cells(["region_total = 222", ASK], openai_env(fake), where)
    shown = text_of(nb.cells[2])
    assert error_of(nb.cells[2]) is None, shown
    assert "No model is configured" not in shown, shown
    assert "gave no answer" in shown and "--refresh" in shown and "It is 111." in shown
    assert fake.calls() == 3
