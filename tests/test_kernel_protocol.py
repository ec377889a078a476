"""The kernel side of docs/protocol.md, Stop, and re-run reuse, with real kernels."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.fakellm import FakeLLM, Hang, Turn
from tests.kernelrun import Kernel
from tests.nbrun import anthropic_env, openai_env, run_cells, text_of

FRONTEND = {"jupyter_ci_frontend": {"protocol": 2, "generated": []}, "cellId": "ask-cell-1"}


def code(src: str, text: str = "") -> Turn:
    return Turn(text, tool_calls=[("run_python", {"code": src})])


@pytest.fixture
def kernel(fake: FakeLLM, tmp_path: Path) -> Iterator[Kernel]:
    k = Kernel(openai_env(fake), str(tmp_path))
    assert k.execute("%load_ext jupyter_ci").reply["content"]["status"] == "ok"
    yield k
    k.close()


def test_with_the_labextension_steps_go_over_the_comm_not_into_the_cell(
    fake: FakeLLM, kernel: Kernel
) -> None:
    fake.push(code("print(undefined)"), code("undefined = 1\nprint('fixed', undefined)"),
              code("import pandas as pd\npd.DataFrame({'a': [1]})"), Turn("All **done**."))
    run = kernel.execute("%%ask\nthree steps", FRONTEND)
    assert run.reply["content"]["status"] == "ok"
    data = run.comm_data()
    # (Previews of code being written: test_the_code_is_previewed_as_the_model_writes_it.)
    sent_then = ["request_sent", "thinking", "usage"]
    assert [d["type"] for d in data if d["type"] not in ("text", "code_preview")] == [
        "ask_start", *sent_then, "step_start", "output", "step_end", *sent_then,
        "step_start", "output", "step_end", *sent_then, "step_start", "output", "step_end",
        *sent_then, "ask_end"]
    # What each call sent, for the panel's disclosure: the whole conversation, redacted.
    sent = [d for d in data if d["type"] == "request_sent"][-1]["parts"]
    assert "three steps" in json.dumps(sent) and all(p["tokens"] > 0 for p in sent)
    start, end = data[0], data[-1]
    assert start["cell_id"] == "ask-cell-1" and start["replace_ask_id"] is None
    steps = [(d["step"], d["attempt"]) for d in data if d["type"] == "step_start"]
    assert steps == [(1, 1), (1, 2), (2, 1)]
    ends = [d for d in data if d["type"] == "step_end"]
    assert [e["status"] for e in ends] == ["error", "ok", "ok"]
    assert ends[0]["error"]["ename"] == "NameError"
    assert all(isinstance(e["execution_count"], int) for e in ends)
    outputs = [d["output"] for d in data if d["type"] == "output"]
    assert outputs[1] == {"output_type": "stream", "name": "stdout", "text": "fixed 1\n"}
    assert "text/html" in outputs[2]["data"]
    record = end["record"]
    assert end["status"] == "done" and record["steps"] == 2 and record["answer"] == "All **done**."
    assert "".join(d["delta"] for d in data if d["type"] == "text").endswith("All **done**.")
    # The %%ask cell itself shows no step output: only the progress log and the answer.
    cell_text = json.dumps([m["content"] for m in run.of_type("stream", "error",
                                                               "execute_result")])
    assert "fixed 1" not in cell_text and "NameError" not in cell_text
    shown = json.dumps([m["content"] for m in run.of_type("display_data",
                                                          "update_display_data")],
                       ensure_ascii=False)
    assert "All **done**." in shown and "Step 1: failed (NameError) → fixed" in shown
    assert "Step 2: done" in shown


def test_a_rerun_with_its_cells_present_reuses_the_answer(fake: FakeLLM, kernel: Kernel) -> None:
    fake.push(code("z = 3"), Turn("z is 3."))
    first = kernel.execute("%%ask\nmake z", FRONTEND)
    record = first.comm_data()[-1]["record"]
    calls = fake.calls()
    meta = {"jupyter_ci": record, "cellId": "ask-cell-1",
            "jupyter_ci_frontend": {"protocol": 2, "generated": ["gen-1"]}}
    again = kernel.execute("%%ask\nmake z", meta)
    assert fake.calls() == calls
    assert [(d["type"], d["answer"]) for d in again.comm_data()] == [("ask_reused", "z is 3.")]
    shown = json.dumps([m["content"] for m in again.of_type("display_data")])
    assert "Reusing the earlier answer" in shown and "z is 3." in shown
    # An edited prompt asks again and tells the browser to replace the old cells.
    fake.push(Turn("Asked again."))
    edited = kernel.execute("%%ask\nmake z bigger", meta)
    assert edited.comm_data()[0]["replace_ask_id"] == record["ask_id"]
    # So does --refresh, and a record whose cells are gone.
    fake.push(Turn("Refreshed."), Turn("Cells were deleted."))
    assert kernel.execute("%%ask --refresh\nmake z", meta).comm_data()[-1]["status"] == "done"
    gone = {**meta, "jupyter_ci_frontend": {"protocol": 2, "generated": []}}
    assert kernel.execute("%%ask\nmake z", gone).comm_data()[-1]["answer"] == \
        "Cells were deleted."


@pytest.mark.parametrize("script", [[Hang(30)], [code("import time\ntime.sleep(30)")]],
                         ids=["while-the-model-answers", "while-code-runs"])
def test_stop_interrupts_the_ask_cleanly(fake: FakeLLM, kernel: Kernel, script: list) -> None:
    kernel.execute("kept = 'state'")
    fake.push(*script)
    run = kernel.execute("%%ask\nslow", FRONTEND, interrupt_after=2.0)
    assert run.reply["content"]["status"] == "error"
    assert run.reply["content"]["ename"] == "AskInterrupted"
    assert run.comm_data()[-1]["status"] == "interrupted"
    after = kernel.execute("print(kept)")
    assert after.of_type("stream")[0]["content"]["text"] == "state\n"


def test_headless_runs_reuse_a_saved_notebook_and_do_not_ask(
    fake: FakeLLM, tmp_path: Path
) -> None:
    from jupyter_ci.kernel.record import prompt_hash
    from jupyter_ci.kernel.signing import sign

    # Signed as this user's kernel signs the records it writes (same JUPYTER_DATA_DIR).
    record = sign({"version": 1, "ask_id": "a1", "prompt_hash": prompt_hash("make w", None),
                   "model": "openai:gpt-test", "status": "done", "answer": "w is 5.",
                   "steps": 1}, "make w")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext jupyter_ci"),
                nbformat.v4.new_code_cell("%%ask\nmake w", metadata={"jupyter_ci": record}),
                nbformat.v4.new_code_cell("w = 5",
                                          metadata={"jupyter_ci": {"ask_id": "a1", "step": 1}}),
                nbformat.v4.new_code_cell("print(w * 2)")]
    nbformat.write(nb, tmp_path / "saved.ipynb")
    ran = run_cells(["%%ask\nmake w", "w = 5", "print(w * 2)"], openai_env(fake), tmp_path)
    assert fake.calls() == 0
    assert "Reusing the earlier answer" in text_of(ran.cells[1])
    assert text_of(ran.cells[3]).strip() == "10"
    # Without its generated cells, the saved ask is not reused.
    nb.cells = nb.cells[:2]
    nbformat.write(nb, tmp_path / "saved.ipynb")
    fake.push(Turn("Asked."))
    run_cells(["%%ask\nmake w"], openai_env(fake), tmp_path)
    assert fake.calls() == 1


def test_a_display_updated_in_place_resends_the_step_outputs(
    fake: FakeLLM, kernel: Kernel
) -> None:
    fake.push(code("print('before')\nh = display('first', display_id=True)\nh.update('second')"),
              Turn("Updated."))
    data = kernel.execute("%%ask\nprogress", FRONTEND).comm_data()
    sent = [d for d in data if d["type"] in ("output", "set_outputs")]
    assert [d["type"] for d in sent] == ["output", "output", "set_outputs"]
    assert "transient" not in sent[1]["output"]
    final = sent[-1]["outputs"]
    assert final[0]["text"] == "before\n" and final[1]["data"]["text/plain"] == "'second'"


def cells_from(messages: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Apply step messages as the labextension does: each step's outputs at the end."""
    cells: dict[int, list[dict[str, Any]]] = {}
    clear_next: set[int] = set()
    for m in messages:
        step = m.get("step")
        if not isinstance(step, int):
            continue
        outputs = cells.setdefault(step, [])
        if m["type"] == "step_start":
            outputs.clear()
        elif m["type"] == "output":
            if step in clear_next:
                clear_next.discard(step)
                outputs.clear()
            outputs.append(m["output"])
        elif m["type"] == "clear_output":
            if m["wait"]:
                clear_next.add(step)
            else:
                outputs.clear()
        elif m["type"] == "set_outputs":
            outputs[:] = m["outputs"]
    return cells


