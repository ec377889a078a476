"""The ask loop as a pure state machine, driven by hand."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from jupyter_ci.agent.errors import AskInterrupted, KernelDied, LimitReached
from jupyter_ci.agent.loop import AskLoop, CallModel, Fail, Finish, Limits, RunCode
from jupyter_ci.agent.restart import RestartProblem
from jupyter_ci.agent.types import CodeResult, ErrorInfo, ModelReply, ToolCall


def call(code: str, call_id: str = "c1") -> ModelReply:
    return ModelReply(tool_calls=(ToolCall(call_id, "run_python", json.dumps({"code": code})),))


def ok(text: str = "") -> CodeResult:
    outputs = [{"output_type": "stream", "name": "stdout", "text": text}] if text else []
    return CodeResult("ok", outputs, 0.01, 1)


def failed(ename: str = "NameError", evalue: str = "name 'x' is not defined") -> CodeResult:
    tb = ("\x1b[0;31mNameError\x1b[0m Traceback", "Cell In[3], line 1\n----> 1 x", "NameError")
    return CodeResult("error", [], 0.01, 2, ErrorInfo(ename, evalue, tb))


def test_a_multi_step_ask_runs_each_call_then_finishes() -> None:
    loop = AskLoop("load and plot", context="df: DataFrame")
    first = loop.start()
    assert isinstance(first, CallModel)
    assert first.request.tools[0].name == "run_python"
    assert "df: DataFrame" in first.request.messages[-1].content
    step1 = loop.on_reply(call("x = 1"))
    assert step1 == RunCode("x = 1", 1, 1, "c1")
    assert isinstance(loop.on_result(ok()), CallModel)
    step2 = loop.on_reply(call("print(x)", "c2"))
    assert isinstance(step2, RunCode) and step2.step == 2
    again = loop.on_result(ok("1\n"))
    assert isinstance(again, CallModel)
    tool_msg = again.request.messages[-1]
    assert tool_msg.role == "tool" and tool_msg.tool_call_id == "c2" and tool_msg.content == "1"
    assert loop.on_reply(ModelReply(text="x is **1**.")) == Finish("x is **1**.")


def test_a_failure_is_sent_back_and_the_fix_is_the_same_step() -> None:
    loop = AskLoop("use x")
    loop.start()
    loop.on_reply(call("print(x)"))
    nxt = loop.on_result(failed())
    assert isinstance(nxt, CallModel)
    sent = nxt.request.messages[-1].content
    assert "NameError: name 'x' is not defined" in sent
    assert "Cell In[3]" in sent and "\x1b" not in sent
    fix = loop.on_reply(call("x = 2\nprint(x)", "c2"))
    assert isinstance(fix, RunCode) and (fix.step, fix.attempt) == (1, 2)
    loop.on_result(ok("2"))
    new_step = loop.on_reply(call("y = x", "c3"))
    assert isinstance(new_step, RunCode) and (new_step.step, new_step.attempt) == (2, 1)


def test_consecutive_failures_end_the_ask_naming_the_last_error() -> None:
    loop = AskLoop("fail", limits=Limits(max_fixes=2))
    loop.start()
    loop.on_reply(call("1/0"))
    loop.on_result(failed("ZeroDivisionError", "division by zero"))
    loop.on_reply(call("1/0", "c2"))
    end = loop.on_result(failed("ZeroDivisionError", "division by zero"))
    assert isinstance(end, Fail) and isinstance(end.error, LimitReached)
    assert "2 times in a row" in str(end.error)
    assert "ZeroDivisionError: division by zero" in str(end.error)


def test_the_step_limit_counts_tool_calls() -> None:
    loop = AskLoop("loop", limits=Limits(max_steps=2))
    loop.start()
    for i in range(2):
        assert isinstance(loop.on_reply(call(f"a = {i}", f"c{i}")), RunCode)
        loop.on_result(ok())
    end = loop.on_reply(call("a = 3", "c9"))
    assert isinstance(end, Fail) and isinstance(end.error, LimitReached)
    assert "limit of 2 steps" in str(end.error)
    # The unanswered call still gets a result, so the transcript stays valid for memory.
    assert loop.transcript()[-1].tool_call_id == "c9"


def test_a_malformed_call_is_reported_and_counts_as_a_failure() -> None:
    loop = AskLoop("x", limits=Limits(max_fixes=2))
    loop.start()
    bad = ModelReply(tool_calls=(ToolCall("c1", "run_python", '{"code": "print(1)'),))
    nxt = loop.on_reply(bad)
    assert isinstance(nxt, CallModel)
    assert "not valid JSON" in nxt.request.messages[-1].content
    assert loop.failures_in_a_row == 1
    wrong_tool = ModelReply(tool_calls=(ToolCall("c2", "bash", '{"cmd": "ls"}'),))
    end = loop.on_reply(wrong_tool)
    assert isinstance(end, Fail) and "no tool named 'bash'" in str(end.error)


def test_parallel_calls_run_in_order() -> None:
    loop = AskLoop("two")
    loop.start()
    reply = ModelReply(tool_calls=(
        ToolCall("a", "run_python", '{"code": "a = 1"}'),
        ToolCall("b", "run_python", '{"code": "b = 2"}'),
    ))
    first = loop.on_reply(reply)
    assert isinstance(first, RunCode) and first.code == "a = 1"
    second = loop.on_result(ok())
    assert isinstance(second, RunCode) and second.code == "b = 2" and second.step == 2
    assert isinstance(loop.on_result(ok()), CallModel)


@pytest.mark.parametrize(("status", "error"), [("interrupted", AskInterrupted),
                                                ("died", KernelDied)])
def test_interrupt_and_death_end_the_ask(status: str, error: type) -> None:
    loop = AskLoop("x")
    loop.start()
    loop.on_reply(call("while True: pass"))
    end = loop.on_result(CodeResult(status))  # type: ignore[arg-type]
    assert isinstance(end, Fail) and isinstance(end.error, error)


def test_a_timeout_is_a_failed_attempt_with_a_clear_message() -> None:
    loop = AskLoop("x", limits=Limits(timeout=2))
    loop.start()
    loop.on_reply(call("while True: pass"))
    nxt = loop.on_result(CodeResult("timeout"))
    assert isinstance(nxt, CallModel)
    assert "Timed out after 2 s" in nxt.request.messages[-1].content


def test_output_floods_are_trimmed_for_the_model() -> None:
    loop = AskLoop("x", limits=Limits(max_output_chars=20_000))
    loop.start()
    loop.on_reply(call("print('y' * 10**6)"))
    nxt = loop.on_result(ok("HEAD" + "y" * 1_000_000 + "TAIL"))
    assert isinstance(nxt, CallModel)
    sent = nxt.request.messages[-1].content
    assert len(sent) <= 20_000 and sent.startswith("HEAD") and sent.endswith("TAIL")


def test_token_limit() -> None:
    loop = AskLoop("x", limits=Limits(max_tokens=100))
    loop.start()
    end = loop.on_reply(ModelReply(tool_calls=call("a").tool_calls, input_tokens=90,
                                   output_tokens=20))
    assert isinstance(end, Fail) and "110 tokens" in str(end.error)


def test_history_comes_before_this_ask() -> None:
    from jupyter_ci.agent.types import Message

    history = [Message("user", "earlier"), Message("assistant", "did it")]
    request = AskLoop("now", history=history).start()
    assert isinstance(request, CallModel)
    assert [m.content for m in request.request.messages[:2]] == ["earlier", "did it"]


def uses_o_unbound(steps: Sequence[tuple[int, str]], failed: Sequence[str]
                   ) -> list[RestartProblem]:
    """A stand-in restart check: a kept step that reads `o` without binding it fails."""
    made_by_failure = ("o",) if any("o = " in code for code in failed) else ()
    return [RestartProblem(step, ("o",), made_by_failure) for step, code in steps
            if "o" in code.replace("print", "") and "o = " not in code]


def lean_on_a_failure(loop: AskLoop) -> None:
    """Attempt 1 sets `o` and fails; the fix reads `o` without defining it, and succeeds."""
    loop.start()
    loop.on_reply(call("o = {'a': 1}\nprint(o['b'])"))
    loop.on_result(failed("KeyError", "'b'"))
    fix = loop.on_reply(call("print(o.get('b', 0))", "c2"))
    assert isinstance(fix, RunCode) and (fix.step, fix.attempt) == (1, 2)
    assert isinstance(loop.on_result(ok("0")), CallModel)


def test_a_step_leaning_on_its_failed_attempt_is_asked_for_again_self_contained() -> None:
    loop = AskLoop("count the b", check=uses_o_unbound)
    lean_on_a_failure(loop)
    told = loop.on_reply(ModelReply(text="There are 0."))
    assert isinstance(told, CallModel) and told.restart == RestartProblem(1, ("o",), ("o",))
    said = told.request.messages[-1]
    assert said.role == "user"
    for words in ("`o`", "step 1", "failed attempt", "after a restart", "run_python"):
        assert words in said.content, words
    redo = loop.on_reply(call("o = {'a': 1}\nprint(o.get('b', 0))", "c3"))
    assert redo == RunCode("o = {'a': 1}\nprint(o.get('b', 0))", 1, 3, "c3")
    assert isinstance(loop.on_result(ok("0")), CallModel)
    assert loop.succeeded == [(1, "o = {'a': 1}\nprint(o.get('b', 0))")]
    assert loop.on_reply(ModelReply(text="There are 0.")) == Finish("There are 0.")
    assert loop.unresolved is None


def test_a_step_still_not_self_contained_when_the_fixes_run_out_ends_unresolved() -> None:
    loop = AskLoop("count the b", check=uses_o_unbound, limits=Limits(max_fixes=2))
    lean_on_a_failure(loop)
    assert isinstance(loop.on_reply(ModelReply(text="There are 0.")), CallModel)
    end = loop.on_reply(ModelReply(text="There are 0, really."))
    assert end == Finish("There are 0, really.")
    assert loop.unresolved is not None and loop.unresolved.step == 1
    assert loop.unresolved.names == ("o",)
    assert "`o`" in loop.unresolved.error and "failed attempt" in loop.unresolved.error


def test_redoing_an_earlier_step_keeps_the_later_ones_and_their_numbers() -> None:
    loop = AskLoop("two steps", check=uses_o_unbound)
    lean_on_a_failure(loop)
    second = loop.on_reply(call("total = 1", "c3"))
    assert isinstance(second, RunCode) and (second.step, second.attempt) == (2, 1)
    loop.on_result(ok())
    assert isinstance(loop.on_reply(ModelReply(text="Done.")), CallModel)
    redo = loop.on_reply(call("o = {}\nprint(o.get('b', 0))", "c4"))
    assert isinstance(redo, RunCode) and (redo.step, redo.attempt) == (1, 3)
    loop.on_result(ok("0"))
    assert loop.succeeded == [(1, "o = {}\nprint(o.get('b', 0))"), (2, "total = 1")]
    third = loop.on_reply(call("print(total)", "c5"))
    assert isinstance(third, RunCode) and (third.step, third.attempt) == (3, 1)


def test_the_system_prompt_asks_for_fixes_that_stand_on_their_own() -> None:
    from jupyter_ci.agent.prompts import SYSTEM_PROMPT

    assert "Do not repeat code that already succeeded" not in SYSTEM_PROMPT
    assert "on its own" in SYSTEM_PROMPT
