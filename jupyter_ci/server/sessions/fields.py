"""The fields of request bodies, checked: a bad one is a 400 saying what is expected."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from typing import TypeVar

from jupyter_ci.models.broker import MANAGED
from jupyter_ci.server.sandbox.environ import unsafe
from jupyter_ci.server.sessions.errors import SessionError
from jupyter_ci.wire.codec import WireError, decode
from jupyter_ci.wire.requests import SERVER_TIMEOUT, Execute, NewSession

T = TypeVar("T")
#: A field's own check of a body: raises its 400 (the words clients read) when it is bad.
Check = Callable[[Mapping[str, object]], object]

_MAX_TIMEOUT_S = 24 * 3600.0


class Refused(SessionError):
    """A request that is malformed or too large, with its status."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason = status, reason


def names_of(cls: type) -> tuple[str, ...]:
    """Return the fields a body of wire class `cls` may hold."""
    return tuple(item.name for item in dataclasses.fields(cls))


def read_body(cls: type[T], body: Mapping[str, object], checks: Mapping[str, Check]) -> T:
    """Read a body as its wire class; a bad field gets its own check's message, else the codec's."""
    try:
        return decode(cls, body)
    except WireError as err:
        check = checks.get(re.split(r"[.\[]", err.path, maxsplit=1)[0])
        if check is not None:
            check(body)
        raise Refused(400, "bad_field", f"{err}.") from None


_SESSION_CHECKS: dict[str, Check] = {
    "kernel_name": lambda body: optional_str(body, "kernel_name"),
    "language": lambda body: optional_str(body, "language"),
    "cwd_name": lambda body: validate_cwd_name(body.get("cwd_name")),
    "env": lambda body: validate_env(body.get("env"))}


def new_session(body: Mapping[str, object]) -> NewSession:
    """Read a new session's body by its wire class; its directory and variables checked."""
    request = read_body(NewSession, body, _SESSION_CHECKS)
    return dataclasses.replace(request, env=validate_env(request.env),
                               cwd_name=validate_cwd_name(request.cwd_name))


def optional_str(body: Mapping[str, object], name: str) -> str | None:
    """Return an optional string field of a body."""
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise Refused(400, "bad_field", f"'{name}' must be a string.")
    return value


def timeout_of(body: Mapping[str, object]) -> float | None:
    """Return a run's timeout: None when absent (the server's), inf for null or 0 (none)."""
    if "timeout" not in body:
        return None
    value = body["timeout"]
    if value is None or (value == 0 and not isinstance(value, bool)):
        return math.inf
    if isinstance(value, (int, float)) and not isinstance(value, bool) and (
            0 < value <= _MAX_TIMEOUT_S) and math.isfinite(value):
        return float(value)
    raise Refused(400, "bad_field", f"'timeout' must be a number of seconds in (0, "
                  f"{_MAX_TIMEOUT_S:g}], or 0 or null for no deadline.")


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def validate_cwd_name(name: object) -> str | None:
    """Check the name asked for the session's directory: a plain file name."""
    if name is None:
        return None
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SessionError("'cwd_name' must be a plain directory name: letters, digits, '.', "
                           "'_' or '-', up to 64, not starting with '.' or '-'.")
    return name


def validate_env(env: object) -> dict[str, str]:
    """Check a session's extra environment: strings only, none of the broker's variables."""
    if env is None:
        return {}
    if not isinstance(env, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise SessionError("'env' must be an object of string names to string values.")
    env = {str(k): str(v) for k, v in env.items()}
    reserved = sorted(k for k in env if k in MANAGED or not k.isidentifier()
                      or k.startswith(("JUPYTER_CI_", "KERNEL_")))
    if reserved:
        raise SessionError(f"'env' may not set {', '.join(reserved)}: the server manages "
                           "these (or they are not variable names).")
    loading = sorted(k for k in env if unsafe(k))
    if loading:
        # The sandbox's launcher starts outside the box with the session's environment.
        raise SessionError(f"'env' may not set {', '.join(loading)}: such a variable makes "
                           "programs load or read files as they start.")
    nul = sorted(k for k, v in env.items() if "\0" in v)
    if nul:  # no process environment can hold one: the kernel's launch would fail
        raise SessionError(f"'env' values may not contain a NUL character (\\u0000): "
                           f"{', '.join(nul)}. Remove it, or pass binary data in a file.")
    return env


#: Cells one execute request may run (`cells`): a notebook's worth, not a flood.
MAX_CELLS = 1000


def _cells_check(body: object) -> None:
    """Refuse `cells` that are not a non-empty list of strings."""
    raise Refused(400, "bad_field", "'cells' must be a non-empty list of strings, each a cell's "
                  "code.")


_EXECUTE_CHECKS: dict[str, Check] = {
    "code": lambda body: _refuse("'code' (a string) is required."),
    "cells": _cells_check,
    "timeout": timeout_of,
    "env": lambda body: validate_env(body.get("env"))}


def _refuse(message: str) -> None:
    raise Refused(400, "bad_field", message)


def execute(body: Mapping[str, object], max_bytes: int) -> Execute:
    """Read an execute's body: one of `code` and `cells`, within the size limits.

    Its timeout: SERVER_TIMEOUT when absent (the server's), inf for null or 0 (none).
    """
    try:
        request = read_body(Execute, body, _EXECUTE_CHECKS)
    except OverflowError:  # a timeout no float holds (JSON has no bound on its digits)
        timeout_of(body)
        raise
    if (request.code is None) == (request.cells is None):
        _refuse("Give 'code' (a string: one cell) or 'cells' (a list of strings: cells run in "
                "order), one of them.")
    cells = [request.code] if request.code is not None else list(request.cells or ())
    if not cells:
        _cells_check(body)
    if len(cells) > MAX_CELLS:
        raise Refused(413, "code_too_large", f"{len(cells)} cells in one request: at most "
                      f"{MAX_CELLS}; send the rest in another request.")
    if sum(len(cell.encode()) for cell in cells) > max_bytes:
        raise Refused(413, "code_too_large", f"The code is over {max_bytes} bytes "
                      "(c.JupyterCI.max_code_bytes; for 'cells', all of them together).")
    timeout = timeout_of(body)
    return dataclasses.replace(request, env=validate_env(request.env),
                               timeout=SERVER_TIMEOUT if timeout is None else timeout)