def test_a_page_that_missed_the_start_gets_where_the_ask_stands(
    fake: FakeLLM, kernel: Kernel
) -> None:
    fake.push(code("print('try')\nprint(missing)"),
              code("missing = 1\nprint('fixed', missing)"),
              code("from IPython.display import clear_output\nprint('old')\n"
                   "clear_output(wait=True)\nprint('new')"),
              Turn("Both done."))
    meta = {**FRONTEND, "jupyter_ci_frontend": {**FRONTEND["jupyter_ci_frontend"],
                                                "path": "work/reload.ipynb"}}
    run = kernel.execute("%%ask\ntwo steps", meta)
    live = run.comm_data()
    states = run.states()
    # One after each step starts and ends (three starts, three ends), one before the end.
    assert len(states) == 7
    assert {s["comm_id"] for s in states} == set(run.comm_ids()) and len(run.comm_ids()) == 1
    assert all(s["notebook"] == "work/reload.ipynb" and s["cell_id"] == "ask-cell-1"
               for s in states)
    assert [s["live"] for s in states] == [True] * 6 + [False]
    assert states[0]["messages"][0] == live[0]  # ask_start
    final = states[-1]["messages"]
    assert final[-1] == live[-1] and final[-1]["type"] == "ask_end"
    # Replayed, the state leaves the same cells and record as the live messages did.
    assert cells_from(final) == cells_from(live)
    assert cells_from(final)[2] == [{"output_type": "stream", "name": "stdout", "text": "new\n"}]
    ends = [m for m in final if m["type"] == "step_end"]
    assert ends == [m for m in live if m["type"] == "step_end"]
    # Mid-ask: after step 2 started, the log and step 1's outputs are there.
    mid = states[4]
    assert any("Step 1: failed (NameError) → fixed" in line for line in mid["log"])
    assert cells_from(mid["messages"])[1] == [
        {"output_type": "stream", "name": "stdout", "text": "fixed 1\n"}]


