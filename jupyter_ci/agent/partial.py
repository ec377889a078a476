"""Read the code of a `run_python` call while its JSON arguments are still streaming in."""

from __future__ import annotations

import json
import re

# Where the string value of "code" starts in the arguments object.
_CODE_START = re.compile(r'"code"\s*:\s*"')


def partial_code(raw: str) -> str | None:
    """Return the code the arguments hold so far, decoded; None before the code starts."""
    found = _CODE_START.search(raw)
    if found is None:
        return None
    body = raw[found.end():]
    end = _closing_quote(body)
    body = body[:end] if end is not None else _strip_cut_escape(body)
    try:
        value = json.loads(f'"{body}"')
    except ValueError:
        return None
    if not isinstance(value, str):
        return None
    if value and "\ud800" <= value[-1] <= "\udbff":
        return value[:-1]  # half of a surrogate pair (an emoji as \ud83d\ude42) so far
    return value


def _closing_quote(body: str) -> int | None:
    """Return the index of the quote that ends the string, if it has arrived."""
    escaped = False
    for index, char in enumerate(body):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            return index
    return None


def _strip_cut_escape(body: str) -> str:
    """Drop an escape sequence the stream has not finished sending yet."""
    # An odd run of backslashes at the end is an escape cut after its backslash.
    if _backslashes_before(body, len(body)) % 2:
        return body[:-1]
    cut = re.search(r"\\u[0-9a-fA-F]{0,3}$", body)
    if cut is not None and _backslashes_before(body, cut.start()) % 2 == 0:
        return body[:cut.start()]  # \u and fewer than four digits so far
    return body


def _backslashes_before(text: str, end: int) -> int:
    """Count the backslashes right before index `end`."""
    return end - len(text[:end].rstrip("\\"))
