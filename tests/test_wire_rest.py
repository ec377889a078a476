"""The REST results and bodies as wire classes: one JSON form, read back by the client."""

from __future__ import annotations

import math

import httpx
import pytest

from jupyter_ci.client.formats import (
    SERVER_DEFAULT,
    ServerDefault,
    answer_body,
    execute_body,
    executions_of,
    files_of,
    raise_for,
)
from jupyter_ci.client.results import Execution
from jupyter_ci.server.sessions.errors import SessionError
from jupyter_ci.server.sessions.fields import execute
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.requests import SERVER_TIMEOUT
from jupyter_ci.wire.rest import CellResult, ExecutionOfCells, FileEntry, SessionInfo
from jupyter_ci.wire.rest import Execution as WireExecution
from tests import openapi_check

RUN = WireExecution("error", ({"output_type": "error", "ename": "E", "evalue": "v",
                               "traceback": []},), 3, 12.3456, (FileEntry("a.csv", 4, "text/csv"),))


def test_a_run_is_the_json_the_api_always_sent() -> None:
    assert encode(RUN) == {
        "status": "error", "outputs": [dict(RUN.outputs[0])], "execution_count": 3,
        "duration_ms": 12.3, "files": [{"path": "a.csv", "size": 4, "mime": "text/csv"}],
        "files_cut": False}
    assert list(encode(CellResult(2, RUN)))[:2] == ["index", "status"]
    openapi_check.check_schema("Execution", encode(RUN))
    openapi_check.check_schema("ExecutionOfCells", encode(ExecutionOfCells("ok", (RUN,), 1)))


def test_a_sessions_info_leaves_out_what_does_not_apply() -> None:
    boxed = SessionInfo("s", "k", "python3", "idle", "2026-01-01T00:00:00Z",
                        "2026-01-01T00:00:00Z", 0, True, "python", "/tmp/s")
    assert not {"status_message", "unboxed_reason", "sandbox_unenforced"} & set(encode(boxed))
    unboxed = SessionInfo("s", "k", "python3", "gone", "2026-01-01T00:00:00Z",
                          "2026-01-01T00:00:00Z", 0, False, "python", "/tmp/s", "gateway gone",
                          "", "no pids cgroup")
    said = encode(unboxed)
    assert said["unboxed_reason"] == "" and said["status_message"] == "gateway gone"
    openapi_check.check_schema("Session", said)


def test_the_client_reads_past_what_a_newer_server_adds() -> None:
    newer = {**encode(RUN), "cpu_ms": 5, "files": [{"path": "a", "size": 1, "mime": "x",
                                                     "sha256": "00"}]}
    run = Execution.from_json(newer)
    assert (run.status, run.duration_ms, run.error and run.error.name) == ("error", 12.3, "E")
    assert run.files == [{"path": "a", "size": 1, "mime": "x"}]
    cells = executions_of({"status": "ok", "results": [newer, newer], "skipped": 0, "x": 1})
    assert [c.execution_count for c in cells] == [3, 3]
    assert files_of([{"path": "b", "size": 2, "mime": "y", "owner": "me"}]) == [
        {"path": "b", "size": 2, "mime": "y"}]


def test_a_reply_that_is_not_a_run_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="status"):
        Execution.from_json({"status": "fine"})


def test_an_answer_with_a_field_the_server_does_not_know_is_refused_here() -> None:
    assert encode(answer_body("a1", "edit", code="x = 1")) == {
        "approval_id": "a1", "decision": "edit", "code": "x = 1"}
    with pytest.raises(ValueError, match="cod"):
        answer_body("a1", {"decision": "edit", "cod": "x = 1"})


@pytest.mark.parametrize(("given", "read"), [(SERVER_DEFAULT, SERVER_TIMEOUT), (None, math.inf),
                                             (0, math.inf), (5, 5.0)])
def test_the_clients_execute_body_is_what_the_server_reads(
    given: float | ServerDefault | None, read: float
) -> None:
    body = encode(execute_body(["1", "2"], given, {"A": "1"}))
    request = execute(body, 1000)
    assert (request.cells, request.timeout, request.env) == (("1", "2"), read, {"A": "1"})
    openapi_check.check_schema("Execute", body)


@pytest.mark.parametrize("body", [{"cells": ["1", 2]}, {"cells": []}, {"code": 1},
                                  {"code": "1", "timeout": True}, {"code": "1", "env": {"A": 1}}])
def test_a_bad_execute_body_is_a_400_saying_what_is_expected(body: dict[str, object]) -> None:
    with pytest.raises(SessionError) as refused:
        execute(body, 1000)
    assert refused.value.status == 400


def test_an_error_reply_without_the_servers_words_keeps_the_http_reason() -> None:
    response = httpx.Response(502, content=b"<html>bad gateway</html>",
                              request=httpx.Request("GET", "http://x/"))
    with pytest.raises(Exception, match="Bad Gateway") as raised:
        raise_for(response)
    assert getattr(raised.value, "reason", None) == "error"