def test_steps_say_what_they_do_the_narration_stays_and_the_kernel_stays_busy(
    fake: FakeLLM, kernel: Kernel
) -> None:
    fake.push(code("loaded = [3, 1, 2]", "Loading the data first. Then a plot."),
              code("# Sort the values for the chart\nloaded.sort()\nprint(loaded)"),
              Turn("Sorted: **1, 2, 3**."))
    run = kernel.execute("%%ask\nsort it", FRONTEND)
    end = run.comm_data()[-1]
    # What the model said between steps is kept, above its answer (the panel shows this).
    assert end["answer"] == "Loading the data first. Then a plot.\n\nSorted: **1, 2, 3**."
    shown = json.dumps([m["content"] for m in run.of_type("display_data",
                                                          "update_display_data")],
                       ensure_ascii=False)
    assert "Step 1 · Loading the data first: done" in shown
    assert "Step 2 · Sort the values for the chart: done" in shown
    # Busy is said again while the ask runs: a debugger's control requests that end idle
    # in between must not leave JupyterLab showing an idle kernel.
    parent = run.reply["parent_header"]["msg_id"]
    states = [m["content"]["execution_state"] for m in run.of_type("status")
              if m["parent_header"].get("msg_id") == parent]
    assert states[0] == "busy" and states[-1] == "idle" and states.count("busy") > 3


