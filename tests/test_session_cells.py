"""Several cells in one execute (`cells`): run in order, back to back, up to the first failure;
each a cell of the session's notebook; streamed with a `cell` and `cell_result` per cell."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from traitlets.config import Config

from jupyter_ci.client import AsyncClient, Client, Execution
from jupyter_ci.server.sessions.fields import MAX_CELLS
from tests import openapi_check
from tests.nbrun import session_server_config
from tests.test_sessions import Fetch, call, new_session, run, stdout


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch) -> Config:
    """The extension with its sessions (no provider: nothing here asks a model)."""
    config: Config = session_server_config(monkeypatch, {})
    config.JupyterCI.max_code_bytes = 1000
    return config


@pytest.fixture
def server(jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
           jp_base_url: str) -> tuple[str, str]:
    """The live server's URL and token (http_server_client makes it listen)."""
    return (f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url}",
            str(jp_serverapp.identity_provider.token))


async def cells(jp_fetch: Fetch, sid: str, *sources: str, **extra: Any) -> dict[str, Any]:
    """POST cells (the reply is checked against the OpenAPI document by `call`)."""
    status, reply = await call(jp_fetch, "POST", sid, "execute",
                               body={"cells": list(sources), **extra})
    assert status == 200, reply
    return dict(reply)


async def test_cells_run_in_order_each_with_its_result_and_notebook_cell(
        jp_fetch: Fetch) -> None:
    sid = (await new_session(jp_fetch))["id"]
    reply = await cells(jp_fetch, sid, "x = 20", "print(x + 1)", "open('a.txt', 'w').write('a')",
                        "x * 2")
    assert reply["status"] == "ok" and reply["skipped"] == 0
    first, printed, wrote, shown = reply["results"]
    assert first["outputs"] == [] and stdout(printed) == "21\n"
    assert wrote["files"] == [{"path": "a.txt", "size": 1, "mime": "text/plain"}]
    assert printed["files"] == [] and shown["files"] == []  # each cell its own changes
    assert shown["outputs"][0]["data"]["text/plain"] == "40"
    counts = [result["execution_count"] for result in reply["results"]]
    assert counts == sorted(counts) and len(set(counts)) == 4
    notebook = (await call(jp_fetch, "GET", sid, "notebook"))[1]
    assert ["".join(c["source"]) for c in notebook["cells"]] == ["x = 20", "print(x + 1)",
                                                   "open('a.txt', 'w').write('a')", "x * 2"]


async def test_the_first_cell_that_fails_stops_the_rest_and_says_how_many_did_not_run(
        jp_fetch: Fetch) -> None:
    sid = (await new_session(jp_fetch))["id"]
    reply = await cells(jp_fetch, sid, "a = 1", "1 / 0", "a = 2", "a = 3")
    assert reply["status"] == "error" and reply["skipped"] == 2
    assert [r["status"] for r in reply["results"]] == ["ok", "error"]
    assert reply["results"][1]["outputs"][-1]["ename"] == "ZeroDivisionError"
    assert stdout(await run(jp_fetch, sid, "print(a)")) == "1\n"  # the later cells never ran
    late = await cells(jp_fetch, sid, "import time\ntime.sleep(30)", "a = 4", timeout=1)
    assert late["status"] == "timeout" and late["skipped"] == 1  # `timeout` is each cell's
    assert stdout(await run(jp_fetch, sid, "print(a)")) == "1\n"


@pytest.mark.parametrize(("body", "status", "says"), [
    ({"code": "x = 1", "cells": ["x = 1"]}, 400, "one of them"),
    ({}, 400, "Give 'code'"),
    ({"cells": []}, 400, "non-empty list of strings"),
    ({"cells": "x = 1"}, 400, "non-empty list of strings"),
    ({"cells": ["x = 1", 2]}, 400, "non-empty list of strings"),
    ({"code": ["x = 1"]}, 400, "'code' (a string)"),
    ({"cells": ["x = 1"] * (MAX_CELLS + 1)}, 413, f"at most {MAX_CELLS}"),
    ({"cells": ["x = 1  # " + "a" * 500] * 2}, 413, "all of them together"),
])
async def test_a_bad_list_of_cells_is_refused_and_nothing_runs(
        jp_fetch: Fetch, body: dict[str, Any], status: int, says: str) -> None:
    sid = (await new_session(jp_fetch))["id"]
    code, reply = await call(jp_fetch, "POST", sid, "execute", body=body)
    assert code == status and says in reply["message"], reply
    assert reply["reason"] == ("code_too_large" if status == 413 else "bad_field")
    assert stdout(await run(jp_fetch, sid, "print('x' in dir())")) == "False\n"


