"""Reading a run_python call's code while its JSON arguments stream in."""

from __future__ import annotations

import json

import pytest

from jupyter_ci.agent.partial import partial_code

CODE = 'import os\nprint("a\\\\b", \'x\', "\\t")\n# é ünïcode ✓ 🙂\nx = {"k": [1, 2]}\n'


@pytest.mark.parametrize("ascii_only", [False, True])
def test_every_prefix_of_the_arguments_gives_a_prefix_of_the_code(ascii_only: bool) -> None:
    raw = json.dumps({"code": CODE}, ensure_ascii=ascii_only)
    seen: list[str] = []
    for end in range(len(raw) + 1):
        code = partial_code(raw[:end])
        if code is not None:
            assert CODE.startswith(code), (raw[:end], code)
            seen.append(code)
    assert seen[-1] == CODE
    # It grows as the arguments arrive, never shrinking by more than a cut escape.
    assert len(seen) > len(CODE) // 2


def test_nothing_before_the_code_starts_and_other_fields_are_ignored() -> None:
    assert partial_code("") is None
    assert partial_code('{"timeout": 5, "co') is None
    assert partial_code('{"timeout": 5, "code": "x = 1') == "x = 1"
    assert partial_code('{"code": "x = 1", "timeout": 5}') == "x = 1"
    assert partial_code('{"code" :  "a\\u00') == "a"
    assert partial_code('{"code": "a\\\\') == "a\\"
    assert partial_code('{"code": "a\\') == "a"
