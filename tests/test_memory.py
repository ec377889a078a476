"""Memory across asks: compacted summaries within a budget."""

from __future__ import annotations

import json

from jupyter_ci.agent.memory import Memory, summarize
from jupyter_ci.agent.types import Message, ToolCall, ToolResult, ToolStatus


def transcript(code: str, output: str, status: ToolStatus = "ok") -> list[Message]:
    call = ToolCall("c1", "run_python", json.dumps({"code": code}))
    return [Message("user", "ctx + prompt"), Message("assistant", "", (call,)),
            Message.tool("c1", ToolResult(status, output)), Message("assistant", "Done.")]


def test_summary_keeps_code_output_and_answer() -> None:
    text = summarize(transcript("df = load()", "loaded 10 rows"), "Loaded.")
    assert "df = load()" in text and "loaded 10 rows" in text and text.endswith("Loaded.")


def test_failed_code_is_marked_and_its_traceback_dropped() -> None:
    text = summarize(transcript("1/0", "ZeroDivisionError: x\nlong", "error"), "No.")
    assert "Code that failed" in text and "long" not in text
    # The status decides, not the wording: output that mentions a traceback ran fine.
    text = summarize(transcript("print('Traceback:')", "Traceback:"), "Yes.")
    assert "Code run" in text and "Code that failed" not in text


def test_calls_that_never_ran_are_left_out() -> None:
    statuses: tuple[ToolStatus, ...] = ("invalid", "not_run")
    for status in statuses:
        text = summarize(transcript("x = 1", "Error: bad", status), "No.")
        assert "x = 1" not in text


def test_messages_are_pairs_and_the_oldest_go_first_when_over_budget() -> None:
    memory = Memory(budget_tokens=60)
    for i in range(5):
        memory.remember(f"ask {i}", transcript(f"x{i} = {i}", "ok"), f"answer {i}")
    messages = memory.messages()
    assert messages[-2].content == "ask 4" and messages[-1].role == "assistant"
    assert "ask 0" not in [m.content for m in messages]
    memory.clear()
    assert memory.messages() == []


def test_a_single_huge_ask_is_trimmed_not_dropped() -> None:
    memory = Memory(budget_tokens=100)
    memory.remember("big", transcript("x = 1", "y" * 50_000), "answer")
    messages = memory.messages()
    assert messages[0].content == "big" and len(messages[1].content) <= 400 + 1_000
