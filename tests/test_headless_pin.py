"""A notebook answered in JupyterLab, run headless from any folder: not re-asked, run once.

JupyterLab leaves `--pin <prompt hash>` in the `%%ask` line and the steps as cells below.
nbclient, `jupyter nbconvert --execute` and papermill (with or without `--cwd`) send only the
source, from whatever folder they start in: the pin is what keeps them from asking again and
so from running the steps twice (inline, then as the cells below).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from jupyter_ci.kernel.record import pin_of, prompt_hash
from jupyter_ci.kernel.signing import sign
from tests.fakellm import FakeLLM, Turn
from tests.nbrun import openai_env, run_cells, text_of

PROMPT = "append a line to the log"
STEP = "with open('side.log', 'a') as log:\n    log.write('step ran\\n')"


def made_in_jupyterlab(folder: Path, prompt: str = PROMPT) -> Path:
    """Write a notebook as JupyterLab leaves it: pinned ask, its step as the cell below."""
    nb = nbformat.v4.new_notebook()
    pin = pin_of(prompt_hash(PROMPT, None))
    nb.cells = [nbformat.v4.new_code_cell("%load_ext jupyter_ci"),
                nbformat.v4.new_code_cell(f"%%ask --pin {pin}\n{prompt}"),
                nbformat.v4.new_code_cell(STEP, metadata={"jupyter_ci": {
                    "ask_id": "a1b2c3", "step": 1, "model": "openai:gpt-test",
                    "attempts": []}})]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "report.ipynb"
    nbformat.write(nb, path)
    return path


def folder(path: Path) -> Path:
    """Make a folder for one run's kernel and return it."""
    path.mkdir(parents=True, exist_ok=True)
    return path


def log_lines(folder: Path) -> list[str]:
    """Return what the step appended, where the kernel ran."""
    log = folder / "side.log"
    return log.read_text().splitlines() if log.exists() else []


def runner_env(fake: FakeLLM) -> dict[str, str]:
    """The runner's environment (kernels inherit it): the fake model, nothing naming the file."""
    env = openai_env(fake)
    env.pop("JUPYTER_CI_NOTEBOOK", None)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                         env.get("PYTHONPATH", "")])
    return env


def test_nbclient_in_another_folder_does_not_ask_and_runs_the_step_once(
    fake: FakeLLM, tmp_path: Path
) -> None:
    path = made_in_jupyterlab(tmp_path / "made")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    nb = nbformat.read(path, as_version=4)
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=90, kernel_name="python3",
                   resources={"metadata": {"path": str(elsewhere)}}).execute(
        env=runner_env(fake))
    assert fake.calls() == 0
    assert log_lines(elsewhere) == ["step ran"]
    assert "Not asked again" in text_of(nb.cells[1])


@pytest.mark.parametrize("cwd_option", [False, True], ids=["papermill", "papermill --cwd"])
def test_papermill_from_another_folder_does_not_ask_and_runs_the_step_once(
    fake: FakeLLM, tmp_path: Path, cwd_option: bool
) -> None:
    path = made_in_jupyterlab(tmp_path / "made")
    start = tmp_path / "start"
    start.mkdir()
    args = [sys.executable, "-m", "papermill", str(path), str(tmp_path / "out.ipynb"),
            "--kernel", "python3", "--log-level", "WARNING"]
    if cwd_option:
        args += ["--cwd", str(path.parent)]
    subprocess.run(args, cwd=start, env=runner_env(fake), check=True, timeout=180,
                   capture_output=True)
    ran_in = path.parent if cwd_option else start
    assert fake.calls() == 0
    assert log_lines(ran_in) == ["step ran"]
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert "Not asked again" in text_of(out.cells[1])


def test_nbconvert_execute_from_another_folder_does_not_ask_and_runs_the_step_once(
    fake: FakeLLM, tmp_path: Path
) -> None:
    path = made_in_jupyterlab(tmp_path / "sub" / "made")
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook",
                    "--execute", str(path.relative_to(tmp_path)), "--output", "out"],
                   cwd=tmp_path, env=runner_env(fake), check=True, timeout=180,
                   capture_output=True)
    assert fake.calls() == 0
    # nbconvert starts the kernel in the notebook's folder.
    assert log_lines(path.parent) == ["step ran"]


def test_a_prompt_edited_after_its_pin_is_asked_again_and_says_so(
    fake: FakeLLM, tmp_path: Path
) -> None:
    pin = pin_of(prompt_hash(PROMPT, None))
    fake.push(Turn("Nothing to do."))
    nb = run_cells([f"%%ask --pin {pin}\nan edited prompt"], openai_env(fake), tmp_path)
    assert fake.calls() == 1
    assert "its `--pin` is for the earlier prompt" in text_of(nb.cells[1])


