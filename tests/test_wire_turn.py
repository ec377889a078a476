"""The model service's turn on the codec (wire/turn.py, models/turn_wire.py).

The kernel writes the same bytes as before the codec (pinned here), and the server refuses a
turn with an unknown or wrong-typed field naming the field's path, in WireError.path and in
the 400's message, before anything reaches a provider.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from jupyter_ci.agent.errors import LimitReached
from jupyter_ci.agent.types import (
    FileInfo,
    Image,
    Message,
    ModelReply,
    ModelRequest,
    ToolCall,
    ToolResult,
)
from jupyter_ci.models.turn_wire import (
    ReplyReader,
    WireError,
    error_json,
    line,
    read_turn,
    reply_json,
    request_json,
    tool_input_event,
)
from jupyter_ci.server.broker.model_service import TOOLS
from tests.service_fixtures import (
    Upstream,
    capture,
    ci_config,
    jp_server_config,
    live_server,
    refusal,
    server_env,
    token,
    turn_body,
    turn_fetch,
    upstream,
)

__all__ = ["capture", "ci_config", "jp_server_config", "live_server", "server_env", "token",
           "upstream"]

REQUEST = ModelRequest(
    "sys", (Message("user", "hi"),
            Message("assistant", "", (ToolCall("c1", "run_python", "{}"),)),
            Message.tool("c1", ToolResult("error", "boom", (Image("image/png", "AAA", 3, 4),),
                                          (FileInfo("a.csv", 5, "text/csv"),)))),
    (TOOLS["run_python"],), 300, "p")
#: The bytes a kernel sent before the codec (turn_wire's hand encoder), for REQUEST.
PINNED = (
    '{"model": "openai:x", "system": "sys", "prompt": "p", "max_tokens": 300, "tools": '
    '["run_python"], "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", '
    '"content": "", "tool_calls": [{"id": "c1", "name": "run_python", "arguments": "{}"}]}, '
    '{"role": "tool", "content": "boom", "tool_call_id": "c1", "result": {"status": "error", '
    '"text": "boom", "images": [{"mime": "image/png", "data": "AAA", "width": 3, "height": 4}], '
    '"files": [{"path": "a.csv", "size": 5, "mime": "text/csv"}]}}]}')


def test_a_turn_is_written_as_before_and_read_back_whole() -> None:
    sent = json.dumps(request_json("openai:x", REQUEST))
    assert sent == PINNED
    turn = read_turn(json.loads(sent), TOOLS, 200)
    assert turn.model == "openai:x"
    assert turn.request == ModelRequest(REQUEST.system, REQUEST.messages, REQUEST.tools, 200, "p")


def test_reply_lines_are_written_as_before_and_read_back() -> None:
    reply = ModelReply("t", (ToolCall("a", "b", "c"),), 1, 2, 3, 0.5)
    assert line({"reply": reply_json(reply)}) == (
        b'{"reply":{"text":"t","input_tokens":1,"output_tokens":2,"cached_tokens":3,'
        b'"tool_calls":[{"id":"a","name":"b","arguments":"c"}],"cost_usd":0.5}}\n')
    assert "cost_usd" not in reply_json(ModelReply("t"))
    assert error_json(LimitReached("m", "h")) == {"type": "LimitReached", "message": "m",
                                                  "hint": "h"}
    assert tool_input_event("n", "ab", "abc") == {"tool_input": {"name": "n", "at": 2,
                                                                 "text": "c"}}
    seen: list[tuple[str, str]] = []
    reader = ReplyReader(lambda _: None, lambda name, raw: seen.append((name, raw)))
    reader.feed(line(tool_input_event("n", "", "ab")))
    reader.feed(line(tool_input_event("n", "ab", "abc")))
    assert seen == [("n", "ab"), ("n", "abc")]
    assert reader.feed(line({"reply": reply_json(reply)})) == reply


def _tool_message(**result: Any) -> dict[str, Any]:
    return turn_body(messages=[
        {"role": "user", "content": "plot it"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "name": "run_python", "arguments": "{}"}]},
        {"role": "tool", "content": "done", "tool_call_id": "c1",
         "result": {"status": "ok", "text": "done", **result}}])


#: A turn with one bad field, and that field's path.
BAD_FIELDS = {
    "unknown field, top": (turn_body(store=True), "store"),
    "unknown field, nested": (_tool_message(files=[{"path": "a", "size": 1, "mime": "x",
                                                    "file_id": "file-abc"}]),
                              "messages[2].result.files[0].file_id"),
    "wrong type, nested": (_tool_message(images=[{"mime": "image/png", "data": "AA",
                                                  "width": "wide"}]),
                           "messages[2].result.images[0].width"),
    "wrong literal": (_tool_message(status="fine"), "messages[2].result.status"),
    "wrong type, list item": (turn_body(tools=[{"type": "web_search"}]), "tools[0]"),
    "a bool for a number": (turn_body(max_tokens=True), "max_tokens"),
    "negative size": (_tool_message(files=[{"path": "a", "size": -1, "mime": "x"}]),
                      "messages[2].result.files[0].size"),
    "unknown tool": (turn_body(tools=["run_python", "web_search"]), "tools[1]"),
}


@pytest.mark.parametrize("case", list(BAD_FIELDS))
def test_a_bad_field_is_refused_with_its_path(case: str) -> None:
    body, path = BAD_FIELDS[case]
    with pytest.raises(WireError) as caught:
        read_turn(body, TOOLS, 200)
    assert caught.value.path == path
    assert path in str(caught.value)


async def test_the_services_400_names_the_bad_fields_path(
    live_server: Any, upstream: Upstream, token: str, capture: Any
) -> None:
    body, path = BAD_FIELDS["wrong type, nested"]
    status, lines = await turn_fetch(body, token)
    kind, message = refusal(lines)
    assert (status, kind) == (400, "ModelConfigError")
    assert message == ("The turn is not one the model service takes: "
                       f"{path} must be an integer, got 'wide'.")
    assert upstream.requests == []
