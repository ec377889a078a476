"""The wire codec: every event round-trips, and bad JSON is refused naming the bad field."""

from __future__ import annotations

import ast
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import pytest

from jupyter_ci.wire import events as wire
from jupyter_ci.wire.codec import WireError, decode, encode

WIRE = Path(__file__).parent.parent / "jupyter_ci" / "wire"
USAGE = {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "cost_usd": None}

SAMPLES: list[wire.Event] = [
    wire.AskStart("a1", "go", "openai:m"), wire.Thinking(), wire.Text("he"),
    wire.RequestSent((wire.Part("System prompt", 1, "hi"),)), wire.CodePreview(1, 1, "x ="),
    wire.StepStart(1, 2, "retry", "pandas", "x = 1"),
    wire.Output(1, {"output_type": "stream", "name": "stdout", "text": "hi"}),
    wire.ClearOutput(1, True), wire.SetOutputs(1, ()),
    wire.StepEnd(1, 1, "code", "x", "error", 3, 12.5, wire.StepError("NameError", "x")),
    wire.Files(1, (wire.FileEntry("a.csv", 3, "text/csv"),)),
    wire.StepSentBack(2, "Step 2 reads x."), wire.Notice("retiring"),
    wire.WaitingForUser("Edits?", "edits", edits=(wire.ProposedEdit("c", "id", "a", "b"),)),
    wire.Usage(10, 2, 12, 1, 0.12345678, None, 200_000),
    wire.AskEnd(wire.Outcome(
        "done", "Yes.", None, wire.UnresolvedStep(2, "NameError: x", ("x",), "done with …"),
        2, 40, wire.UsageTotals(30, 10, 0, 0.5),
        (wire.EditOutcome("c", "id", "a", "b", "accepted"),))),
]


def test_every_event_is_sampled_and_round_trips_through_json_text() -> None:
    assert {type(s) for s in SAMPLES} == set(wire.EVENTS)
    for sample in SAMPLES:
        text = json.dumps(encode(sample))
        assert json.loads(text)["type"] == sample.type
        assert decode(wire.Event, json.loads(text)) == sample


def test_the_json_form_keeps_field_order_omits_empty_names_and_rounds_money() -> None:
    end = encode(SAMPLES[-1])
    assert list(end)[:3] == ["type", "status", "answer"]  # the outcome beside the tag
    assert encode(wire.UnresolvedStep(2, "e", (), "m")) == {"step": 2, "error": "e",
                                                            "message": "m"}
    assert encode(wire.Usage(1, 1, 2, cost_usd=0.1 + 0.2))["cost_usd"] == 0.3


@pytest.mark.parametrize(("value", "said"), [
    ({"type": "step_end", "step": 1, "attempt": 1, "kind": "code", "code": "", "status": "fine",
      "execution_count": None, "duration_ms": 1, "error": None},
     "status: expected one of 'ok', 'error', 'timeout', 'died', 'interrupted', got 'fine'"),
    ({"type": "request_sent", "parts": [{"name": "a", "tokens": 1, "text": "b"},
                                        {"name": "a", "tokens": "1", "text": "b"}]},
     "parts[1].tokens: expected an integer, got '1'"),
    ({"type": "text", "delta": "x", "colour": "red"}, "colour: unknown field of Text"),
    ({"type": "thinking", "extra": 1}, "extra: unknown field of Thinking"),
    ({"type": "code_preview", "step": 1, "attempt": True, "code": ""},
     "attempt: expected an integer, got True"),
    ({"type": "text"}, "delta: missing"),
    ({"type": "bogus"}, "type: expected one of"),
    ({"type": "ask_end", "status": "done", "answer": "", "error": None, "unresolved": None,
      "steps": 0, "tokens": 0, "usage": USAGE, "edits": [
          {"call_id": "c", "cell_id": "i", "old": "", "new": "", "decision": "maybe"}]},
     "edits[0].decision: expected one of 'accepted', 'rejected', 'proposed', got 'maybe'"),
    ({"type": "ask_end", "status": "done", "answer": "", "error": None, "unresolved": None,
      "steps": 0, "tokens": 0, "usage": USAGE, "edits": [], "pin": "abc"},
     "pin: unknown field of Outcome"),
])
def test_a_bad_event_is_refused_with_the_path_of_its_bad_field(value: object,
                                                                said: str) -> None:
    with pytest.raises(WireError) as refused:
        decode(wire.Event, value)
    assert said in str(refused.value)


def test_a_new_event_is_one_class_the_codec_reads_and_writes() -> None:
    @dataclass(frozen=True)
    class Approved:
        """An event added later: a tag and its fields, nothing else."""

        type: ClassVar[Literal["approved"]] = "approved"
        step: int
        by: str | None = None

    assert encode(Approved(3)) == {"type": "approved", "step": 3, "by": None}
    assert decode(Approved, {"type": "approved", "step": 3}) == Approved(3)
    with pytest.raises(WireError, match="type: expected 'approved', got 'denied'"):
        decode(Approved, {"type": "denied", "step": 3})


@pytest.mark.parametrize(("output", "said"), [
    (5, "output: expected an object, got 5"),
    ({"output_type": "html", "data": {}}, "output.output_type: expected one of 'stream', "
     "'display_data', 'execute_result', 'error', got 'html'"),
    ({"name": "stdout", "text": "hi"}, "output.output_type: expected one of"),
])
def test_an_nbformat_output_is_read_as_an_object_with_a_known_output_type(
        output: object, said: str) -> None:
    with pytest.raises(WireError) as refused:
        decode(wire.Output, {"type": "output", "step": 1, "output": output})
    assert said in str(refused.value)


def test_an_nbformat_output_is_written_as_is_and_read_leniently_as_any_object() -> None:
    shown = {"output_type": "display_data", "data": {"text/plain": "1"}, "metadata": {},
             "newer": True}
    assert encode(wire.Output(2, shown)) == {"type": "output", "step": 2, "output": shown}
    assert decode(wire.Output, encode(wire.Output(2, shown))) == wire.Output(2, shown)
    odd = {"type": "set_outputs", "step": 1, "outputs": [{"output_type": "html"}]}
    assert decode(wire.SetOutputs, odd, lenient=True).outputs == ({"output_type": "html"},)
    with pytest.raises(WireError, match=r"outputs\[0\]: expected an object, got 3"):
        decode(wire.SetOutputs, {**odd, "outputs": [3]}, lenient=True)


def test_the_wire_imports_only_the_standard_library_and_itself() -> None:
    for path in WIRE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or name.startswith("jupyter_ci.wire"), (
                    f"{path.name} imports {name}")
