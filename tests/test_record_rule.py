"""The one rule for an ask's generated cells, from the table the labextension's tests read too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.kernel.record import generated_after

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "record_cases.json").read_text(encoding="utf-8"))


def test_table_names_are_unique_and_expect_only_later_cells() -> None:
    assert len({case["name"] for case in CASES}) == len(CASES)
    for case in CASES:
        later = [cell["id"] for cell in case["cells"][case["index"] + 1:]]
        assert set(case["expected"]) <= set(later), case["name"]


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_generated_after(case: dict[str, Any]) -> None:
    cells = case["cells"]
    found = generated_after(cells, case["index"])
    assert [cells[i]["id"] for i in found] == case["expected"], case["about"]


def test_index_outside_the_notebook_has_none() -> None:
    cells = CASES[0]["cells"]
    assert generated_after(cells, len(cells)) == []
    assert generated_after(cells, -1) == []