def test_while_the_model_thinks_the_log_counts_the_seconds(fake: FakeLLM, kernel: Kernel) -> None:
    # The model sends nothing for three seconds, then its call (no text).
    fake.push(Turn("", tool_calls=[("run_python", {"code": "thought = 'long and hard'"})],
                   first_delay=3),
              Turn("Thought."))
    run = kernel.execute("%%ask\nthink", FRONTEND)
    shown = json.dumps([m["content"] for m in run.of_type("update_display_data")],
                       ensure_ascii=False)
    assert "Asking openai:gpt-test… · thinking 1 s" in shown
    assert "Asking openai:gpt-test… · thinking 2 s" in shown
    # Once the step runs the count is gone from the log; the ask ends as usual.
    final = [m["content"]["data"]["text/plain"] for m in run.of_type("update_display_data")
             if "Done:" in m["content"]["data"].get("text/plain", "")]
    assert final and "thinking" not in final[-1]
    assert run.comm_data()[-1]["status"] == "done"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_code_is_previewed_as_the_model_writes_it(
    fake: FakeLLM, tmp_path: Path, provider: str
) -> None:
    first = "# Count to five\nnumbers = list(range(5))\nprint(numbers)\n"
    fix = "numbers = [n * 2 for n in range(5)]\nprint('doubled', numbers)\n"
    fake.push(Turn("", tool_calls=[("run_python", {"code": first + "print(missing)"})],
                   chunk_delay=0.05),
              Turn("", tool_calls=[("run_python", {"code": fix})], chunk_delay=0.05),
              Turn("Counted."))
    env = openai_env(fake) if provider == "openai" else anthropic_env(fake)
    k = Kernel(env, str(tmp_path))
    try:
        assert k.execute("%load_ext jupyter_ci").reply["content"]["status"] == "ok"
        data = k.execute("%%ask\ncount", FRONTEND).comm_data()
    finally:
        k.close()
    previews = [d for d in data if d["type"] == "code_preview"]
    starts = [d for d in data if d["type"] == "step_start"]
    # Before each step starts: the code so far, growing, each a prefix of what then ran.
    for start in starts:
        before = [p for p in previews if data.index(p) < data.index(start)
                  and (p["step"], p["attempt"]) == (start["step"], start["attempt"])]
        assert len(before) >= 2, start
        assert all(start["code"].startswith(p["code"]) for p in before)
        assert [len(p["code"]) for p in before] == sorted(len(p["code"]) for p in before)
    # The second call fixes step 1 (it failed): its preview says so.
    assert [(s["step"], s["attempt"]) for s in starts] == [(1, 1), (1, 2)]


def test_queued_cells_of_a_replaced_ask_are_skipped(fake: FakeLLM, kernel: Kernel) -> None:
    fake.push(code("old_value = 1"), Turn("Old."))
    record = kernel.execute("%%ask\nold prompt", FRONTEND).comm_data()[-1]["record"]
    old_cell = {"jupyter_ci": {"ask_id": record["ask_id"], "step": 1}, "cellId": "gen-1",
                **{k: v for k, v in FRONTEND.items() if k != "cellId"}}
    # Run All after editing the prompt: the re-ask, then the old generated cell, queued.
    fake.push(code("new_value = 2"), Turn("New."))
    edited = kernel.execute("%%ask\nnew prompt", {"jupyter_ci": record, **FRONTEND})
    assert edited.comm_data()[0]["replace_ask_id"] == record["ask_id"]
    stale = kernel.execute("old_value = 'ran again'", old_cell)
    assert "skipped" in stale.of_type("stream")[0]["content"]["text"]
    check = kernel.execute("print(old_value, new_value)")
    assert check.of_type("stream")[0]["content"]["text"] == "1 2\n"


