"""Approval of a REST ask's steps: waiting_for_user events answered through POST .../approvals.

A real Jupyter server (pytest-jupyter), real kernels, the real OpenAI SDK against the fake
model server; the ask's stream is read as it comes (httpx), and each question answered with
a call, as a client of the API would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from traitlets.config import Config

from jupyter_ci.client.formats import aevents
from jupyter_ci.server.sessions.approvals import (
    ApprovalAnswered,
    Approvals,
    NotYourApproval,
    Pending,
    UnknownApproval,
)
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.events import WaitingForUser
from tests import openapi_check
from tests.fakellm import FakeLLM, Turn
from tests.nbrun import TEST_KEY, session_server_config

Event = tuple[str, dict[str, Any]]
#: Writes a file (so the test sees whether it ran) and sets a variable in the kernel.
STEP = "x = 6 * 7\nopen('ran.txt', 'w').write(str(x))\nprint('ran', x)"


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM) -> Config:
    """The extension, with OpenAI pointing at the fake model server."""
    return session_server_config(monkeypatch, {"OPENAI_API_KEY": TEST_KEY,
                                               "OPENAI_BASE_URL": fake.openai_base_url})


@pytest.fixture
def api(jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
        jp_base_url: str) -> httpx.AsyncClient:
    """An httpx client of the live server, with its token (its pool ends with the server)."""
    token = str(jp_serverapp.identity_provider.token)
    url = f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url}"
    return httpx.AsyncClient(base_url=url, timeout=120,
                             headers={"Authorization": f"token {token}"})


def code(src: str, text: str = "") -> Turn:
    return Turn(text, tool_calls=[("run_python", {"code": src})])


async def checked(response: httpx.Response) -> Any:
    """Hold a reply to the OpenAPI document; return its JSON."""
    openapi_check.check(response.request.method, str(response.request.url),
                        response.status_code, response.headers.get("content-type", ""),
                        response.content)
    return response.json() if response.content else None


async def new_session(api: httpx.AsyncClient) -> dict[str, Any]:
    response = await api.post("jupyter-ci/sessions", json={})
    assert response.status_code == 201, response.text
    return dict(response.json())


async def answer(api: httpx.AsyncClient, sid: str, **body: Any) -> tuple[int, Any]:
    response = await api.post(f"jupyter-ci/sessions/{sid}/approvals", json=body)
    return response.status_code, await checked(response)


async def run(api: httpx.AsyncClient, sid: str, src: str) -> str:
    """Run code in the session; return what it printed."""
    response = await api.post(f"jupyter-ci/sessions/{sid}/execute", json={"code": src})
    assert response.status_code == 200, response.text
    return "".join(o.get("text", "") for o in response.json()["outputs"]
                   if o["output_type"] == "stream")


OnQuestion = Callable[[dict[str, Any]], Awaitable[None]]


async def ask(api: httpx.AsyncClient, sid: str, on_question: OnQuestion, **body: Any
              ) -> list[Event]:
    """Stream an ask, calling `on_question` at each question; return its events."""
    events: list[Event] = []
    async with api.stream("POST", f"jupyter-ci/sessions/{sid}/ask", json=body,
                          headers={"Accept": "text/event-stream"}) as response:
        assert response.status_code == 200
        async for name, data in aevents(response.aiter_lines()):
            events.append((name, data))
            if name == "waiting_for_user":
                openapi_check.check_event(name, data, route="ask")
                await on_question(data)
    # The end is one event, its result; `result` repeats it (a deprecated alias).
    assert [name for name, _ in events[-2:]] == ["ask_end", "result"], events[-2:]
    assert events[-1][1] == events[-2][1]
    openapi_check.check_event("ask_end", events[-2][1], route="ask")
    openapi_check.check_schema("AskResult", events[-1][1])
    return events


def named(events: list[Event], name: str) -> list[dict[str, Any]]:
    return [data for kind, data in events if kind == name]


async def test_an_each_ask_waits_until_approved_through_the_api_then_runs(
    api: httpx.AsyncClient, fake: FakeLLM
) -> None:
    fake.push(code(STEP, "Computing."), Turn("x is 42."))
    info = await new_session(api)
    sid, cwd = info["id"], Path(info["cwd"])
    seen: dict[str, Any] = {}

    async def approve(event: dict[str, Any]) -> None:
        # Waiting: nothing ran, and the question waits in the listing too.
        seen["ran_before"] = (cwd / "ran.txt").exists()
        listed = await api.get(f"jupyter-ci/sessions/{sid}/approvals")
        seen["listed"] = await checked(listed)
        await asyncio.sleep(0.5)  # still waiting
        seen["ran_later"] = (cwd / "ran.txt").exists()
        seen["answer"] = await answer(api, sid, approval_id=event["approval_id"],
                                      decision="run")
        seen["again"] = await answer(api, sid, approval_id=event["approval_id"],
                                     decision="run")

    events = await ask(api, sid, approve, prompt="compute x", approve="each")
    kinds = [kind for kind, _ in events]
    # A question is one event, with the id to answer it by.
    assert kinds.count("waiting_for_user") == 1
    assert kinds.index("waiting_for_user") < kinds.index("step_start")
    question = named(events, "waiting_for_user")[0]
    assert question["kind"] == "step" and question["step"] == 1 and question["code"] == STEP
    assert question["question"].startswith("jupyter-ci: ")
    assert question["ask_id"] == named(events, "ask_start")[0]["ask_id"]
    assert seen["ran_before"] is False and seen["ran_later"] is False
    assert [q["approval_id"] for q in seen["listed"]] == [question["approval_id"]]
    assert seen["answer"][0] == 200 and seen["answer"][1]["decision"] == "run"
    assert seen["again"][0] == 409 and seen["again"][1]["reason"] == "approval_answered"
    result = events[-1][1]
    assert result["status"] == "done" and result["answer"] == "x is 42."
    assert result["approvals"] == [{"approval_id": question["approval_id"], "kind": "step",
                                    "step": 1, "decision": "run"}]
    assert (cwd / "ran.txt").read_text() == "42"
    assert await run(api, sid, "print(x)") == "42\n"  # it ran in the session's kernel
    # Nothing waits any more: the id is told apart from one never asked.
    assert (await api.get(f"jupyter-ci/sessions/{sid}/approvals")).json() == []


async def test_an_edited_step_runs_the_edit_and_the_model_is_told(
    api: httpx.AsyncClient, fake: FakeLLM
) -> None:
    fake.push(code("x = 1\nprint('original', x)"), Turn("Done."))
    sid = (await new_session(api))["id"]
    edited = "x = 2\nprint('edited', x)"

    async def edit(event: dict[str, Any]) -> None:
        status, reply = await answer(api, sid, approval_id=event["approval_id"],
                                     decision="edit", code=edited)
        assert status == 200 and reply["code"] == edited

    events = await ask(api, sid, edit, prompt="set x", approve="each")
    assert [s["code"] for s in named(events, "step_start")] == [edited]
    printed = [d["output"].get("text") for d in named(events, "output")]
    assert printed == ["edited 2\n"]
    result = events[-1][1]
    assert result["status"] == "done"
    assert result["approvals"][0]["decision"] == "edit"
    assert result["approvals"][0]["code"] == edited
    told = json.dumps(fake.requests[-1].messages)
    assert "edited 2" in told and "x = 2" in told  # the model saw what really ran
    assert await run(api, sid, "print(x)") == "2\n"


async def test_a_skipped_step_does_not_run_and_the_model_is_told(
    api: httpx.AsyncClient, fake: FakeLLM
) -> None:
    fake.push(code(STEP), Turn("Skipped it."))
    info = await new_session(api)
    sid = info["id"]

    async def skip(event: dict[str, Any]) -> None:
        assert (await answer(api, sid, approval_id=event["approval_id"],
                             decision="skip"))[0] == 200

    events = await ask(api, sid, skip, prompt="compute x", approve="each")
    assert named(events, "step_start") == []
    result = events[-1][1]
    assert result["status"] == "done" and result["approvals"][0]["decision"] == "skip"
    assert "skip" in json.dumps(fake.requests[-1].messages).lower()
    assert not (Path(info["cwd"]) / "ran.txt").exists()
    assert await run(api, sid, "print('x' in globals())") == "False\n"


async def test_stop_ends_the_ask_as_stopped_with_nothing_run(
    api: httpx.AsyncClient, fake: FakeLLM
) -> None:
    fake.push(code(STEP), Turn("never reached"))
    info = await new_session(api)
    sid = info["id"]

    async def stop(event: dict[str, Any]) -> None:
        assert (await answer(api, sid, approval_id=event["approval_id"],
                             decision="stop"))[0] == 200

    events = await ask(api, sid, stop, prompt="compute x", approve="first")
    result = events[-1][1]
    assert result["status"] == "stopped" and result["error"]["type"] == "AskStopped"
    assert "stopped" in result["error"]["message"]
    assert named(events, "step_start") == [] and fake.calls() == 1
    assert not (Path(info["cwd"]) / "ran.txt").exists()
    # The session is free again: its lock was let go.
    assert await run(api, sid, "print('x' in globals())") == "False\n"


async def test_bad_answers_are_400_and_unknown_approvals_404(
    api: httpx.AsyncClient, fake: FakeLLM
) -> None:
    fake.push(code(STEP), Turn("Done."))
    sid = (await new_session(api))["id"]
    replies: list[tuple[int, Any]] = []

    async def misanswer(event: dict[str, Any]) -> None:
        waiting = event["approval_id"]
        for body in ({"approval_id": waiting, "decision": "maybe"},
                     {"approval_id": waiting, "decision": "edit"},
                     {"approval_id": waiting, "decision": "edit", "code": "  "},
                     {"approval_id": waiting, "decision": "run", "code": 5},
                     {"approval_id": waiting, "decision": "run", "colour": "red"},
                     {"decision": "run"},
                     {"approval_id": "not-an-id", "decision": "run"}):
            replies.append(await answer(api, sid, **body))
        replies.append(await answer(api, sid, approval_id=waiting, decision="run"))

    events = await ask(api, sid, misanswer, prompt="compute x", approve="each")
    statuses = [status for status, _ in replies]
    assert statuses == [400, 400, 400, 400, 400, 400, 404, 200], replies
    assert "run, edit, skip, stop" in replies[0][1]["message"]
    assert "'code'" in replies[1][1]["message"]
    assert replies[4][1]["reason"] == "unknown_field"
    assert replies[6][1]["reason"] == "unknown_approval"
    assert events[-1][1]["status"] == "done"
    # A session that does not exist: 404 as for any of its routes.
    missing = await answer(api, "no-such-session", approval_id="x", decision="run")
    assert missing[0] == 404 and missing[1]["reason"] == "unknown_session"


@pytest.mark.parametrize("approve", ["sometimes", 1, ""])
async def test_a_bad_approve_field_is_a_400_before_the_model_is_called(
    api: httpx.AsyncClient, fake: FakeLLM, approve: Any
) -> None:
    sid = (await new_session(api))["id"]
    response = await api.post(f"jupyter-ci/sessions/{sid}/ask",
                              json={"prompt": "x", "approve": approve})
    reply = await checked(response)
    assert response.status_code == 400 and "never, first, plan, each" in reply["message"]
    assert fake.calls() == 0


async def test_no_answer_in_time_stops_the_ask_saying_so(
    api: httpx.AsyncClient, fake: FakeLLM, jp_serverapp: Any
) -> None:
    jp_serverapp.web_app.settings["jupyter_ci"].approval_timeout = 1.0
    fake.push(code(STEP), Turn("never reached"))
    info = await new_session(api)

    async def ignore(event: dict[str, Any]) -> None:
        return None

    events = await ask(api, info["id"], ignore, prompt="compute x", approve="each")
    result = events[-1][1]
    assert result["status"] == "stopped"
    assert result["error"]["type"] == "ApprovalTimedOut"
    assert "No answer came" in result["error"]["message"]
    assert "approval_timeout" in result["error"]["message"]
    assert result["approvals"][0]["decision"] == "timeout"
    assert not (Path(info["cwd"]) / "ran.txt").exists()
    late = await answer(api, info["id"], approval_id=result["approvals"][0]["approval_id"],
                        decision="run")
    assert late[0] == 409


async def test_the_servers_minimum_is_not_lowered_by_the_body(
    api: httpx.AsyncClient, fake: FakeLLM, jp_serverapp: Any
) -> None:
    jp_serverapp.web_app.settings["jupyter_ci"].approval_minimum = "each"
    fake.push(code("a = 1"), code("b = 2"), Turn("Both ran."))
    sid = (await new_session(api))["id"]

    async def approve(event: dict[str, Any]) -> None:
        assert (await answer(api, sid, approval_id=event["approval_id"],
                             decision="run"))[0] == 200

    events = await ask(api, sid, approve, prompt="two steps", approve="never")
    assert [q["step"] for q in named(events, "waiting_for_user")] == [1, 2]
    assert events[-1][1]["status"] == "done"


async def test_code_in_the_sessions_kernel_cannot_lower_the_servers_minimum(
    api: httpx.AsyncClient, fake: FakeLLM, jp_serverapp: Any
) -> None:
    # What the README says enforces approval_minimum for REST asks: the server, not the
    # kernel. An approved step that removes the minimum from its kernel (as it could in a
    # notebook's kernel) changes nothing for the next step, nor for the next ask.
    jp_serverapp.web_app.settings["jupyter_ci"].approval_minimum = "each"
    lower = ("import os\nos.environ.pop('JUPYTER_CI_APPROVAL_MINIMUM', None)\n"
             "os.environ['JUPYTER_CI_APPROVAL'] = 'never'")
    fake.push(code(lower), code("b = 2"), Turn("Both ran."), code("c = 3"), Turn("Ran."))
    sid = (await new_session(api))["id"]

    async def approve(event: dict[str, Any]) -> None:
        assert (await answer(api, sid, approval_id=event["approval_id"],
                             decision="run"))[0] == 200

    first = await ask(api, sid, approve, prompt="two steps", approve="never")
    assert [q["step"] for q in named(first, "waiting_for_user")] == [1, 2]
    second = await ask(api, sid, approve, prompt="one more", approve="never")
    assert [q["step"] for q in named(second, "waiting_for_user")] == [1]
    assert second[-1][1]["status"] == "done"


async def test_an_ask_not_read_as_a_stream_is_approved_from_another_connection(
    api: httpx.AsyncClient, fake: FakeLLM
) -> None:
    fake.push(code(STEP), Turn("Approved elsewhere."))
    sid = (await new_session(api))["id"]
    # This request reads nothing until the whole reply has come.
    whole = asyncio.ensure_future(api.post(f"jupyter-ci/sessions/{sid}/ask",
                                           json={"prompt": "compute x", "approve": "each"}))
    waiting: list[dict[str, Any]] = []
    for _ in range(200):
        waiting = (await api.get(f"jupyter-ci/sessions/{sid}/approvals")).json()
        if waiting:
            break
        await asyncio.sleep(0.05)
    assert len(waiting) == 1 and waiting[0]["code"] == STEP
    async with httpx.AsyncClient(base_url=str(api.base_url), headers=api.headers) as other:
        reply = await other.post(f"jupyter-ci/sessions/{sid}/approvals",
                                 json={"approval_id": waiting[0]["approval_id"],
                                       "decision": "run"})
    assert reply.status_code == 200
    response = await whole
    last = response.text.strip().split("\n\n")[-1]
    assert last.startswith("event: result") and '"status": "done"' in last


@pytest.mark.parametrize("how", ["delete", "hang_up"])
async def test_deleting_the_session_or_hanging_up_ends_a_waiting_ask_cleanly(
    api: httpx.AsyncClient, fake: FakeLLM, jp_serverapp: Any, how: str
) -> None:
    fake.push(code(STEP), Turn("never reached"))
    info = await new_session(api)
    sid = info["id"]
    session = jp_serverapp.web_app.settings["jupyter_ci_sessions"].sessions[sid]
    async with api.stream("POST", f"jupyter-ci/sessions/{sid}/ask",
                          json={"prompt": "compute x", "approve": "each"},
                          headers={"Accept": "text/event-stream"}) as response:
        async for name, data in aevents(response.aiter_lines()):
            if name == "waiting_for_user":
                question = data
                break
        assert len(session.approvals.pending) == 1
        if how == "delete":
            assert (await api.delete(f"jupyter-ci/sessions/{sid}")).status_code == 204
    for _ in range(100):  # the hang-up reaches the server a moment later
        if not session.tasks and not session.approvals.pending:
            break
        await asyncio.sleep(0.05)
    assert session.tasks == set() and session.approvals.pending == {}
    assert not (Path(info["cwd"]) / "ran.txt").exists()
    status, reply = await answer(api, sid, approval_id=question["approval_id"],
                                 decision="run")
    if how == "delete":
        assert status == 404 and reply["reason"] == "unknown_session"
    else:
        assert status == 404 and reply["reason"] == "unknown_approval"
        assert not session.lock.locked()
        assert await run(api, sid, "print('x' in globals())") == "False\n"


async def test_only_the_user_who_asked_answers_and_twice_is_a_409() -> None:
    approvals = Approvals()
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    event = WaitingForUser("", kind="step", approval_id="a1", ask_id="k")
    approvals.pending["a1"] = Pending("a1", "k", "alice", event, future)
    with pytest.raises(NotYourApproval):
        approvals.answer("mallory", {"approval_id": "a1", "decision": "run"})
    assert not future.done()
    assert encode(approvals.answer("alice", {"approval_id": "a1", "decision": "skip"})) == {
        "approval_id": "a1", "ask_id": "k", "decision": "skip"}
    assert json.loads(future.result()) == {"decision": "skip"}
    with pytest.raises(ApprovalAnswered):
        approvals.answer("alice", {"approval_id": "a1", "decision": "run"})
    with pytest.raises(UnknownApproval):
        approvals.answer("alice", {"approval_id": "a2", "decision": "run"})


async def test_a_plan_waits_is_edited_through_the_api_then_runs_unasked(
    api: httpx.AsyncClient, fake: FakeLLM
) -> None:
    fake.push(Turn("1. Compute x\n2. Print it"), code(STEP), Turn("x is 42."))
    sid = (await new_session(api))["id"]
    edited = "1. Compute x as 6 * 7\n2. Print it"
    replies: list[tuple[int, Any]] = []

    async def edit_plan(event: dict[str, Any]) -> None:
        replies.append(await answer(api, sid, approval_id=event["approval_id"],
                                    decision="skip"))
        replies.append(await answer(api, sid, approval_id=event["approval_id"],
                                    decision="edit", code="not a plan field"))
        replies.append(await answer(api, sid, approval_id=event["approval_id"],
                                    decision="edit", plan=edited))

    events = await ask(api, sid, edit_plan, prompt="compute x", approve="plan")
    assert [status for status, _ in replies] == [400, 400, 200], replies
    assert "not skipped" in replies[0][1]["message"]
    [question] = named(events, "waiting_for_user")  # the plan only: then it runs on
    assert question["kind"] == "plan" and question["plan"].startswith("1. Compute x")
    result = events[-1][1]
    assert result["status"] == "done" and result["approvals"][0]["plan"] == edited
    assert [s["code"] for s in named(events, "step_start")] == [STEP]
    assert "edited and approved this plan" in json.dumps(fake.requests[1].messages)
    assert "6 * 7" in json.dumps(fake.requests[1].messages)


async def test_the_approvals_route_needs_jupyters_authentication(
    api: httpx.AsyncClient,
) -> None:
    sid = (await new_session(api))["id"]
    async with httpx.AsyncClient(base_url=str(api.base_url)) as stranger:
        for method in ("GET", "POST"):
            refused = await stranger.request(method, f"jupyter-ci/sessions/{sid}/approvals",
                                             json={"approval_id": "a", "decision": "run"})
            assert refused.status_code == 403, refused.text
            assert refused.json()["reason"] == "invalid_token"
