"""The comm's messages as wire classes (wire/comm.py): the JSON of docs/protocol.md byte for
byte, and a labextension announcement that does not read refused with the field named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.kernel.protocol import FrontendUnreadable, request_info
from jupyter_ci.wire.codec import decode, encode
from jupyter_ci.wire.comm import (
    AskClosed,
    AskOpened,
    AskReused,
    AskState,
    Envelope,
    Frontend,
    SentCell,
)
from jupyter_ci.wire.events import AskEnd, AskStart, Outcome, StepEnd, UsageTotals
from jupyter_ci.wire.record import AskRecord
from tests.fakellm import FakeLLM, Turn
from tests.kernelrun import Kernel
from tests.nbrun import openai_env

START = AskStart("a1", "make x", "openai:gpt-test")
OPENED = AskOpened(start=START, cell_id="c1", replace_ask_id=None, execution_count=3)
STEP_END = Envelope(StepEnd(1, 1, "code", "x = 1", "ok", 4, 12.5, None), "a1")
RECORD = AskRecord(version=1, ask_id="a1", prompt_hash="h" * 32, model="openai:gpt-test",
                   status="done", answer="x is 1.", steps=1, tokens=9, created="2026-01-01",
                   signature="hmac-sha256:00")
CLOSED = AskClosed(end=AskEnd(Outcome("done", "x is 1.", None, None, 1, 9,
                                      UsageTotals(5, 4, 0, None), ())),
                   record=RECORD, pin="hhhhhhhhhh", ask_id="a1")


def test_each_comm_message_is_the_json_the_kernel_always_sent() -> None:
    # As kernel/protocol.py wrote them by hand before (key order included).
    assert json.dumps(encode(OPENED)) == (
        '{"type": "ask_start", "ask_id": "a1", "prompt": "make x", "model": "openai:gpt-test", '
        '"cell_id": "c1", "replace_ask_id": null, "execution_count": 3, "protocol": 2}')
    assert json.dumps(encode(STEP_END)) == (
        '{"type": "step_end", "step": 1, "attempt": 1, "kind": "code", "code": "x = 1", '
        '"status": "ok", "execution_count": 4, "duration_ms": 12.5, "error": null, '
        '"ask_id": "a1", "protocol": 2}')
    assert json.dumps(encode(CLOSED)) == (
        '{"type": "ask_end", "status": "done", "answer": "x is 1.", "error": null, '
        '"unresolved": null, "steps": 1, "tokens": 9, "usage": {"input_tokens": 5, '
        '"output_tokens": 4, "cached_tokens": 0, "cost_usd": null}, "edits": [], "record": '
        '{"version": 1, "ask_id": "a1", "prompt_hash": "' + "h" * 32 + '", "model": '
        '"openai:gpt-test", "status": "done", "answer": "x is 1.", "steps": 1, "tokens": 9, '
        '"created": "2026-01-01", "signature": "hmac-sha256:00"}, "pin": "hhhhhhhhhh", '
        '"ask_id": "a1", "protocol": 2}')
    reused = AskReused(cell_id="c1", prompt="make x", model="m", answer="x is 1.", steps=1,
                       pin="hhhhhhhhhh", ask_id="a1")
    assert json.dumps(encode(reused)) == (
        '{"type": "ask_reused", "cell_id": "c1", "prompt": "make x", "model": "m", "answer": '
        '"x is 1.", "steps": 1, "pin": "hhhhhhhhhh", "ask_id": "a1", "protocol": 2}')
    # Not done: no pin at all (the browser writes one only when it is there).
    assert "pin" not in encode(AskClosed(end=CLOSED.end, record=RECORD, ask_id="a1"))


def test_a_late_pages_state_reads_back_whole() -> None:
    state = AskState(cell_id="c1", notebook="work/a.ipynb", comm_id="comm-1", live=False,
                     log=("Step 1: done",), messages=(OPENED, STEP_END, CLOSED), ask_id="a1")
    data = json.loads(json.dumps(encode(state)))
    assert list(data) == ["type", "cell_id", "notebook", "comm_id", "live", "log", "messages",
                          "ask_id", "protocol"]
    assert [m["type"] for m in data["messages"]] == ["ask_start", "step_end", "ask_end"]
    assert decode(AskState, data) == state


def announced(frontend: dict[str, Any]) -> dict[str, Any]:
    """An execute_request as the labextension sends an ask cell's."""
    return {"metadata": {"jupyter_ci_frontend": frontend, "cellId": "c1"},
            "content": {"code": "%%ask\nmake x", "allow_stdin": True}}