def test_ask_start_carries_the_cell_count_and_a_failed_ask_sends_its_record(
    fake: FakeLLM, kernel: Kernel
) -> None:
    fake.push(code("1/0"), code("1/0"))
    run = kernel.execute("%%ask --max-fixes 2\nfail", FRONTEND)
    start, end = run.comm_data()[0], run.comm_data()[-1]
    # The cell fails (so Run All stops), although generated code raised inside it first.
    assert run.reply["content"]["status"] == "error"
    assert run.reply["content"]["ename"] == "LimitReached"
    assert start["execution_count"] == run.of_type("execute_input")[0]["content"][
        "execution_count"]
    assert end["status"] == "failed" and end["record"]["status"] == "failed"
    assert "ZeroDivisionError" in end["error"]["message"]
    assert end["error"]["type"] == "LimitReached" and end["answer"] == ""


def test_an_answer_over_an_unfixed_failure_ends_unresolved_in_the_log_and_record(
    fake: FakeLLM, kernel: Kernel
) -> None:
    fake.push(code("print(orders)"), Turn("Revenue peaked in March."))
    run = kernel.execute("%%ask\nbest month", FRONTEND)
    end = run.comm_data()[-1]
    unresolved = {"step": 1, "error": "NameError: name 'orders' is not defined",
                  "message": "done with an unresolved error in step 1: NameError: name "
                             "'orders' is not defined"}
    assert end["status"] == "done" and end["unresolved"] == unresolved
    assert end["record"]["unresolved"] == unresolved
    shown = json.dumps([m["content"] for m in run.of_type("display_data",
                                                          "update_display_data")])
    assert "Step 1: failed (NameError) \\u2192 not fixed" in shown
    assert "Done with an unresolved error in step 1: NameError" in shown
    assert "Done: " not in shown


def test_names_only_the_kernel_has_are_told_and_a_step_using_them_is_flagged(
    fake: FakeLLM, kernel: Kernel
) -> None:
    # `orders` was made by a cell that is gone (a replaced ask's step); `pd` by a cell above.
    assert kernel.execute("orders = [3, 4]\nimport json as pd").reply["content"]["status"] == "ok"
    fake.push(code("print(sum(orders), pd.dumps(1))"), Turn("Seven."),
              code("orders = [3, 4]\nprint(sum(orders), pd.dumps(1))"), Turn("Seven."))
    meta = {**FRONTEND, "jupyter_ci_frontend": {**FRONTEND["jupyter_ci_frontend"],
                                                "above": ["import json as pd"]}}
    run = kernel.execute("%%ask\ntotal the orders", meta)
    context = " ".join(json.dumps(fake.requests[0].messages).split())
    assert "Only in this kernel, defined by no cell above this ask (cells that made them " \
           "were replaced or deleted, so a restart loses them): orders." in context
    # The step that used it anyway is sent back before the ask is done, and made to stand.
    told = fake.requests[2].messages[-1]["content"]
    assert told.startswith("[Restart check, nothing was run] Step 1 reads `orders`")
    shown = json.dumps([m["content"] for m in run.of_type("display_data",
                                                          "update_display_data")],
                       ensure_ascii=False)
    assert "Step 1: after a restart it would fail: it reads `orders`, which no cell above " \
        "it nor an earlier step defines. Asking for a self-contained step." in shown
    assert run.comm_data()[-1]["unresolved"] is None
    # A step that defines what it uses passes the check.
    fake.push(code("orders = [1]\nprint(sum(orders), pd.dumps(1))"), Turn("One."))
    run = kernel.execute("%%ask\nreload and total", meta)
    shown = json.dumps([m["content"] for m in run.of_type("display_data",
                                                          "update_display_data")])
    assert "After a restart" not in shown


def test_without_the_cells_above_there_is_no_restart_check(fake: FakeLLM, kernel: Kernel
                                                            ) -> None:
    kernel.execute("orders = [3, 4]")
    fake.push(code("print(sum(orders))"), Turn("Seven."))
    run = kernel.execute("%%ask\ntotal", FRONTEND)
    assert "Only in this kernel" not in json.dumps(fake.requests[-1].messages)
    assert "After a restart" not in json.dumps([m["content"] for m in run.of_type(
        "display_data", "update_display_data")])