async def test_streamed_cells_say_where_each_cell_begins_and_ends(jp_fetch: Fetch) -> None:
    sid = (await new_session(jp_fetch))["id"]
    events: list[tuple[str, Any]] = []

    def on_chunk(chunk: bytes) -> None:
        for block in chunk.decode().split("\n\n"):
            if block and not block.startswith(":"):
                fields = dict(line.split(": ", 1) for line in block.splitlines())
                events.append((fields["event"], json.loads(fields["data"])))
                openapi_check.check_event(*events[-1])

    await jp_fetch("jupyter-ci", "sessions", sid, "execute", method="POST",
                   body=json.dumps({"cells": ["print('one')", "print('two')", "1/0", "x=1"]}),
                   headers={"Accept": "text/event-stream"}, streaming_callback=on_chunk)
    names = [name for name, _ in events]
    assert names == ["cell", "output", "cell_result", "cell", "output", "cell_result",
                     "cell", "output", "cell_result", "result"], names
    assert [data["index"] for name, data in events if name == "cell"] == [0, 1, 2]
    assert [data.get("text") for name, data in events if name == "output"][:2] == ["one\n", "two\n"]
    assert events[-1][1]["status"] == "error" and events[-1][1]["skipped"] == 1
    assert [r["status"] for r in events[-1][1]["results"]] == ["ok", "ok", "error"]


async def test_both_clients_run_cells_and_stream_their_output(server: tuple[str, str]) -> None:
    url, token = server

    def use() -> tuple[list[Execution], list[Execution], list[str]]:
        seen: list[str] = []
        with Client(url, token) as client, client.session() as py:
            ran = py.execute_cells(["x = 6", "x * 7"])
            streamed = py.execute_cells(["print(x)", "x / 0", "print('never')"],
                                        on_stdout=seen.append)
            return ran, streamed, seen

    ran, streamed, seen = await asyncio.to_thread(use)
    assert [r.status for r in ran] == ["ok", "ok"] and ran[1].text == "42"
    assert [r.status for r in streamed] == ["ok", "error"] and seen == ["6\n"]
    assert streamed[1].error is not None and streamed[1].error["ename"] == "ZeroDivisionError"
    async with AsyncClient(url, token) as client, await client.session() as py:
        got = await py.execute_cells(["y = 2", "y ** 10"], timeout=30)
        assert [r.status for r in got] == ["ok", "ok"] and got[1].text == "1024"


async def test_a_session_kernel_writes_history_in_batches_and_replies_without_a_sleep(
        jp_fetch: Fetch) -> None:
    # Each cell's commit (an fsync) held the lock the next cell's input waits for, and
    # ipykernel slept 0.5 ms before each reply: ~1 ms of a 3-4 ms small cell.
    sid = (await new_session(jp_fetch))["id"]
    await run(jp_fetch, sid, "marker_4711 = 1")
    await asyncio.sleep(0.5)  # IPython's saving thread would have committed it by now
    found = await run(jp_fetch, sid, "import sqlite3\nmanager = get_ipython().history_manager\n"
                      "db = sqlite3.connect(manager.hist_file)\nprint(db.execute(\"select "
                      "count(*) from history where source like '%marker_4711%'\").fetchone()[0],"
                      " manager.db_cache_size, 'marker_4711 = 1' in In, "
                      "get_ipython().kernel._execute_sleep)")
    assert stdout(found) == "0 1000 True 0.0\n"
    printed = await run(jp_fetch, sid, "for i in range(200):\n    print(i, flush=i % 7 == 0)")
    assert stdout(printed) == "".join(f"{i}\n" for i in range(200))  # nothing after the reply lost


async def test_a_client_that_hangs_up_stops_the_cells_not_yet_run(
        jp_fetch: Fetch, server: tuple[str, str]) -> None:
    url, token = server
    sid = (await new_session(jp_fetch))["id"]
    # The first cell swallows the interrupt the hang-up sends: it ends `ok`, and still
    # nothing after it may run, since nobody waits for it any more.
    swallow = ("import time\ntry:\n    time.sleep(2)\nexcept KeyboardInterrupt:\n"
               "    caught = True\n")
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"token {token}"},
                                 timeout=0.5) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.post(f"jupyter-ci/sessions/{sid}/execute",
                            json={"cells": [swallow, "after = True"]})
    await asyncio.sleep(2.5)  # the first cell ends; the second would run now
    seen = await run(jp_fetch, sid, "print('caught' in dir(), 'after' in dir())")
    assert stdout(seen) == "True False\n"
