"""The Python client's approval: `on_approval` callbacks, `approve()`, and a clear error when
a question is left unanswered (a real server, real kernels, the fake model server)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_ci.client import ApprovalRequired, AsyncClient, Client
from tests.fakellm import FakeLLM, Turn
from tests.nbrun import TEST_KEY, session_server_config


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM) -> Config:
    """The extension, with OpenAI pointing at the fake model server."""
    return session_server_config(monkeypatch, {"OPENAI_API_KEY": TEST_KEY,
                                               "OPENAI_BASE_URL": fake.openai_base_url})


@pytest.fixture
def server(jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
           jp_base_url: str) -> tuple[str, str]:
    """The live server's URL and token (http_server_client makes it listen)."""
    return (f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url}",
            str(jp_serverapp.identity_provider.token))


def code(src: str) -> Turn:
    return Turn(tool_calls=[("run_python", {"code": src})])


async def test_the_sync_clients_callback_runs_edits_and_skips_steps(
    server: tuple[str, str], fake: FakeLLM
) -> None:
    url, token = server
    fake.push(code("a = 1\nprint('a', a)"), code("b = 2"), code("c = 3"), Turn("Done."))
    answers = iter(["run", {"decision": "edit", "code": "b = 20\nprint('b', b)"}, "skip"])
    asked: list[dict[str, Any]] = []

    def on_approval(event: dict[str, Any]) -> Any:
        asked.append(event)
        return next(answers)

    def use() -> tuple[list[tuple[str, dict[str, Any]]], str]:
        with Client(url, token) as client, client.session() as py:
            events = list(py.ask("three steps", approve="each", on_approval=on_approval))
            return events, py.execute("print(a, b, 'c' in globals())").text

    events, state = await asyncio.to_thread(use)
    assert [e["step"] for e in asked] == [1, 2, 3]
    assert [e["code"] for e in asked] == ["a = 1\nprint('a', a)", "b = 2", "c = 3"]
    result = events[-1][1]
    assert result["status"] == "done"
    assert [a["decision"] for a in result["approvals"]] == ["run", "edit", "skip"]
    assert state.strip() == "1 20 False"
    assert "b = 20" in json.dumps(fake.requests[-1].messages)


async def test_the_async_client_awaits_its_callback_and_stop_stops(
    server: tuple[str, str], fake: FakeLLM
) -> None:
    url, token = server
    fake.push(code("x = 1"), Turn("never reached"))

    async def on_approval(event: dict[str, Any]) -> str:
        await asyncio.sleep(0.1)
        return "stop"

    async with AsyncClient(url, token) as client, await client.session() as py:
        events = [e async for e in py.ask("x", approve="first", on_approval=on_approval)]
        assert events[-1][1]["status"] == "stopped"
        assert (await py.execute("'x' in globals()")).text == "False"


async def test_without_a_callback_the_caller_answers_with_approve_or_gets_a_clear_error(
    server: tuple[str, str], fake: FakeLLM
) -> None:
    url, token = server
    fake.push(code("x = 1"), Turn("Ran it."), code("y = 2"), Turn("never reached"))

    def use() -> tuple[str, str, str]:
        with Client(url, token) as client, client.session() as py:
            status = ""
            for event, data in py.ask("x", approve="each"):
                if event == "waiting_for_user":
                    assert py.approvals()[0]["approval_id"] == data["approval_id"]
                    py.approve(data["approval_id"], "run")
                if event == "ask_end":
                    status = data["status"]
            with pytest.raises(ApprovalRequired) as raised:
                for _ in py.ask("y", approve="each"):
                    pass
            # The hang-up stopped that ask on the server: the session is free again.
            return status, str(raised.value), py.execute("print('y' in globals())").text

    status, message, y_defined = await asyncio.to_thread(use)
    assert status == "done"
    assert "on_approval" in message and "approve(" in message
    assert y_defined.strip() == "False"


async def test_a_callback_answer_that_is_no_decision_is_refused(
    server: tuple[str, str], fake: FakeLLM
) -> None:
    url, token = server
    fake.push(code("x = 1"), Turn("never reached"))
    async with AsyncClient(url, token) as client, await client.session() as py:
        with pytest.raises(ValueError, match="run, edit, skip, stop"):
            async for _ in py.ask("x", approve="each", on_approval=lambda e: "yes please"):
                pass
