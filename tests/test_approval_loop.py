"""Approval modes, plans and reviewed edits in the pure ask loop and its driver."""

from __future__ import annotations

import json

from jupyter_ci.agent.actions import ApprovePlan, ApproveStep, ReviewEdits
from jupyter_ci.agent.approval import (
    Decision,
    NotebookCell,
    parse_answer,
    parse_review,
    stricter,
)
from jupyter_ci.agent.disclosure import request_parts
from jupyter_ci.agent.drive import drive
from jupyter_ci.agent.errors import AskInterrupted, AskStopped
from jupyter_ci.agent.events import Event, WaitingForUser, event_json
from jupyter_ci.agent.loop import AskLoop, CallModel, Fail, Finish, RunCode
from jupyter_ci.agent.prompts import system_prompt
from jupyter_ci.agent.types import CodeResult, ModelReply, ModelRequest, OnText, ToolCall


def run(code: str, call_id: str = "c1") -> ToolCall:
    return ToolCall(call_id, "run_python", json.dumps({"code": code}))


def edit(cell_id: str, source: str, call_id: str = "e1") -> ToolCall:
    return ToolCall(call_id, "edit_cell", json.dumps({"cell_id": cell_id, "source": source}))


def reply(*calls: ToolCall, text: str = "") -> ModelReply:
    return ModelReply(text=text, tool_calls=calls)


OK = CodeResult("ok", [], 0.01, 1)


def test_modes_order_and_answers_read_from_json_or_words() -> None:
    assert stricter("never", "each") == "each"
    assert stricter("first", "never") == "first"
    assert stricter("plan", "first") == "plan"
    assert stricter("bogus", "") == "never"
    assert parse_answer("") == Decision("run")
    assert parse_answer("s") == Decision("skip")
    assert parse_answer("e") == Decision("edit")
    assert parse_answer("whatever") == Decision("stop")
    assert parse_answer('{"decision": "edit", "code": "x = 2"}') == Decision("edit", "x = 2")
    assert parse_answer('{"decision": "edit", "plan": "1. go"}') == Decision("edit", "1. go")
    assert parse_answer('{"decision": "explode"}') == Decision("stop")
    assert parse_answer("{not json") == Decision("stop")


def test_each_mode_waits_before_every_step_and_runs_what_was_approved() -> None:
    loop = AskLoop("go", approval="each")
    loop.start()
    asked = loop.on_reply(reply(run("x = 1")))
    assert isinstance(asked, ApproveStep) and asked.run.code == "x = 1"
    assert asked.run.step == 1 and loop.step == 0  # nothing counted before approval
    assert loop.on_approval(Decision("run")) == RunCode("x = 1", 1, 1, "c1")
    loop.on_result(OK)
    again = loop.on_reply(reply(run("y = 2", "c2")))
    assert isinstance(again, ApproveStep) and again.run.step == 2


def test_an_edited_step_runs_the_edit_and_the_model_is_told() -> None:
    loop = AskLoop("go", approval="each")
    loop.start()
    loop.on_reply(reply(run("x = 1")))
    ran = loop.on_approval(Decision("edit", "x = 42"))
    assert isinstance(ran, RunCode) and ran.code == "x = 42"
    assert loop.cells[1] == "x = 42"
    nxt = loop.on_result(OK)
    assert isinstance(nxt, CallModel)
    told = nxt.request.messages[-1].content
    assert "The user edited your code" in told and "x = 42" in told
    assert loop.succeeded == [(1, "x = 42")]


def test_a_skipped_step_is_not_run_numbered_or_kept_and_the_model_is_told() -> None:
    loop = AskLoop("go", approval="each")
    loop.start()
    loop.on_reply(reply(run("rm_everything()")))
    nxt = loop.on_approval(Decision("skip"))
    assert isinstance(nxt, CallModel)
    assert "the user skipped step 1" in nxt.request.messages[-1].content
    assert loop.step == 0 and loop.cells == {} and loop.succeeded == []
    asked = loop.on_reply(reply(run("x = 1", "c2")))
    assert isinstance(asked, ApproveStep) and asked.run.step == 1


def test_stop_ends_the_ask_as_stopped_with_every_call_answered() -> None:
    loop = AskLoop("go", approval="each")
    loop.start()
    loop.on_reply(reply(run("a = 1"), run("b = 2", "c2")))
    ended = loop.on_approval(Decision("stop"))
    assert isinstance(ended, Fail) and isinstance(ended.error, AskStopped)
    assert isinstance(ended.error, AskInterrupted)  # outcome status "interrupted"
    answered = [m.tool_call_id for m in loop.messages if m.role == "tool"]
    assert answered == ["c1", "c2"]


def test_first_mode_asks_once_then_runs_on() -> None:
    loop = AskLoop("go", approval="first")
    loop.start()
    assert isinstance(loop.on_reply(reply(run("x = 1"))), ApproveStep)
    loop.on_approval(Decision("run"))
    loop.on_result(OK)
    assert isinstance(loop.on_reply(reply(run("y = 2", "c2"))), RunCode)


def test_plan_mode_asks_for_a_plan_then_carries_out_the_approved_one() -> None:
    loop = AskLoop("analyse sales", approval="plan")
    first = loop.start()
    assert isinstance(first, CallModel) and "numbered plan" in first.request.system
    asked = loop.on_reply(reply(text="1. load\n2. plot"))
    assert asked == ApprovePlan("1. load\n2. plot", asked.question)  # type: ignore[union-attr]
    nxt = loop.on_plan_answer(Decision("edit", "1. load\n2. plot by region"))
    assert isinstance(nxt, CallModel) and "numbered plan" not in nxt.request.system
    assert "edited and approved" in nxt.request.messages[-1].content
    assert "plot by region" in nxt.request.messages[-1].content
    assert isinstance(loop.on_reply(reply(run("x = 1"))), RunCode)  # runs on


