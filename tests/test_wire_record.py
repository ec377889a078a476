"""The ask record on the wire: written by the codec, read back leniently as notebooks hold it."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from jupyter_ci.agent.actions import Unresolved
from jupyter_ci.agent.cost import AskUsage
from jupyter_ci.agent.events import Outcome
from jupyter_ci.kernel.protocol import AskInfo
from jupyter_ci.kernel.record import record_of, would_fail
from jupyter_ci.wire import events as wire
from jupyter_ci.wire.codec import WireError, decode, encode
from jupyter_ci.wire.record import AskRecord, read_record

TEXT = ("ask_id", "prompt_hash", "model", "status", "answer", "created")
NUMBERS = ("steps", "tokens", "version")
FULL: dict[str, Any] = {
    "version": 1, "ask_id": "a1", "prompt_hash": "0a1b", "model": "openai:m",
    "status": "done", "answer": "Yes.", "steps": 2, "tokens": 40,
    "created": "2026-01-01T00:00:00+00:00",
    "unresolved": {"step": 2, "error": "NameError: x", "names": ["x"], "message": "done …"},
    "edits": [{"call_id": "c", "cell_id": "id", "old": "a", "new": "b",
               "decision": "accepted"}],
    "usage": {"input_tokens": 30, "output_tokens": 10, "cached_tokens": 0, "cost_usd": 0.5},
    "signature": "hmac-sha256:00"}


def legacy_fields(data: object) -> dict[str, Any] | None:
    """The top-level reading notebooks always had (AskRecord.from_json before the wire)."""
    if not isinstance(data, dict):
        return None
    text = {name: data.get(name, "") for name in TEXT}
    numbers = {name: data.get(name, 0) for name in NUMBERS}
    if not all(isinstance(v, str) for v in text.values()) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in numbers.values()):
        return None
    signature = data.get("signature")
    return {**text, **numbers, "signature": signature if isinstance(signature, str) else None}


ODD: list[object] = [None, True, 1, 2.5, "x", [], [1], {}, {"a": 1}]


def variants() -> list[object]:
    """A well-formed record with each field, in turn, missing or of every odd type."""
    found: list[object] = [FULL, {}, [], "record", None, {**FULL, "interrupted": True}]
    for name, odd in itertools.product(FULL, ODD):
        found.append({**FULL, name: odd})
        found.append({k: v for k, v in FULL.items() if k != name})
    return found


@pytest.mark.parametrize("data", variants(), ids=lambda d: json.dumps(d)[:60])
def test_lenient_reading_keeps_the_rule_notebooks_were_always_read_by(data: object) -> None:
    record, legacy = read_record(data), legacy_fields(data)
    assert (record is None) == (legacy is None)
    if record is None or legacy is None:
        return
    assert {name: getattr(record, name) for name in legacy} == legacy
    assert isinstance(data, dict)
    for part, shape in (("unresolved", dict), ("edits", list), ("usage", dict)):
        given, written = data.get(part), getattr(record, part)
        if given == FULL[part]:
            assert encode(written) == given, part
        elif not isinstance(given, shape):  # a part of the wrong shape reads as none
            assert written is None, part


def test_a_record_reads_back_as_the_kernel_wrote_it() -> None:
    outcome = Outcome("done", "Yes.", None, Unresolved(2, "NameError: x", ("x",)), 2, 40,
                      AskUsage(30, 10, 0, 0.5))
    record = record_of(AskInfo("a1", "go", "openai:m"), "0a1b", outcome)
    written = json.loads(json.dumps(encode(record)))
    assert "edits" not in written and "signature" not in written
    assert written["unresolved"]["names"] == ["x"]
    assert decode(AskRecord, written) == record == read_record(written)
    assert list(written)[:3] == ["version", "ask_id", "prompt_hash"]


def test_strict_reading_still_refuses_what_lenient_reading_forgives() -> None:
    with pytest.raises(WireError, match="interrupted: unknown field of AskRecord"):
        decode(AskRecord, {**FULL, "interrupted": True})
    with pytest.raises(WireError, match=r"^ask_id: missing"):
        decode(AskRecord, {k: v for k, v in FULL.items() if k != "ask_id"})
    with pytest.raises(WireError, match=r"^usage\.cost_usd: expected a number"):
        decode(AskRecord, {**FULL, "usage": {**FULL["usage"], "cost_usd": "1"}})
    lenient = decode(AskRecord, {**FULL, "usage": {**FULL["usage"], "cost_usd": "1"},
                                 "edits": [{"call_id": 1}]}, lenient=True)
    assert lenient.usage == wire.UsageTotals(30, 10, 0, None) and lenient.edits is None


def test_lenient_reading_zeroes_what_is_missing_and_still_checks_the_rest() -> None:
    assert decode(wire.StepError, {}, lenient=True) == wire.StepError("", "")
    assert decode(wire.UsageTotals, {"x": 1}, lenient=True) == wire.UsageTotals(0, 0, 0, None)
    with pytest.raises(WireError, match=r"^ename: expected a string"):
        decode(wire.StepError, {"ename": 1}, lenient=True)


def test_a_malformed_unresolved_step_never_stops_a_reuse_with_an_error() -> None:
    record = read_record({**FULL, "unresolved": {"step": 2, "error": "e", "names": 7}})
    assert record is not None and record.unresolved is None
    assert would_fail(record, {}) is None
    found = read_record(FULL)
    assert found is not None
    failing = would_fail(found, {})
    assert failing is not None and "step 2 reads `x`" in str(failing)
    assert would_fail(found, {"x": 1}) is None


def test_a_record_from_before_protocol_2_reads_its_unresolved_step() -> None:
    record = read_record({**FULL, "unresolved": {"step": 3, "error": "NameError: y"}})
    assert record is not None
    assert record.unresolved == wire.UnresolvedStep(3, "NameError: y", (), "")
