"""The ask's typed events: their JSON forms, the journal a late page catches up from."""

from __future__ import annotations

import threading
import time
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from jupyter_ci.agent import events
from jupyter_ci.agent.disclosure import Part
from jupyter_ci.agent.drive import drive
from jupyter_ci.agent.errors import LimitReached
from jupyter_ci.agent.events import (
    AskEnded,
    AskStarted,
    Event,
    Journal,
    Outcome,
    OutputsChanged,
    StepEnded,
    StepStarted,
    event_json,
)
from jupyter_ci.agent.loop import AskLoop, Limits, RunCode, Unresolved
from jupyter_ci.agent.outputs import OutputList
from jupyter_ci.agent.types import CodeResult, ErrorInfo, ModelReply, ModelRequest, OnText
from jupyter_ci.models.scripted import ScriptedModel, code_call
from jupyter_ci.wire.codec import encode


def out(text: str) -> dict[str, Any]:
    return {"output_type": "stream", "name": "stdout", "text": text}


@dataclass
class Collected:
    """An encoder that keeps each event's JSON form."""

    seen: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        self.seen.append(event_json(event))


def test_every_event_has_one_json_form_whose_type_names_it() -> None:
    run = RunCode("x = 1", 1, 1, "c1")
    samples: list[Event] = [
        AskStarted("a1", "go", "openai:m"), events.RequestSent((Part("System prompt", "hi"),)),
        events.Thinking(), events.Text("he"), events.Usage(10, 2, 12),
        events.CodePreview(1, 1, "x ="),
        StepStarted(run), StepEnded(run, CodeResult("ok", duration_s=0.25)),
        events.FilesWritten(1, ()), events.Notice("retiring"), events.WaitingForUser("Install?"),
        AskEnded(Outcome("done", "ok")),
    ]
    types = [event_json(sample)["type"] for sample in samples]
    assert len(set(types)) == len(types)
    # Every member of the union is covered: a new event must get a JSON form and a test.
    union = {cls.__name__ for cls in typing.get_args(events.Event)}
    assert union - {type(s).__name__ for s in samples} == {"OutputsChanged", "StepSentBack"}
    end = StepEnded(run, CodeResult("died", duration_s=1.5, error=ErrorInfo("KernelDied", "x")))
    # One vocabulary for every door: milliseconds, the executor's statuses.
    assert event_json(end) == {"type": "step_end", "step": 1, "attempt": 1, "kind": "code",
                             "code": "x = 1", "status": "died", "execution_count": None,
                             "duration_ms": 1500.0,
                             "error": {"ename": "KernelDied", "evalue": "x"}}


def test_the_outcome_says_unresolved_and_errors_in_the_words_of_every_door() -> None:
    unresolved = encode(Outcome("done", "March.", unresolved=Unresolved(2, "NameError: x"), steps=2,
                         tokens=10).to_wire())
    assert unresolved["unresolved"] == {
        "step": 2, "error": "NameError: x",
        "message": "done with an unresolved error in step 2: NameError: x"}
    failed = encode(Outcome("failed",
                            error=LimitReached("Too many.", "Raise --max-steps.")).to_wire())
    assert failed["error"] == {"message": "Too many.", "hint": "Raise --max-steps.",
                               "type": "LimitReached"}
    assert failed["unresolved"] is None and failed["answer"] == ""


