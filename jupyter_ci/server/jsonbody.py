"""Parse JSON request bodies: UTF-8 only, no lone surrogates, bounded nesting.

`json.loads` recurses once per level of nesting, so a body of 100 000 `[` raises
RecursionError, which is not ValueError: every handler that caught ValueError answered a
500. Nesting is measured before parsing instead, in linear time, brackets in strings aside.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

#: Deepest nesting of arrays and objects taken (serde_json's default limit too); model
#: requests and session bodies nest a few levels, tool schemas a few more.
MAX_DEPTH = 128

# A string, or an unterminated one up to the end: a match that starts at a quote never
# fails, so no quote is scanned from twice (an escaped-quote flood stays linear).
_STRING = re.compile(rb'"[^"\\]*(?:\\(?:.|\Z)[^"\\]*)*(?:"|\Z)', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
# A JSON escape of a UTF-16 surrogate: lone ones are not text any kernel, file or env takes.
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


class BadJSON(ValueError):
    """A body this server does not take; the message completes "The body is …" (no content)."""


class NotJSON(BadJSON):
    """A body that is not JSON at all (a syntax error)."""


def parse_json(data: bytes, *, surrogates: bool = False) -> Any:
    """Parse a JSON request body, raising BadJSON for anything this server does not take.

    `surrogates=True` lets escaped lone surrogates through (for bodies only passed on as
    JSON again, which escapes them back).
    """
    try:
        text = data.decode("utf-8-sig")  # a BOM is allowed (RFC 8259 lets parsers skip it)
    except UnicodeDecodeError:
        raise BadJSON("not UTF-8 text") from None
    if too_deep(data):
        raise BadJSON(f"nested more than {MAX_DEPTH} levels deep (arrays and objects)")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        # The message and position only: the body may hold a key.
        raise NotJSON(f"not valid JSON ({err.msg}: line {err.lineno} column {err.colno})"
                      ) from None
    except RecursionError:  # called on a stack already deep: the limit did not save it
        raise BadJSON("nested too deeply to parse") from None
    if not surrogates and _SURROGATE.search(data):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise BadJSON("not text: it holds an escaped lone surrogate (\\ud800-\\udfff)"
                          ) from None
    return value


def too_deep(data: bytes) -> bool:
    """Say whether arrays and objects in JSON `data` nest deeper than MAX_DEPTH."""
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return False  # nothing can nest deeper than the brackets it opens
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKET)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > MAX_DEPTH
