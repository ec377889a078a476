"""The public driver (sync and async forms), the output list, and tool results per provider."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import pytest

from jupyter_ci import providers
from jupyter_ci.agent.drive import drive, drive_async
from jupyter_ci.agent.errors import AskError, LimitReached
from jupyter_ci.agent.events import Event, StepEnded, StepStarted, Text, event_json
from jupyter_ci.agent.feedback import REDACTION_NOTE
from jupyter_ci.agent.loop import AskLoop, Limits
from jupyter_ci.agent.outputs import OutputEvent, OutputList
from jupyter_ci.agent.types import (
    CodeResult,
    ErrorInfo,
    Image,
    Message,
    ModelReply,
    ModelRequest,
    OnText,
    ToolCall,
    ToolResult,
)
from jupyter_ci.models import anthropic as anthropic_adapter
from jupyter_ci.models import openai as openai_adapter
from jupyter_ci.models.resolve import ModelSettings, resolve_model
from jupyter_ci.models.scripted import ScriptedModel, code_call, register


@dataclass
class Recorder:
    """An encoder that writes down the events the driver emitted."""

    events: list[str] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        match event:
            case Text(delta):
                self.events.append(f"text:{delta}")
            case StepStarted(run):
                self.events.append(f"start:{run.step}.{run.attempt}:{run.timeout:g}")
            case StepEnded(run, result):
                self.events.append(f"end:{run.step}:{result.status}")
            case _:
                self.events.append(event_json(event)["type"])


@dataclass
class Runner:
    """An executor that fails code containing 'boom' and records timeouts."""

    timeouts: list[float] = field(default_factory=list)

    def run(self, code: str, timeout: float) -> CodeResult:
        self.timeouts.append(timeout)
        if "boom" in code:
            return CodeResult("error", error=ErrorInfo("NameError", "boom"))
        return CodeResult("ok", [{"output_type": "stream", "name": "stdout", "text": code}])


@dataclass
class AsyncRunner:
    """The same executor, awaited."""

    inner: Runner = field(default_factory=Runner)

    async def run(self, code: str, timeout: float) -> CodeResult:
        await asyncio.sleep(0)
        return self.inner.run(code, timeout)


@dataclass
class AsyncScripted:
    """A scripted model, awaited."""

    inner: ScriptedModel

    async def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        await asyncio.sleep(0)
        return self.inner.complete(request, on_text)


def script() -> list[ModelReply]:
    return [code_call("boom", "c1"), code_call("x = 1", "c2"), ModelReply(text="Done.")]


def test_sync_and_async_drivers_make_the_same_decisions() -> None:
    limits = Limits(timeout=7.5)
    sync_view, async_view = Recorder(), Recorder()
    sync_runner, async_runner = Runner(), AsyncRunner()
    outcome = drive(AskLoop("go", limits=limits), ScriptedModel.of(script()), sync_runner,
                    sync_view)
    async_outcome = asyncio.run(drive_async(
        AskLoop("go", limits=limits), AsyncScripted(ScriptedModel.of(script())), async_runner,
        async_view))
    # The loop returns its own outcome: the doors build none.
    assert outcome == async_outcome
    assert (outcome.status, outcome.answer, outcome.steps, outcome.error) == (
        "done", "Done.", 1, None)
    assert sync_view.events == async_view.events
    assert sync_view.events == [
        "request_sent", "thinking", "usage", "start:1.1:7.5", "end:1:error", "request_sent",
        "thinking", "usage", "start:1.2:7.5", "end:1:ok", "request_sent", "thinking", "text:Do",
        "text:ne.", "usage"]
    # The timeout travels on RunCode, not through the driver's own knowledge of limits.
    assert sync_runner.timeouts == async_runner.inner.timeouts == [7.5, 7.5]


def test_async_driver_returns_the_error_that_ended_the_ask_in_its_outcome() -> None:
    model = AsyncScripted(ScriptedModel.of([code_call("boom", f"c{i}") for i in range(3)]))
    outcome = asyncio.run(drive_async(AskLoop("go", limits=Limits(max_fixes=2)), model,
                                      AsyncRunner(), Recorder()))
    assert outcome.status == "failed" and isinstance(outcome.error, LimitReached)
    assert "failed 2 times" in str(outcome.error) and outcome.result_status == "failed"


def test_an_unexpected_error_is_the_asks_failure_when_the_door_says_how() -> None:
    class Broken:
        async def run(self, code: str, timeout: float) -> CodeResult:
            raise RuntimeError("the session's kernel went away")

    model = AsyncScripted(ScriptedModel.of(script()))
    with pytest.raises(RuntimeError):
        asyncio.run(drive_async(AskLoop("go"), model, Broken(), Recorder()))
    outcome = asyncio.run(drive_async(
        AskLoop("go"), AsyncScripted(ScriptedModel.of(script())), Broken(), Recorder(),
        failure=lambda exc: AskError(f"broke: {exc}")))
    assert outcome.status == "failed" and outcome.steps == 1
    assert str(outcome.error).startswith("broke: the session's kernel went away")


def test_scripted_models_are_reached_by_name() -> None:
    model = register("drive-test", [ModelReply(text="hi")])
    assert resolve_model("scripted:drive-test", ModelSettings(), {}) is model
    assert model.id == "scripted:drive-test"
    assert providers.PROVIDERS["scripted"].in_process
    with pytest.raises(Exception, match="register"):
        resolve_model("scripted:nobody", ModelSettings(), {})


def test_tool_results_carry_status_not_wording() -> None:
    loop = AskLoop("go")
    loop.start()
    loop.on_reply(code_call("print('Traceback:')", "c1"))
    loop.on_result(CodeResult("ok", [{"output_type": "stream", "name": "stdout",
                                      "text": "Traceback:\n"}]))
    tool = loop.transcript()[-1]
    assert tool.result is not None and tool.result.status == "ok" and not tool.result.failed
    assert tool.content == tool.result.text == "Traceback:"


def test_every_tool_result_is_redacted_before_the_model_sees_it() -> None:
    loop = AskLoop("go", redact=lambda text: text.replace("hunter2", "[redacted]"))
    loop.start()
    loop.on_reply(code_call("print(pw)", "c1"))
    loop.on_result(CodeResult("error", [{"output_type": "stream", "name": "stdout",
                                         "text": "hunter2\n"}],
                              error=ErrorInfo("ValueError", "bad password hunter2")))
    text = loop.transcript()[-1].content
    assert "hunter2" not in text
    # Twice in the output and error, once in the note that tells the model what happened.
    assert text.count("[redacted]") == 3 and text.endswith(REDACTION_NOTE)


def test_output_list_applies_clear_and_updates_and_tells_each_change() -> None:
    events: list[OutputEvent] = []
    outputs = OutputList(events.append)
    outputs.apply("stream", {"name": "stdout", "text": "gone\n"})
    outputs.apply("clear_output", {"wait": True})
    outputs.apply("display_data", {"data": {"text/plain": "1"}, "metadata": {},
                                   "transient": {"display_id": "d"}})
    outputs.apply("stream", {"name": "stdout", "text": "a"})
    outputs.apply("stream", {"name": "stdout", "text": "b"})
    outputs.apply("update_display_data", {"data": {"text/plain": "2"}, "metadata": {},
                                          "transient": {"display_id": "d"}})
    assert [e.kind for e in events] == ["add", "clear", "add", "add", "add", "replace"]
    assert outputs.merged() == [
        {"output_type": "display_data", "data": {"text/plain": "2"}, "metadata": {}},
        {"output_type": "stream", "name": "stdout", "text": "ab"}]
    assert events[-1].outputs[0]["data"] == {"text/plain": "2"}
    # The added output itself was not changed in place by the update.
    assert events[2].output == {"output_type": "display_data", "data": {"text/plain": "1"},
                                "metadata": {}}


PNG = Image("image/png", "iVBORw0KGgo=")


def _history(images: tuple[Image, ...]) -> tuple[Message, ...]:
    calls = (ToolCall("c1", "run_python", json.dumps({"code": "plot()"})),
             ToolCall("c2", "run_python", json.dumps({"code": "plot2()"})))
    return (Message("user", "plot"), Message("assistant", "", calls),
            Message.tool("c1", ToolResult("ok", "shown", images)),
            Message.tool("c2", ToolResult("error", "NameError: plot2")),
            Message("assistant", "Done."))


def test_openai_images_follow_the_tool_messages_of_their_turn() -> None:
    wire = openai_adapter.to_wire("sys", _history((PNG,)))
    roles = [m["role"] for m in wire]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user", "assistant"]
    parts = wire[5]["content"]
    assert isinstance(parts, list) and parts[1] == {
        "type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    assert [m["role"] for m in openai_adapter.to_wire("", _history(()))] == [
        "user", "assistant", "tool", "tool", "assistant"]


def test_anthropic_images_go_inside_the_tool_result() -> None:
    wire = anthropic_adapter.to_wire(_history((PNG,)))
    results = wire[2]["content"]
    assert isinstance(results, list)
    first, second = results[0], results[1]
    assert first["type"] == "tool_result" and isinstance(first["content"], list)
    assert first["content"][0] == {"type": "text", "text": "shown"}
    assert first["content"][1]["source"] == {"type": "base64", "media_type": "image/png",
                                             "data": "iVBORw0KGgo="}
    assert second["type"] == "tool_result" and second.get("is_error") is True
    assert "is_error" not in first