def test_a_late_page_gets_each_steps_outputs_as_they_stand_and_a_pending_clear() -> None:
    collected = Collected()
    journal = Journal([collected])
    journal.emit(AskStarted("a1", "go", "m"))
    first = RunCode("print(1)", 1, 1, "c1")
    journal.emit(StepStarted(first))
    outputs = OutputList(journal.output)
    outputs.add(out("old\n"))
    outputs.add(out("gone\n"))
    journal.emit(StepEnded(first, CodeResult("error")))
    retry = RunCode("print(2)", 1, 2, "c2")
    journal.emit(StepStarted(retry))
    outputs = OutputList(journal.output)
    outputs.add(out("new\n"))
    outputs.clear(wait=True)
    caught = journal.catch_up()
    assert [e["type"] for e in caught] == [
        "ask_start", "step_start", "step_end", "step_start", "set_outputs", "clear_output"]
    # Only the last attempt's outputs, and the clear still waits for the next output.
    assert caught[4]["outputs"] == [out("new\n")] and caught[5]["wait"] is True
    # Live, the encoders got every change, in order.
    assert [e["type"] for e in collected.seen].count("output") == 3
    assert isinstance(journal.outputs[1], OutputsChanged)


def test_an_event_only_the_journal_knows_reaches_every_encoder() -> None:
    @dataclass(frozen=True)
    class Approved:
        """An event added later (an approval): only its wire class and its emit are new."""

        type: ClassVar[Literal["approved"]] = "approved"
        step: int

    first, second = Collected(), Collected()
    journal = Journal([first, second])
    journal.emit(Approved(3))  # type: ignore[arg-type]
    assert first.seen == second.seen == [{"type": "approved", "step": 3}]


def test_the_driver_tells_a_whole_ask_as_events_and_previews_the_next_step() -> None:
    collected = Collected()

    class Runner:
        def run(self, code: str, timeout: float) -> CodeResult:
            return CodeResult("error" if "boom" in code else "ok",
                              error=ErrorInfo("NameError", "boom") if "boom" in code else None)

    class Previewing:
        """A scripted model that streams each call's arguments first, as the adapters do."""

        inner = ScriptedModel.of([code_call("boom", "c1"), code_call("x = 1", "c2"),
                                  ModelReply(text="Done.")])

        def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
            reply = self.inner.complete(request, on_text)
            for call in reply.tool_calls:
                assert request.on_tool_input is not None
                request.on_tool_input(call.name, call.arguments)
            return reply

    model = Previewing()
    answer = drive(AskLoop("go", limits=Limits(max_fixes=3)), model, Runner(), collected).answer
    assert answer == "Done."
    kinds = [e["type"] for e in collected.seen if e["type"] not in ("text", "code_preview")]
    assert kinds == ["request_sent", "thinking", "usage", "step_start", "step_end"] * 2 + [
        "request_sent", "thinking", "usage"]
    usage = [e for e in collected.seen if e["type"] == "usage"]
    assert usage[-1]["ask_tokens"] == sum(u["input_tokens"] + u["output_tokens"] for u in usage)
    previews = [(e["step"], e["attempt"]) for e in collected.seen if e["type"] == "code_preview"]
    # The second call writes the fix of step 1 (it failed): attempt 2 of step 1.
    assert previews == [(1, 1), (1, 2)]


def test_reading_the_ask_while_outputs_stream_in_on_another_thread_does_not_deadlock() -> None:
    # In a kernel the IOPub thread emits outputs holding its list's lock, while the main
    # thread emits a step's end and the comm reads the journal for late pages.
    journal = Journal()
    run = RunCode("print(1)", 1, 1, "c1")
    journal.emit(StepStarted(run))
    outputs = OutputList(journal.output)
    outputs.add(out("a\n"))
    inside, caught = threading.Event(), []

    def stream() -> None:
        with outputs.lock:
            inside.set()
            time.sleep(0.05)  # the main thread now reads the journal
            outputs.add(out("b\n"))

    def encoder(event: Event) -> None:
        if isinstance(event, StepEnded):
            threading.Thread(target=stream, daemon=True).start()
            inside.wait(5)
            caught.append(journal.catch_up())

    journal.encoders.append(encoder)
    main = threading.Thread(target=journal.emit, args=(StepEnded(run, CodeResult("ok")),),
                            daemon=True)
    main.start()
    main.join(10)
    assert not main.is_alive(), "deadlocked"
    assert caught[0][1]["outputs"] == [out("a\n"), out("b\n")]
