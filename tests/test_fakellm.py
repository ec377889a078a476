"""The fake model server itself: non-streaming answers, strict checks, the CLI process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anthropic
import openai
import pytest

from tests.fakellm import (
    OPENAI_PATH,
    Fail,
    FakeLLM,
    Hang,
    Recorded,
    RemoteFakeLLM,
    Turn,
    turn_from_json,
    turn_to_json,
)

ROOT = Path(__file__).resolve().parent.parent


def openai_client(url: str, retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(api_key="k", base_url=url, max_retries=retries, timeout=5)


def anthropic_client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="k", base_url=url, max_retries=0, timeout=5)


def test_non_streaming_answers_parse_in_both_sdks(fake: FakeLLM) -> None:
    turn = Turn("Hi!", tool_calls=[("run_python", {"code": "1"})])
    fake.push(turn, turn)
    schema = {"type": "object", "properties": {"code": {"type": "string"}}}
    completion = openai_client(fake.openai_base_url).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}], tools=[
            {"type": "function", "function": {"name": "run_python", "parameters": schema}}])
    message = completion.choices[0].message
    assert message.content == "Hi!" and completion.choices[0].finish_reason == "tool_calls"
    assert message.tool_calls is not None
    call = message.tool_calls[0]
    assert call.type == "function" and json.loads(call.function.arguments) == {"code": "1"}
    reply = anthropic_client(fake.anthropic_base_url).messages.create(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}],
        tools=[{"name": "run_python", "input_schema": schema}])
    assert [b.type for b in reply.content] == ["text", "tool_use"]
    assert reply.stop_reason == "tool_use" and reply.usage.output_tokens == 7


def test_callable_step_sees_the_request(fake: FakeLLM) -> None:
    def echo(request: Recorded) -> Turn:
        return Turn(f"you said {request.messages[-1]['content']}")

    fake.push(echo)
    completion = openai_client(fake.openai_base_url).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "ping"}])
    assert completion.choices[0].message.content == "you said ping"


def test_strict_checks_reject_what_the_real_api_rejects(fake: FakeLLM) -> None:
    fake.push(Turn("never sent"))
    with pytest.raises(anthropic.BadRequestError, match="alternate"):
        anthropic_client(fake.anthropic_base_url).messages.create(
            model="m", max_tokens=10,
            messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    with pytest.raises(openai.BadRequestError, match="tool_call_ids did not have response"):
        openai_client(fake.openai_base_url).chat.completions.create(model="m", messages=[
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "user", "content": "b"}])
    assert fake.remaining == 1  # a rejected request uses no turn
    assert fake.calls() == 2


def test_running_out_fails_at_once_with_a_clear_message(fake: FakeLLM) -> None:
    with pytest.raises(openai.InternalServerError, match="script ran out of turns"):
        openai_client(fake.openai_base_url, retries=3).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}])
    assert fake.calls(OPENAI_PATH) == 1  # x-should-retry: false stopped the SDK's retries


def test_json_round_trip() -> None:
    steps: list[Turn | Fail | Hang] = [
        Turn("a", tool_calls=[("run_python", '{"bad')]), Fail(503, times=2), Hang(1.5)]
    assert [turn_from_json(json.loads(json.dumps(turn_to_json(s)))) for s in steps] == steps
    assert turn_from_json("plain") == Turn("plain")


def test_cli_process_with_remote_control(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["first", {"fail": 500}]))
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakellm", "--script", str(script)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = f"http://127.0.0.1:{int(proc.stdout.readline())}"
        remote = RemoteFakeLLM(url)
        remote.push(Turn("pushed", tool_calls=[("run_python", {"code": "2"})]))
        client = openai_client(f"{url}/v1", retries=1)
        tool = {"type": "function", "function": {"name": "run_python", "parameters": {}}}
        texts = [client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": str(n)}],
            tools=[tool]).choices[0].message.content for n in range(2)]
        assert texts == ["first", "pushed"]  # the 500 in between was retried by the SDK
        assert remote.remaining == 0
        assert [r.messages[0]["content"] for r in remote.requests] == ["0", "1", "1"]
        remote.reset()
        assert remote.calls() == 0
    finally:
        proc.terminate()
        assert proc.wait(timeout=5) == 0
