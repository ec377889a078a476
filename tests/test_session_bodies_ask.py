"""An ask's body read as its wire class (wire.requests.Ask) is refused as the hand checks did."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from jupyter_ci.agent.approval import MODES
from jupyter_ci.server.sessions import ask
from jupyter_ci.server.sessions.errors import SessionError
from jupyter_ci.server.sessions.fields import Refused, names_of
from jupyter_ci.wire.requests import Ask

#: Each field's values: good ones, each way of being bad, and absent.
ABSENT = object()
VALUES: dict[str, list[object]] = {
    "prompt": [ABSENT, None, "", "  ", "hi", " hi ", 5, True],
    "model": [ABSENT, None, 5, "a:b", []],
    "timeout": [ABSENT, None, 0, -1, 1, 2.5, True, "x", float("inf")],
    "max_steps": [ABSENT, None, 0, 3, 2.0, False],
    "max_fixes": [ABSENT, None, -2, 1],
    "approve": [ABSENT, None, "each", "bogus", 3]}


def hand_checked(body: dict[str, Any]) -> tuple[object, ...]:
    """How POST .../ask read its body before the wire (its checks, in their order)."""
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise SessionError("'prompt' (a non-empty string) is required.")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise SessionError("'model' must be a string such as 'openai:gpt-5.5'.")
    numbers = []
    for name, kind in (("timeout", float), ("max_steps", int), ("max_fixes", int)):
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(
                value, (int, float) if kind is float else int) or value <= 0):
            raise SessionError(f"'{name}' must be a positive "
                               f"{'number' if kind is float else 'integer'}.")
        numbers.append(value)
    approve = body.get("approve")
    if approve is not None and approve not in MODES:
        raise Refused(400, "bad_field", f"'approve' must be one of {', '.join(MODES)} "
                      "(never: run every step; first: approve the first step; plan: approve "
                      "a plan first; each: approve every step).")
    return (prompt.strip(), model, *numbers, approve)


def outcome(read: Any, body: dict[str, Any]) -> tuple[object, ...]:
    try:
        return ("read", read(body))
    except SessionError as err:
        return ("refused", type(err), err.status, err.reason, err.message)


def wire_read(body: dict[str, Any]) -> tuple[object, ...]:
    request = ask.parse(body)
    return (request.prompt, request.model, request.timeout, request.max_steps,
            request.max_fixes, request.approve)


def test_an_asks_body_is_read_or_refused_as_before_whatever_its_fields() -> None:
    # Every combination: with several bad fields, the first in the body's order is said.
    seen = set()
    for values in itertools.product(*VALUES.values()):
        body = {k: v for k, v in zip(VALUES, values, strict=True) if v is not ABSENT}
        before = outcome(hand_checked, body)
        assert outcome(wire_read, body) == before, body
        seen.add(before[0] if before[0] == "read" else before[-1])
    assert len(seen) == 7  # read, and each of the six messages


def test_the_fields_an_ask_may_hold_are_the_wire_classs() -> None:
    assert names_of(Ask) == tuple(VALUES)


def test_a_timeout_no_float_holds_is_a_400_after_the_fields_before_it() -> None:
    huge = 10 ** 400  # JSON integers have no bound; the server's parser keeps them whole
    with pytest.raises(SessionError) as caught:
        ask.parse({"prompt": "x", "timeout": huge})
    assert (caught.value.status, caught.value.reason) == (400, "bad_request")
    assert "'timeout' must be a positive number" in caught.value.message
    assert outcome(wire_read, {"prompt": " ", "timeout": huge}) == outcome(
        hand_checked, {"prompt": " "})