def test_the_announcement_is_read_into_its_class() -> None:
    info = request_info(announced({"protocol": 2, "generated": ["g1"], "path": "a.ipynb",
                                   "above": ["x = 1"], "cells": [{"id": "k", "source": "y"}]}))
    assert info.frontend == Frontend(2, ("g1",), "a.ipynb", ("x = 1",),
                                     cells=(SentCell("k", "y"),))
    assert info.has_frontend and info.cell_id == "c1" and info.allow_stdin
    # Another protocol version is not this labextension: the ask shows everything inline.
    assert not request_info(announced({"protocol": 3, "anything": []})).has_frontend


@pytest.mark.parametrize(("sent", "where"), [
    ({"cells": [{"id": 3, "source": "y = 1"}]}, "jupyter_ci_frontend.cells[0].id"),
    ({"generated": "g1"}, "jupyter_ci_frontend.generated"),
    ({"asks_above": [{"ask_id": "a0"}]}, "jupyter_ci_frontend.asks_above[0].cell_id"),
    ({"above": ["x = 1"], "later": True}, "jupyter_ci_frontend.later"),
])
def test_an_announcement_that_does_not_read_is_refused_naming_its_field(
    sent: dict[str, Any], where: str
) -> None:
    with pytest.raises(FrontendUnreadable) as caught:
        request_info(announced({"protocol": 2, **sent}))
    assert where in caught.value.message and "same version" in caught.value.hint


def test_an_ask_with_an_unreadable_announcement_fails_clearly_and_asks_nothing(
    fake: FakeLLM, tmp_path: Path
) -> None:
    kernel = Kernel(openai_env(fake), str(tmp_path))
    try:
        kernel.execute("%load_ext jupyter_ci")
        fake.push(Turn("Never asked."))
        run = kernel.execute("%%ask\nmake x", announced(
            {"protocol": 2, "generated": [], "cells": [{"id": 3, "source": "y"}]})["metadata"])
        after = kernel.execute("print('still here')")
    finally:
        kernel.close()
    reply = run.reply["content"]
    assert reply["status"] == "error" and reply["ename"] == "FrontendUnreadable"
    assert "jupyter_ci_frontend.cells[0].id: expected a string, got 3" in reply["evalue"]
    assert fake.calls() == 0 and run.comm_data() == []
    assert after.of_type("stream")[0]["content"]["text"] == "still here\n"


class Comm:
    """The kernel side of a comm, keeping what it sent."""

    def __init__(self) -> None:
        self.sent: list[object] = []

    def send(self, data: object) -> None:
        self.sent.append(data)


@pytest.mark.parametrize("bad", [
    {"type": "external_ack", "id": 5},
    {"type": "external_ack"},
    {"type": "external_ack", "id": "cell-1", "extra": True},
    {"id": "cell-1"},
])
def test_a_pages_ack_that_does_not_read_is_logged_and_runs_nothing(
    bad: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    from jupyter_ci.kernel.external import ExternalCells, Pending

    pending = Pending("cell-1", "print(1)", Comm())
    ExternalCells._on_msg(pending, {"content": {"data": bad}})
    assert not pending.acked and pending.comm.sent == []
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "cannot read" in said and "cell-1" in said and "same version" in said
    # The page's own answer is echoed as it always was.
    ExternalCells._on_msg(pending, {"content": {"data": {"type": "external_ack",
                                                         "id": "cell-1"}}})
    assert pending.acked and json.dumps(pending.comm.sent) == (
        '[{"type": "external_acked", "id": "cell-1"}]')