def test_an_ask_answered_headless_is_replayed_by_the_next_headless_run(
    fake: FakeLLM, tmp_path: Path
) -> None:
    cells = ["%%ask\nkeep a log line", "print(open('side.log').read().count('step ran'))"]
    fake.push(Turn("", tool_calls=[("run_python", {"code": STEP})]), Turn("Logged."))
    first = run_cells(cells, openai_env(fake), folder(tmp_path / "one"))
    assert fake.calls() == 2 and text_of(first.cells[2]).strip() == "1"
    # Another run of the notebook, another kernel: the step runs once more, the model is not
    # asked (the step's outputs are those the answer was written from).
    second = run_cells(cells, openai_env(fake), folder(tmp_path / "one"))
    assert fake.calls() == 2
    assert "Reusing an earlier headless run of this cell" in text_of(second.cells[1])
    assert "Logged." in text_of(second.cells[1])
    assert text_of(second.cells[2]).strip() == "2"
    # --refresh asks again.
    fake.push(Turn("Asked again."))
    third = run_cells(["%%ask --refresh\nkeep a log line"], openai_env(fake),
                      folder(tmp_path / "three"))
    assert fake.calls() == 3 and "Asked again." in text_of(third.cells[1])


def test_a_kept_answer_edited_by_someone_else_is_not_replayed(
    fake: FakeLLM, tmp_path: Path, private_jupyter_data: Path
) -> None:
    fake.push(Turn("", tool_calls=[("run_python", {"code": "print('mine')"})]), Turn("Mine."))
    run_cells(["%%ask\nprint mine"], openai_env(fake), folder(tmp_path / "one"))
    [kept] = (private_jupyter_data / "jupyter_ci" / "headless").glob("*.json")
    kept.write_text(kept.read_text().replace("print('mine')", "print('theirs')"))
    fake.push(Turn("Asked."))
    nb = run_cells(["%%ask\nprint mine"], openai_env(fake), folder(tmp_path / "two"))
    assert fake.calls() == 3 and "theirs" not in text_of(nb.cells[1])


def test_refreshing_a_pinned_ask_headless_warns_that_the_old_cells_still_run(
    fake: FakeLLM, tmp_path: Path
) -> None:
    pin = pin_of(prompt_hash(PROMPT, None))
    fake.push(Turn("Asked again."))
    nb = run_cells([f"%%ask --refresh --pin {pin}\n{PROMPT}"], openai_env(fake), tmp_path)
    assert fake.calls() == 1
    assert "its generated cells below still run after this cell" in text_of(nb.cells[1])


ANSWER = "The log has one more line."


def answered_in_jupyterlab(folder: Path) -> Path:
    """The pinned notebook with the ask record JupyterLab saves, signed by this user's kernel."""
    path = made_in_jupyterlab(folder)
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].metadata["jupyter_ci"] = sign({
        "version": 1, "ask_id": "a1b2c3", "prompt_hash": prompt_hash(PROMPT, None),
        "model": "openai:gpt-test", "status": "done", "answer": ANSWER, "steps": 1,
        "tokens": 10, "created": "2026-11-01T00:00:00+00:00"}, PROMPT)
    nbformat.write(nb, path)
    return path


def ask_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if c.source.startswith("%%ask"))


@pytest.mark.parametrize("how", ["plain", "--cwd", "--inject-paths"])
def test_papermill_from_another_folder_shows_the_recorded_answer(
    fake: FakeLLM, tmp_path: Path, how: str
) -> None:
    path = answered_in_jupyterlab(tmp_path / "made")
    start = folder(tmp_path / "start")
    output = folder(tmp_path / "runs") / "out.ipynb"  # not where the kernel looks
    args = [sys.executable, "-m", "papermill", os.path.relpath(path, start),
            os.path.relpath(output, start), "--kernel", "python3", "--log-level", "WARNING"]
    args += {"plain": [], "--cwd": ["--cwd", str(path.parent)],
             "--inject-paths": ["--inject-paths"]}[how]
    env = {**runner_env(fake), "PWD": str(start)}  # as the shell that runs papermill sets it
    subprocess.run(args, cwd=start, env=env, check=True, timeout=180, capture_output=True)
    shown = text_of(ask_cell(nbformat.read(output, as_version=4)))
    assert fake.calls() == 0
    assert "Reusing the earlier answer" in shown and ANSWER in shown, shown
    assert log_lines(path.parent if how == "--cwd" else start) == ["step ran"]


def test_papermills_injected_input_path_names_the_notebook(
    fake: FakeLLM, tmp_path: Path
) -> None:
    # What `papermill --inject-paths` (or parameters={"PAPERMILL_INPUT_PATH": ...}) injects.
    path = answered_in_jupyterlab(tmp_path / "made")
    nb = nbformat.read(path, as_version=4)
    cells = [f"PAPERMILL_INPUT_PATH = {str(path)!r}", *(c.source for c in nb.cells)]
    ran = run_cells(cells, runner_env(fake), folder(tmp_path / "elsewhere"))
    shown = text_of(ask_cell(ran))
    assert fake.calls() == 0 and ANSWER in shown, shown
