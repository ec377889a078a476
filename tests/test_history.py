"""Generated cells in IPython's history, and nothing of ours in the user's cells after an ask.

Run by the whole suite with the newest IPython and by scripts/test.sh's floors run with the
oldest the package declares (IPython 8 counts a cell after running it: a step stored under
the `%%ask` cell's own number made IPython print "ERROR! Session/line number was not unique"
into the user's next cell).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from tests.fakellm import FakeLLM, Turn
from tests.kernelrun import Execution, Kernel
from tests.nbrun import openai_env

FRONTEND = {"jupyter_ci_frontend": {"protocol": 2, "generated": []}, "cellId": "ask-1"}
STEPS = ("a = 1\nprint('step one')", "b = a + 1\nb", "print(undefined)",
         "undefined = 3\nprint('fixed')")


def code(src: str) -> Turn:
    return Turn("", tool_calls=[("run_python", {"code": src})])


@pytest.fixture
def kernel(fake: FakeLLM, tmp_path: Path) -> Iterator[Kernel]:
    # A history database of its own, so the test reads only this kernel's lines.
    env = {**openai_env(fake), "IPYTHONDIR": str(tmp_path / "ipython")}
    k = Kernel(env, str(tmp_path))
    assert k.execute("%load_ext jupyter_ci").reply["content"]["status"] == "ok"
    yield k
    k.close()


def shown(run: Execution) -> list[str]:
    """Return what a cell showed: its streams, results, displays and errors, as text."""
    found = []
    for msg in run.of_type("stream", "execute_result", "display_data", "error"):
        content = msg["content"]
        found.append(content.get("text") or json.dumps(content.get("data") or content))
    return found


def value(kernel: Kernel, expression: str) -> object:
    """Return a JSON value computed in the kernel by a cell the user runs."""
    run = kernel.execute(f"import json as _j; print(_j.dumps({expression}))")
    assert run.reply["content"]["status"] == "ok", shown(run)
    return json.loads("".join(shown(run)))


def test_the_users_cells_after_an_ask_show_only_their_own_output(
    fake: FakeLLM, kernel: Kernel
) -> None:
    session = value(kernel, "get_ipython().history_manager.session_number")
    fake.push(*(code(step) for step in STEPS), Turn("Done."))
    ask = kernel.execute("%%ask\nfour steps", FRONTEND)
    assert ask.reply["content"]["status"] == "ok"
    for i in range(5):
        run = kernel.execute(f"print('mine {i}')")
        assert shown(run) == [f"mine {i}\n"]
    # What IPython's history thread has not written yet is written now, in this cell.
    flush = kernel.execute("get_ipython().history_manager.writeout_cache()")
    assert shown(flush) == []
    fake.push(code("c = 5"), Turn("Again."))
    assert kernel.execute("%%ask\nonce more", FRONTEND).reply["content"]["status"] == "ok"
    assert shown(kernel.execute("print('after')")) == ["after\n"]
    assert shown(kernel.execute("get_ipython().history_manager.writeout_cache()")) == []
    # IPython moves to a new history session when a line number was taken twice.
    assert value(kernel, "get_ipython().history_manager.session_number") == session


def test_steps_have_their_own_numbers_in_in_ih_and_the_history_database(
    fake: FakeLLM, kernel: Kernel
) -> None:
    fake.push(*(code(step) for step in STEPS), Turn("Done."))
    ask = kernel.execute("%%ask\nfour steps", FRONTEND)
    data = ask.comm_data()
    ask_count = data[0]["execution_count"]
    counts = [d["execution_count"] for d in data if d["type"] == "step_end"]
    assert counts == [ask_count + 1 + i for i in range(len(STEPS))]
    # ipykernel reports the last step's count for the %%ask cell; the user's next is after.
    assert ask.reply["content"]["execution_count"] == counts[-1]
    nxt = kernel.execute("x = 1")
    assert nxt.reply["content"]["execution_count"] == counts[-1] + 1
    inputs = value(kernel, f"[In[{ask_count}]] + In[{counts[0]}:{counts[-1] + 1}]")
    assert inputs == ["get_ipython().run_cell_magic('ask', '', 'four steps\\n')", *STEPS]
    assert value(kernel, f"_ih[{counts[1]}]") == STEPS[1]
    kernel.execute("get_ipython().history_manager.writeout_cache()")
    hm = "get_ipython().history_manager"
    stored = value(kernel, f"{hm}.db.execute('SELECT line, source_raw FROM history WHERE "
                           f"session = ?', ({hm}.session_number,)).fetchall()")
    assert isinstance(stored, list)
    numbers = [n for n, _ in stored]
    assert len(numbers) == len(set(numbers))  # no line number twice
    by_number = {n: s for n, s in stored}
    assert [by_number[c] for c in counts] == list(STEPS)
    assert by_number[ask_count] == "%%ask\nfour steps"
    assert by_number[counts[-1] + 1] == "x = 1"
    history = "".join(shown(kernel.execute(f"%history -n {counts[0]}-{counts[-1]}")))
    assert "b = a + 1" in history and f"{counts[1]}:" in history


def test_a_step_stopped_by_its_timeout_leaves_no_number_taken_twice(
    fake: FakeLLM, kernel: Kernel
) -> None:
    # IPython 8 stores a cell's input, then counts it when it ends: an interrupt in between
    # (the step's timeout) must not give the next step the same number.
    session = value(kernel, "get_ipython().history_manager.session_number")
    fake.push(code("import time\ntime.sleep(30)"), code("y = 2\nprint('quick')"), Turn("Ok."))
    ask = kernel.execute("%%ask --timeout 1\nwait, then be quick", FRONTEND)
    assert ask.reply["content"]["status"] == "ok"
    ends = [d for d in ask.comm_data() if d["type"] == "step_end"]
    assert [e["status"] for e in ends] == ["timeout", "ok"]
    for i in range(3):
        assert shown(kernel.execute(f"print('mine {i}')")) == [f"mine {i}\n"]
    assert shown(kernel.execute("get_ipython().history_manager.writeout_cache()")) == []
    assert value(kernel, "get_ipython().history_manager.session_number") == session
    numbers = value(kernel, "[n for n, in get_ipython().history_manager.db.execute("
                            "'SELECT line FROM history WHERE session = ?', "
                            "(get_ipython().history_manager.session_number,))]")
    assert isinstance(numbers, list) and len(numbers) == len(set(numbers))


def test_a_run_cut_short_after_storing_its_input_keeps_its_number(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A KeyboardInterrupt can end run_cell after it stored the input and before it counted
    # the cell (IPython 8 counts last): that number is taken all the same.
    from jupyter_ci.kernel.executor import ShellExecutor

    hm = shell.history_manager
    assert hm is not None
    store_output = hm.store_output

    def cut_short(line: int) -> None:
        monkeypatch.setattr(hm, "store_output", store_output)  # once
        raise KeyboardInterrupt

    def step_then_cut(line: str, cell: str) -> None:
        executor = ShellExecutor(shell, passthrough=False)
        monkeypatch.setattr(hm, "store_output", cut_short)
        assert executor.run("a = 1", 5).status == "interrupted"
        assert executor.run("b = 2", 5).status == "ok"

    shell.register_magic_function(step_then_cut, "cell")
    assert shell.run_cell("%%step_then_cut\nsteps", store_history=True).success
    assert shell.run_cell("c = 3", store_history=True).success
    assert shell.user_ns["b"] == 2
    lines = [line for line, *_ in hm.db_input_cache]
    assert len(lines) == len(set(lines)), lines
    assert hm.input_hist_raw[-1] == "c = 3" and len(hm.input_hist_raw) - 1 == lines[-1]