def test_a_plan_turn_that_calls_a_tool_runs_nothing_and_a_stopped_plan_fails() -> None:
    loop = AskLoop("go", approval="plan")
    loop.start()
    asked = loop.on_reply(reply(run("boom()"), text="1. boom"))
    assert isinstance(asked, ApprovePlan)
    assert loop.messages[-1].role == "tool" and "not run" in loop.messages[-1].content
    ended = loop.on_plan_answer(Decision("stop"))
    assert isinstance(ended, Fail) and isinstance(ended.error, AskStopped)


CELLS = (NotebookCell("a1", "df = load()\ndf.groupby('x').sum()"), NotebookCell("b2", "print(1)"))


def test_the_edit_tool_is_offered_only_with_the_notebooks_cells() -> None:
    plain = AskLoop("go").start()
    assert isinstance(plain, CallModel)
    assert [t.name for t in plain.request.tools] == ["run_python"]
    with_cells = AskLoop("go", cells=CELLS).start()
    assert isinstance(with_cells, CallModel)
    assert [t.name for t in with_cells.request.tools] == ["run_python", "edit_cell"]


def test_edits_of_one_reply_are_reviewed_together_and_the_model_told_each_decision() -> None:
    loop = AskLoop("fix it", cells=CELLS)
    loop.start()
    asked = loop.on_reply(reply(edit("a1", "df = load()", "e1"), edit("b2", "print(2)", "e2"),
                                run("z = 1", "c3")))
    assert isinstance(asked, ReviewEdits)
    assert [(e.cell_id, e.old, e.new) for e in asked.edits] == [
        ("a1", CELLS[0].source, "df = load()"), ("b2", "print(1)", "print(2)")]
    decisions = parse_review('{"decisions": {"e1": "accepted"}}', asked.edits)
    assert decisions == {"e1": "accepted", "e2": "rejected"}
    nxt = loop.on_review(decisions)
    assert isinstance(nxt, RunCode) and nxt.code == "z = 1"  # the reply's code runs after
    told = {m.tool_call_id: m.content for m in loop.messages if m.role == "tool"}
    assert "accepted" in told["e1"] and "rejected" in told["e2"]
    assert [said for _, said in loop.edits] == ["accepted", "rejected"]


def test_an_edit_of_an_unknown_cell_goes_back_to_the_model() -> None:
    loop = AskLoop("fix it", cells=CELLS)
    loop.start()
    nxt = loop.on_reply(reply(edit("nope", "x")))
    assert isinstance(nxt, CallModel)
    assert "no code cell with id 'nope'" in nxt.request.messages[-1].content


class Scripted:
    """A model that plays replies in order."""

    def __init__(self, *replies: ModelReply) -> None:
        self.replies = list(replies)
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        self.requests.append(request)
        return self.replies.pop(0)


class Runner:
    def __init__(self) -> None:
        self.ran: list[str] = []

    def run(self, code: str, timeout: float) -> CodeResult:
        self.ran.append(code)
        return OK


def test_headless_edits_are_listed_in_the_answer_and_not_applied() -> None:
    model = Scripted(reply(edit("b2", "print(2)")), ModelReply(text="Fixed."))
    events: list[Event] = []
    loop = AskLoop("fix", cells=CELLS)
    answer = drive(loop, model, Runner(), events.append).answer
    assert answer.startswith("Fixed.") and "### Proposed edits (not applied)" in answer
    assert "-print(1)\n+print(2)" in answer
    assert not any(isinstance(e, WaitingForUser) for e in events)
    assert "not applied" in model.requests[-1].messages[-1].content


def test_the_driver_emits_the_question_then_feeds_the_answer() -> None:
    model = Scripted(reply(run("x = 1")), ModelReply(text="done"))
    events: list[Event] = []
    runner = Runner()
    asked: list[WaitingForUser] = []

    def decide(question: WaitingForUser) -> str:
        asked.append(question)
        return json.dumps({"decision": "edit", "code": "x = 7"})

    answer = drive(AskLoop("go", approval="each"), model, runner, events.append, decide=decide,
                   ask_id="a1").answer
    assert answer == "done" and runner.ran == ["x = 7"]
    waiting = [e for e in events if isinstance(e, WaitingForUser)]
    # One event: the question told is the one answered, with the id to answer it by.
    assert asked == waiting and waiting[0].code == "x = 1"
    told = event_json(waiting[0])
    assert told["kind"] == "step" and told["ask_id"] == "a1" and len(told["approval_id"]) == 32


def test_without_anyone_to_answer_an_approval_ask_stops_and_runs_nothing() -> None:
    runner = Runner()
    outcome = drive(AskLoop("go", approval="each"), Scripted(reply(run("x = 1"))), runner,
                    lambda e: None)
    assert isinstance(outcome.error, AskStopped) and "no one can answer" in str(outcome.error)
    assert outcome.status == "interrupted" and outcome.result_status == "stopped"
    assert runner.ran == []


def test_standing_instructions_are_a_part_of_their_own_in_what_was_sent() -> None:
    loop = AskLoop("go", system=system_prompt("Always use polars."))
    first = loop.start()
    assert isinstance(first, CallModel)
    parts = {p.name: p.text for p in request_parts(first.request)}
    assert "Always use polars." in parts["Standing instructions"]
    assert "Always use polars." not in parts["System prompt"]
    assert "".join(p.text for p in request_parts(first.request)[:2]) == first.request.system
    assert isinstance(loop.on_reply(ModelReply(text="ok")), Finish)
