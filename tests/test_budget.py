"""Token estimates, middle trimming of tool output and priority-ordered section fitting."""

from __future__ import annotations

import re

import pytest

from jupyter_ci.agent.budget import estimate_tokens, fit_sections, trim_middle


def numbered(n: int, width: int = 10) -> str:
    """Make n distinct lines of about width characters."""
    return "\n".join(f"line {i:05d} ".ljust(width, "x") for i in range(n))


def test_estimate_tokens_is_chars_over_four_rounded_up() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abc") == 1
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("x" * 4000) == 1000


def test_trim_middle_leaves_short_text_alone() -> None:
    assert trim_middle("hello", 5) == "hello"
    assert trim_middle("", 0) == ""


@pytest.mark.parametrize("max_chars", [60, 100, 500, 999, 20_000])
@pytest.mark.parametrize("text", [
    "a" * 50_000,
    numbered(5_000, 40),
    "no newlines " * 10_000,
    "\n" * 30_000,
])
def test_trim_middle_never_exceeds_the_limit(text: str, max_chars: int) -> None:
    out = trim_middle(text, max_chars)
    assert len(out) <= max_chars
    marker = re.search(r"\[… ([\d,]+) characters trimmed …\]", out)
    assert marker is not None
    # The marker reports exactly how much of the text is missing.
    trimmed = int(marker.group(1).replace(",", ""))
    assert len(out) - len(marker.group(0)) - 2 + trimmed == len(text)


def test_trim_middle_keeps_head_and_tail_on_line_boundaries() -> None:
    text = numbered(2_000, 30)
    out = trim_middle(text, 2_000)
    head, _, tail = out.partition("\n[…")
    assert text.startswith(head) and head.endswith("x")
    assert out.endswith(text.splitlines()[-1])
    tail = tail.split("…]\n", 1)[1]
    assert tail.splitlines()[0] in text.splitlines()  # the tail starts with a whole line
    assert len(head) > 500 and len(tail) > 500


def test_trim_middle_with_a_limit_below_the_marker_cuts_hard() -> None:
    assert trim_middle("abcdefghij" * 10, 7) == "abcdefg"
    assert trim_middle("abc", 0) == ""


def test_fit_sections_keeps_everything_that_fits() -> None:
    out = fit_sections([("A", "one\ntwo"), ("B", "three")], 1_000)
    assert out == "## A\none\ntwo\n\n## B\nthree"


def test_fit_sections_skips_empty_sections() -> None:
    assert fit_sections([("A", ""), ("B", "  \n"), ("C", "x")], 100) == "## C\nx"


def test_fit_sections_trims_the_overflowing_section_and_marks_it() -> None:
    out = fit_sections([("Vars", numbered(1_000)), ("Files", "data.csv")], 200)
    assert out.startswith("## Vars\nline 00000")
    assert re.search(r"… \((\d+) more lines\)$", out.split("\n\n")[0])
    assert estimate_tokens(out) <= 200
    kept = out.count("line 0")
    assert f"… ({1_000 - kept} more lines)" in out


def test_fit_sections_prefers_higher_priority_sections() -> None:
    big = numbered(200, 40)
    out = fit_sections([("First", big), ("Second", big)], 1_500)
    assert "## First" in out and "more lines" in out
    assert "## Second" not in out or out.index("## Second") > out.index("## First")
    assert estimate_tokens(out) <= 1_500


def test_fit_sections_fills_the_room_left_with_a_small_later_section() -> None:
    out = fit_sections([("Big", "y" * 10_000), ("Small", "z")], 100)
    # The one-line big section is cut short; the small one still fits after it or is dropped,
    # but the budget always holds.
    assert out.startswith("## Big\nyyy")
    assert estimate_tokens(out) <= 100


@pytest.mark.parametrize("budget", [0, 1, 5, 10, 50, 333, 5_000])
def test_fit_sections_always_respects_the_budget(budget: int) -> None:
    sections = [("A", numbered(300, 70)), ("B", "z" * 3_000), ("C", numbered(50)), ("D", "tiny")]
    out = fit_sections(sections, budget)
    assert estimate_tokens(out) <= budget


def test_fit_sections_drops_a_section_when_not_even_a_line_fits() -> None:
    out = fit_sections([("A", "short"), ("B", numbered(10))], 4)
    assert out == "## A\nshort"
