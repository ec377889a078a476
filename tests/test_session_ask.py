"""The `ask` route of a REST session: the %%ask loop over server-sent events, real SDKs."""

from __future__ import annotations

import json
from typing import Any

import nbformat
import pytest
from traitlets.config import Config

from tests import openapi_check
from tests.fakellm import FakeLLM, Turn
from tests.nbrun import TEST_KEY, session_server_config
from tests.test_sessions import Fetch, call, new_session, run, stdout

ANTHROPIC_KEY = "sk-ant-test-0123456789abcdefghij"


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM) -> Config:
    """Enable the extension with both providers pointing at the fake model server."""
    return session_server_config(monkeypatch, {
        "OPENAI_API_KEY": TEST_KEY, "OPENAI_BASE_URL": fake.openai_base_url,
        "ANTHROPIC_API_KEY": ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": fake.anthropic_base_url})


def code(src: str, text: str = "") -> Turn:
    return Turn(text, tool_calls=[("run_python", {"code": src})])


async def ask(jp_fetch: Fetch, sid: str, **body: Any) -> list[tuple[str, Any]]:
    """POST an ask; return its server-sent events in order."""
    response = await jp_fetch("jupyter-ci", "sessions", sid, "ask", method="POST",
                              body=json.dumps(body), request_timeout=120)
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events = []
    for block in response.body.decode().split("\n\n"):
        if block.strip():
            fields = dict(line.split(": ", 1) for line in block.splitlines())
            events.append((fields["event"], json.loads(fields["data"])))
    # The end is one event, the result; `result` repeats it (a deprecated alias).
    assert [name for name, _ in events[-2:]] == ["ask_end", "result"]
    assert events[-1][1] == events[-2][1]
    for name, data in events:  # each as documented (components.schemas.AskEvents)
        openapi_check.check_event(name, data, "ask")
    openapi_check.check_schema("AskResult", events[-1][1])
    return events


@pytest.mark.parametrize("model", ["openai:gpt-test", "anthropic:claude-test"])
async def test_an_ask_runs_the_fix_loop_and_streams_its_events(
    jp_fetch: Fetch, fake: FakeLLM, model: str
) -> None:
    fake.push(code("print(undefined_total)", "Summing."),
              code("total = 2 + 3\nprint('total', total)"), Turn("The total is **5**."))
    sid = (await new_session(jp_fetch))["id"]
    events = await ask(jp_fetch, sid, prompt="add two and three", model=model)
    kinds = [kind for kind, _ in events]
    assert kinds[-1] == "result" and "text" in kinds
    starts = [data for kind, data in events if kind == "step_start"]
    assert [(s["step"], s["attempt"]) for s in starts] == [(1, 1), (1, 2)]
    ends = [data for kind, data in events if kind == "step_end"]
    assert [e["status"] for e in ends] == ["error", "ok"]
    assert ends[0]["error"]["ename"] == "NameError"
    outputs = [data["output"] for kind, data in events if kind == "output"]
    assert any(o.get("text") == "total 5\n" for o in outputs)
    result = events[-1][1]
    assert result["status"] == "done" and result["answer"] == "The total is **5**."
    assert [(s["step"], s["attempt"], s["status"]) for s in result["steps"]] == [(1, 2, "ok")]
    assert result["usage"]["tokens"] > 0
    # The code ran in the session's kernel, and the model was reached with the server's key.
    assert stdout(await run(jp_fetch, sid, "print(total)")) == "5\n"
    auth = fake.requests[0].headers
    key = TEST_KEY if model.startswith("openai") else ANTHROPIC_KEY
    # The SDK's own header: anthropic 2.x sends its key as a bearer token too.
    assert key in (auth.get("authorization", ""), auth.get("x-api-key", "")) or (
        auth.get("authorization") == f"Bearer {key}")


async def test_asks_of_a_session_share_memory_and_enter_its_notebook(
    jp_fetch: Fetch, fake: FakeLLM
) -> None:
    fake.push(code("n = 7"), Turn("n is seven."), Turn("It was seven."))
    sid = (await new_session(jp_fetch))["id"]
    await ask(jp_fetch, sid, prompt="make n")
    second = await ask(jp_fetch, sid, prompt="what was n?")
    assert second[-1][1]["answer"] == "It was seven."
    said = json.dumps(fake.requests[-1].messages)
    assert "make n" in said and "n is seven." in said
    status, nb = await call(jp_fetch, "GET", sid, "notebook")
    assert status == 200
    nbformat.validate(nb)
    sources = [c["source"] for c in nb["cells"]]
    assert sources[:3] == ["**Ask:** make n", "n = 7", "n is seven."]


async def test_what_a_step_prints_reaches_the_model_redacted(
    jp_fetch: Fetch, fake: FakeLLM
) -> None:
    fake.push(code("import os\nprint(os.environ.get('JUPYTER_CI_BROKER_TOKEN'), "
                   "os.environ['LEAKED'])"), Turn("Done."))
    # The operator's key, in the session's env by a careless client: the kernel holds it...
    sid = (await new_session(jp_fetch, env={"LEAKED": TEST_KEY}))["id"]
    events = await ask(jp_fetch, sid, prompt="show the environment")
    printed = next(d["output"]["text"] for k, d in events if k == "output").strip()
    # ...but no credential of the model service of its own: its asks run in the server.
    assert printed == f"None {TEST_KEY}"
    tool = json.dumps(fake.requests[-1].messages)
    assert TEST_KEY not in tool and "None [redacted]" in tool  # the model never sees it


@pytest.mark.parametrize(("body", "words"), [
    ({}, "prompt"),
    ({"prompt": "  "}, "prompt"),
    ({"prompt": "x", "model": 5}, "model"),
    ({"prompt": "x", "max_steps": 0}, "max_steps"),
    ({"prompt": "x", "timeout": "long"}, "timeout"),
    ({"prompt": "x", "model": "nowhere:m"}, "Unknown model provider"),
    ({"prompt": "x", "model": "no-colon"}, "provider:model"),
])
async def test_a_bad_ask_gets_a_400_before_anything_runs(
    jp_fetch: Fetch, fake: FakeLLM, body: dict[str, Any], words: str
) -> None:
    sid = (await new_session(jp_fetch))["id"]
    status, reply = await call(jp_fetch, "POST", sid, "ask", body=body)
    assert status == 400 and words in reply["message"], reply
    assert fake.calls() == 0


async def test_an_ask_that_fails_says_why_in_its_result(jp_fetch: Fetch, fake: FakeLLM) -> None:
    fake.push(*[code("1 / 0")] * 3)
    sid = (await new_session(jp_fetch))["id"]
    events = await ask(jp_fetch, sid, prompt="divide", max_fixes=2)
    result = events[-1][1]
    assert result["status"] == "failed" and result["error"]["type"] == "LimitReached"
    assert result["error"]["message"]


async def test_an_answer_over_an_unfixed_failure_is_unresolved_not_done(
    jp_fetch: Fetch, fake: FakeLLM
) -> None:
    fake.push(code("print(orders)"), Turn("Revenue peaked in March."))
    sid = (await new_session(jp_fetch))["id"]
    result = (await ask(jp_fetch, sid, prompt="best month"))[-1][1]
    assert result["status"] == "unresolved" and result["answer"] == "Revenue peaked in March."
    assert result["unresolved"]["step"] == 1
    assert result["unresolved"]["error"] == "NameError: name 'orders' is not defined"
    assert result["unresolved"]["message"].startswith("done with an unresolved error in step 1")


@pytest.mark.parametrize("model", ["openai:gpt-test", "anthropic:claude-test"])
async def test_an_asks_plot_reaches_the_model_through_the_broker_and_its_files_are_listed(
    jp_fetch: Fetch, fake: FakeLLM, model: str
) -> None:
    from tests.fakellm_wire import image_parts

    fake.push(code("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\n"
                   "_ = open('out.csv', 'w').write('a\\n1\\n')"), Turn("Plotted and saved."))
    sid = (await new_session(jp_fetch))["id"]
    events = await ask(jp_fetch, sid, prompt="plot and save", model=model)
    assert events[-1][1]["status"] == "done"
    body = fake.requests[1].body
    images = image_parts(body)
    assert len(images) == 1
    data = json.dumps(images[0])
    assert "image/png" in data and "base64" in data
    assert "- out.csv (4 B, text/csv)" in json.dumps(body["messages"])


async def test_a_deprecated_model_answers_with_a_warning_event_and_a_log_line(
    jp_fetch: Fetch, fake: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    fake.push(Turn("Hello."))
    sid = (await new_session(jp_fetch))["id"]
    events = await ask(jp_fetch, sid, prompt="say hello", model="anthropic:claude-sonnet-4-5")
    # Said right after the ask starts, before the model is called.
    assert [name for name, _ in events[:2]] == ["ask_start", "warning"], events
    message = events[1][1]["message"]
    assert "deprecated" in message and "anthropic:claude-sonnet-5-5" in message
    assert events[-1][1]["status"] == "done" and events[-1][1]["answer"] == "Hello."
    assert message in caplog.text
