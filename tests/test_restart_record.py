"""The notebook stays a true record: its cells run after a restart (real kernels, fake model).

A fix that leans on its failed attempt is sent back to be made self-contained; an ask left
that way ends "unresolved" and is not replayed into the error; Run All's stale `above` is
brought up to date with the steps the asks above placed after it was queued.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakellm import FakeLLM, Turn
from tests.kernelrun import Execution, Kernel
from tests.nbrun import error_of, openai_env, run_cells, text_of

FAILS = "o = {'a': 1}\nprint(o['b'])"
LEANS = "print('b is', o.get('b', 0))"
OWN = "o = {'a': 1}\nprint('b is', o.get('b', 0))"


def code(src: str, text: str = "") -> Turn:
    return Turn(text, tool_calls=[("run_python", {"code": src})])


def frontend(cell_id: str, above: list[str], asks: list[dict[str, Any]] | None = None,
             record: dict[str, Any] | None = None, generated: tuple[str, ...] = ()
             ) -> dict[str, Any]:
    """Request metadata as the labextension sends it with an ask cell."""
    sent: dict[str, Any] = {"protocol": 2, "generated": list(generated), "above": above}
    if asks is not None:
        sent["asks_above"] = asks
    meta: dict[str, Any] = {"jupyter_ci_frontend": sent, "cellId": cell_id}
    if record is not None:
        meta["jupyter_ci"] = record
    return meta


def shown(run: Execution) -> str:
    """Everything the %%ask cell displayed (its log, notes and answer), as one string."""
    return json.dumps([m["content"] for m in run.of_type("display_data", "update_display_data")],
                      ensure_ascii=False)


def user_turns(fake: FakeLLM, index: int) -> list[str]:
    return [m["content"] for m in fake.requests[index].messages
            if m.get("role") == "user" and isinstance(m.get("content"), str)]


@pytest.fixture
def kernel(fake: FakeLLM, tmp_path: Path) -> Iterator[Kernel]:
    k = Kernel(openai_env(fake), str(tmp_path))
    assert k.execute("%load_ext jupyter_ci").reply["content"]["status"] == "ok"
    yield k
    k.close()


def test_a_fix_leaning_on_its_failed_attempt_is_made_self_contained(
    fake: FakeLLM, kernel: Kernel, tmp_path: Path
) -> None:
    fake.push(code(FAILS), code(LEANS), Turn("b is 0."), code(OWN), Turn("b is 0."))
    run = kernel.execute("%%ask\nhow many b?", frontend("ask-1", []))
    data = run.comm_data()
    assert fake.calls() == 5
    told = user_turns(fake, 3)[-1]
    assert "Step 1 reads `o`" in told and "only a failed attempt" in told
    starts = [(d["step"], d["attempt"], d["code"]) for d in data if d["type"] == "step_start"]
    assert starts == [(1, 1, FAILS), (1, 2, LEANS), (1, 3, OWN)]
    end = data[-1]
    assert end["status"] == "done" and end["unresolved"] is None
    assert end["record"]["steps"] == 1
    # The log keeps why the model was sent back, and how the step ended.
    log = [text for text in (json.dumps(m["content"]["data"], ensure_ascii=False)
                             for m in run.of_type("display_data", "update_display_data"))
           if "Done: " in text][-1]
    assert "Asking for a self-contained step." in log
    assert "Step 1: made self-contained" in log
    # The recorded cell (the last step_start's code) runs on its own in a fresh kernel.
    fresh = Kernel(openai_env(fake), str(tmp_path))
    try:
        assert fresh.execute(starts[-1][2]).reply["content"]["status"] == "ok"
    finally:
        fresh.close()


def test_left_leaning_it_ends_unresolved_and_a_restart_is_told_not_replayed_into_the_error(
    fake: FakeLLM, kernel: Kernel, tmp_path: Path
) -> None:
    fake.push(code(FAILS), code(LEANS), Turn("b is 0."), Turn("b is 0, as I said."))
    run = kernel.execute("%%ask --max-fixes 2\nhow many b?", frontend("ask-1", []))
    end = run.comm_data()[-1]
    assert end["status"] == "done" and end["unresolved"]["step"] == 1
    assert end["unresolved"]["names"] == ["o"]
    assert "Done with an unresolved error in step 1: after a restart it would fail" in shown(run)
    calls = fake.calls()
    # Restart & Run All: the cells above run, then the %%ask cell with its record.
    meta = frontend("ask-1", [], record=end["record"], generated=("gen-1",))
    fresh = Kernel(openai_env(fake), str(tmp_path))
    try:
        fresh.execute("%load_ext jupyter_ci")
        again = fresh.execute("%%ask --max-fixes 2\nhow many b?", meta)
        assert fake.calls() == calls
        reply = again.reply["content"]
        assert reply["status"] == "error" and reply["ename"] == "RecordWouldFail"
        assert "`o`" in reply["evalue"] and "--refresh" in "".join(reply["traceback"])
        # Once a cell above defines it, the answer is reused and its cells can run.
        fresh.execute("o = {'a': 1}")
        reused = fresh.execute("%%ask --max-fixes 2\nhow many b?", meta)
        assert reused.reply["content"]["status"] == "ok"
        assert "Reusing the earlier answer" in shown(reused)
    finally:
        fresh.close()


def test_headless_the_kept_steps_run_again_in_a_new_kernel_without_failing(
    fake: FakeLLM, tmp_path: Path
) -> None:
    cells = ["%%ask\nhow many b?"]
    fake.push(code(FAILS), code(LEANS), Turn("b is 0."), code(OWN), Turn("b is 0."))
    first = run_cells(cells, openai_env(fake), tmp_path)
    assert fake.calls() == 5 and error_of(first.cells[1]) is None
    second = run_cells(cells, openai_env(fake), tmp_path)
    assert fake.calls() == 5, text_of(second.cells[1])
    assert "fails now" not in text_of(second.cells[1])
    assert "b is 0" in text_of(second.cells[1])


def test_run_all_counts_the_steps_an_ask_above_placed_after_the_request_was_queued(
    fake: FakeLLM, kernel: Kernel
) -> None:
    above = ["sales = [3, 4]"]
    assert kernel.execute(above[0]).reply["content"]["status"] == "ok"
    # A cell that made `bonus` was deleted: only the kernel has it.
    kernel.execute("bonus = 10")
    fake.push(code("monthly = sum(sales)\nprint(monthly)"), Turn("Seven."))
    kernel.execute("%%ask\nmonthly total", frontend("ask-1", above))
    # Ask 2's request was queued with ask 1 (Run All): its `above` has none of ask 1's steps.
    fake.push(code("print(monthly * 2 + bonus)"), Turn("24."),
              code("bonus = 10\nprint(monthly * 2 + bonus)"), Turn("24."))
    stale = frontend("ask-2", above, asks=[{"cell_id": "ask-1", "ask_id": None, "cells": []}])
    run = kernel.execute("%%ask\ndouble it", stale)
    assert run.comm_data()[-1]["unresolved"] is None
    context = user_turns(fake, 2)[-1]
    [only_here] = [line for line in context.splitlines() if "defined by no cell above" in line]
    assert "bonus" in only_here and "monthly" not in only_here
    told = user_turns(fake, 4)[-1]
    assert "Step 1 reads `bonus`" in told and "monthly" not in told
    assert "After a restart" not in shown(run) and fake.calls() == 6
