"""One ask, three encodings of its one event stream: the comm, server-sent events, the cell.

The same scripted ask runs in a kernel with the labextension attached (the comm), as a REST
ask (SSE) and in a kernel with no labextension (the %%ask cell): each carries the same
events in the same order, with the same steps, outputs and answer.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from tests.fakellm import FakeLLM, Turn
from tests.kernelrun import Kernel
from tests.nbrun import TEST_KEY, openai_env, run_cells, session_server_config, text_of
from tests.test_session_ask import ask
from tests.test_sessions import Fetch, new_session

FRONTEND = {"jupyter_ci_frontend": {"protocol": 2, "generated": []}, "cellId": "ask-cell-1"}
#: Streamed pieces: batched on the comm, throttled previews; compared as runs.
STREAMED = {"text", "code_preview"}
#: What only one door has: the REST result, the files a session's step wrote.
DOOR_ONLY = {"result", "files"}


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM) -> Config:
    return session_server_config(monkeypatch, {
        "OPENAI_API_KEY": TEST_KEY, "OPENAI_BASE_URL": fake.openai_base_url})


def script(fake: FakeLLM) -> None:
    def code(src: str, text: str = "") -> Turn:
        return Turn(text, tool_calls=[("run_python", {"code": src})])

    fake.push(code("print(undefined_total)", "Summing."),
              code("total = 2 + 3\nprint('total', total)"),
              code("print('twice', total * 2)"), Turn("The total is **5**."))


def shape(events: list[dict[str, Any]]) -> list[str]:
    """The sequence of event types, each run of streamed pieces as one."""
    kinds = [e["type"] for e in events if e["type"] not in DOOR_ONLY]
    return [kind for kind, _ in itertools.groupby(kinds)]


def steps(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What each step start and end says, less what differs by run (counts, times)."""
    keys = ("type", "step", "attempt", "kind", "code", "status", "error")
    return [tuple(e.get(k) for k in keys) for e in events
            if e["type"] in ("step_start", "step_end")]


def outputs(events: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(e["step"], e["output"].get("text", "")) for e in events if e["type"] == "output"]


async def test_the_comm_sse_and_the_cell_carry_the_same_events(
    jp_fetch: Fetch, fake: FakeLLM, tmp_path: Path
) -> None:
    script(fake)
    kernel = Kernel(openai_env(fake), str(tmp_path))
    try:
        kernel.execute("%load_ext jupyter_ci")
        comm = kernel.execute("%%ask\nadd two and three", FRONTEND).comm_data()
    finally:
        kernel.close()
    script(fake)
    sid = (await new_session(jp_fetch))["id"]
    sse = [{**data, "type": name} for name, data in await ask(
        jp_fetch, sid, prompt="add two and three", model="openai:gpt-test")]
    assert shape(comm) == shape(sse)
    call = ["request_sent", "thinking"]
    step = ["code_preview", "usage", "step_start", "output", "step_end"]
    assert shape(comm) == ["ask_start", *call, "text", *step, *call, *step, *call, *step,
                           *call, "text", "usage", "ask_end"]
    assert steps(comm) == steps(sse) and len(steps(comm)) == 6
    assert outputs(comm) == outputs(sse) == [(1, ""), (1, "total 5\n"), (2, "twice 10\n")]
    comm_end, sse_end = comm[-1], next(e for e in sse if e["type"] == "ask_end")
    # REST's ask_end is its result: it lists the steps (the comm counts them) and leaves out
    # an absent unresolved step or error.
    for key in ("status", "unresolved", "error"):
        assert comm_end.get(key) == sse_end.get(key), key
    assert comm_end["steps"] == len(sse_end["steps"]) == 2
    assert comm_end["answer"].endswith(sse_end["answer"]) and sse_end["answer"]
    # The cell: each step's title, the failed attempt's line, the outputs, the answer, the
    # summary: the same events, shown.
    script(fake)
    cell = text_of(run_cells(["%%ask\nadd two and three"], openai_env(fake),
                             tmp_path).cells[1])
    assert "Step 1: attempt 1 failed: `NameError" in cell
    assert "total 5" in cell and "twice 10" in cell and "Step 2" in cell
    assert "The total is **5**." in cell and "2 steps" in cell
