"""A REST body read as its wire class refuses what the hand checks refused, with their words."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from jupyter_ci.server.sessions.errors import SessionError
from jupyter_ci.server.sessions.fields import (
    Refused,
    execute,
    names_of,
    new_session,
    optional_str,
    validate_cwd_name,
    validate_env,
)
from jupyter_ci.wire.requests import NewSession

VALUES: list[object] = [None, "x", "../up", 5, True, 1.5, [], ["A=1"], {}, {"A": "1"},
                        {"A": 1}, {"JUPYTER_CI_BROKER_TOKEN": "x"}, {"LD_PRELOAD": "x"},
                        {"A": "a\0"}]


def hand_checked(body: dict[str, Any]) -> tuple[object, ...]:
    """How POST /sessions read its body before the wire (its checks, in their order)."""
    return (optional_str(body, "kernel_name"), validate_env(body.get("env")),
            validate_cwd_name(body.get("cwd_name")), optional_str(body, "language"))


def outcome(read: Any, body: dict[str, Any]) -> object:
    try:
        return read(body)
    except SessionError as err:
        return (type(err), err.status, err.reason, err.message)


@pytest.mark.parametrize(("name", "value"), itertools.product(names_of(NewSession), VALUES))
def test_a_new_sessions_body_is_refused_as_before(name: str, value: object) -> None:
    def wire_read(body: dict[str, Any]) -> tuple[object, ...]:
        found = new_session(body)
        return (found.kernel_name, found.env, found.cwd_name, found.language)

    body = {name: value}
    assert outcome(wire_read, body) == outcome(hand_checked, body)


def test_the_fields_a_new_session_may_hold_are_the_wire_classs() -> None:
    assert names_of(NewSession) == ("kernel_name", "env", "cwd_name", "language")
    assert new_session({}) == NewSession(env={})


def test_an_executes_timeout_no_float_holds_is_its_400() -> None:
    huge = 10 ** 400  # JSON integers have no bound; the server's parser keeps them whole
    with pytest.raises(Refused) as caught:
        execute({"code": "1", "timeout": huge}, 1000)
    assert (caught.value.status, caught.value.reason) == (400, "bad_field")
    assert caught.value.message.startswith("'timeout' must be a number of seconds in (0, ")
