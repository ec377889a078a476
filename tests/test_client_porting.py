"""What someone moving off a hosted interpreter reaches for first, against a real server.

Reconnecting by id, timeouts that neither cut a quiet run nor leave one running after the
client gave up, async parity, per-run environment variables, and results read as E2B's.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_ci.client import (
    AsyncClient,
    Client,
    ClientTimeout,
    CodeInterpreterError,
    Execution,
    SessionNotFound,
)
from jupyter_ci.client.formats import tool_result

SLEEP = "import time\ntime.sleep({})\n'slept'"


@pytest.fixture
def jp_server_config() -> Config:
    return Config({"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
                   "JupyterCI": {"session_pool": 0}})


@pytest.fixture
def server(jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
           jp_base_url: str) -> tuple[str, str]:
    """The live server's URL and token (http_server_client makes it listen)."""
    return (f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url}",
            str(jp_serverapp.identity_provider.token))


async def test_a_second_client_reconnects_by_id_and_an_ended_session_says_why(
    server: tuple[str, str], jp_serverapp: Any
) -> None:
    url, token = server
    first = Client(url, token)
    made = await asyncio.to_thread(first.session)
    await asyncio.to_thread(made.execute, "x = 41")

    def reconnect() -> tuple[str, str | None, str]:
        with Client(url, token) as second:
            again = second.session(made.id)
            where = again.execute("import os\nos.getcwd()").text
            return again.execute("x + 1").text, again.cwd, where

    value, cwd, where = await asyncio.to_thread(reconnect)
    assert value == "42" and cwd == made.cwd and where == repr(cwd)
    async with AsyncClient(url, token) as other:
        attached = await other.session(made.id)
        assert (await attached.execute("x")).text == "41"
        with pytest.raises(SessionNotFound) as unknown:
            await other.session("no-such-session")
        assert unknown.value.status == 404 and "never existed" in unknown.value.message
        await attached.delete()
        with pytest.raises(SessionNotFound) as deleted:
            await other.session(made.id)
        assert "was deleted" in deleted.value.message
        # Culled when idle: the message says so.
        idle = await other.session()
        manager = jp_serverapp.web_app.settings["jupyter_ci_sessions"]
        manager.get(idle.id).last_activity -= 10**6
        await manager.cull()
        with pytest.raises(SessionNotFound) as culled:
            await asyncio.to_thread(first.session, idle.id)
        assert "culled after 3600 s idle" in culled.value.message
    first.close()


async def test_a_runs_timeout_outlasts_the_clients_default_and_none_means_no_deadline(
    server: tuple[str, str], jp_serverapp: Any
) -> None:
    url, token = server
    jp_serverapp.web_app.settings["jupyter_ci"].timeout = 1.5  # the server's default here

    def use() -> list[Execution]:
        # A client default of 2 s stands for httpx's usual 5 s against a 90 s quiet run.
        with Client(url, token, timeout=2) as client, client.session() as py:
            return [py.execute(SLEEP.format(4), timeout=10),
                    py.execute(SLEEP.format(3), timeout=None),
                    py.execute(SLEEP.format(3), timeout=0, on_stdout=print),
                    py.execute(SLEEP.format(3))]

    quiet, unbounded, streamed, defaulted = await asyncio.to_thread(use)
    assert (quiet.status, quiet.text) == ("ok", "'slept'")
    assert (unbounded.status, unbounded.text) == ("ok", "'slept'")
    assert streamed.status == "ok"
    assert defaulted.status == "timeout"  # no timeout given: the server's 1.5 s
    async with AsyncClient(url, token, timeout=2) as client, await client.session() as py:
        run = await py.execute(SLEEP.format(4), timeout=10)
        assert run.text == "'slept'"
        assert (await py.execute(SLEEP.format(3), timeout=None)).status == "ok"


async def test_a_client_that_gives_up_interrupts_its_run_and_the_next_call_is_at_once(
    server: tuple[str, str],
) -> None:
    url, token = server

    def use() -> dict[str, Any]:
        took = {}
        with Client(url, token, timeout=1.5) as impatient, impatient.session() as py:
            py.execute("kept = 7")
            for name, callbacks in (("plain", {}), ("streamed", {"on_stdout": print})):
                with pytest.raises(ClientTimeout):
                    py.execute("import time\nprint('go', flush=True)\ntime.sleep(30)",
                               **callbacks)
                started = time.monotonic()
                took[name] = (py.execute("kept").text, time.monotonic() - started)
            took["history"] = py.notebook()
        return took

    took = await asyncio.to_thread(use)
    for name in ("plain", "streamed"):
        value, seconds = took[name]
        # Had it waited for the run it gave up on, it would have waited ~28 s more.
        assert value == "7" and seconds < 15, f"{name}: the next call waited {seconds:.1f} s"
    errors = [o["ename"] for c in took["history"]["cells"] for o in c.get("outputs", [])
              if o["output_type"] == "error"]
    assert errors == ["KeyboardInterrupt"] * 2


async def test_an_async_client_that_gives_up_or_is_cancelled_interrupts_its_run(
    server: tuple[str, str],
) -> None:
    url, token = server
    async with AsyncClient(url, token, timeout=1.5) as client, await client.session() as py:
        await py.execute("kept = 7")
        with pytest.raises(ClientTimeout):
            await py.execute(SLEEP.format(30))
        started = time.monotonic()
        assert (await py.execute("kept")).text == "7"
        assert time.monotonic() - started < 5
        for callbacks in ({}, {"on_stdout": print}):
            task = asyncio.ensure_future(py.execute(SLEEP.format(30), timeout=60, **callbacks))
            await asyncio.sleep(1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            started = time.monotonic()
            assert (await py.execute("kept")).text == "7"
            assert time.monotonic() - started < 5, "the next call waited behind the run"


PRESS_CTRL_C = """
import sys
from jupyter_ci.client import Client
with Client(sys.argv[1], sys.argv[2]) as client:
    py = client.session(sys.argv[3])
    print("go", flush=True)
    py.execute("import time\\ntime.sleep(30)")
"""


async def test_ctrl_c_in_a_sync_client_interrupts_its_run(server: tuple[str, str]) -> None:
    url, token = server
    async with AsyncClient(url, token) as client, await client.session() as py:
        await py.execute("kept = 7")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", PRESS_CTRL_C, url, token, py.id,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert proc.stdout is not None
        assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"go\n"
        await asyncio.sleep(1.5)  # the run is under way
        proc.send_signal(2)  # SIGINT, as Ctrl-C sends it
        _, err = await asyncio.wait_for(proc.communicate(), 10)
        assert b"KeyboardInterrupt" in err
        started = time.monotonic()
        assert (await py.execute("kept")).text == "7"
        assert time.monotonic() - started < 5, "the next call waited behind the run"


ENV_REPORT = "import os, subprocess\n" \
    "(os.environ.get('RUN_ONLY'), os.environ.get('KEPT'), " \
    "subprocess.run(['printenv', 'RUN_ONLY'], capture_output=True, text=True).stdout)"


async def test_envs_hold_for_one_run_and_are_restored_after_errors_and_timeouts(
    server: tuple[str, str],
) -> None:
    url, token = server
    envs = {"RUN_ONLY": "yes 'quoted'\n{}", "KEPT": "run"}

    def use() -> dict[str, Any]:
        with Client(url, token) as client, client.session(env={"KEPT": "session"}) as py:
            seen = {"during": py.execute(ENV_REPORT, envs=envs).text,
                    "after": py.execute(ENV_REPORT).text}
            failed = py.execute("import os\nraise ValueError(os.environ['KEPT'])", envs=envs)
            seen["failed"] = (failed.error.value if failed.error else None)
            seen["after_error"] = py.execute(ENV_REPORT).text
            cut = py.execute("import time\ntime.sleep(30)", envs=envs, timeout=1)
            seen["cut"] = cut.status
            seen["after_timeout"] = py.execute(ENV_REPORT).text
            seen["counts"] = [py.execute("1", envs={"SECRET": "s3cr3t"}).execution_count,
                              py.execute("1").execution_count]
            seen["notebook"] = json.dumps(py.notebook())
            with pytest.raises(CodeInterpreterError) as refused:
                py.execute("1", envs={"JUPYTER_CI_BROKER_TOKEN": "mine"})
            seen["refused"] = (refused.value.status, refused.value.message)
        return seen

    seen = await asyncio.to_thread(use)
    assert seen["during"] == repr(("yes 'quoted'\n{}", "run", "yes 'quoted'\n{}\n"))
    restored = repr((None, "session", ""))
    assert seen["after"] == seen["after_error"] == seen["after_timeout"] == restored
    assert seen["failed"] == "run" and seen["cut"] == "timeout"
    assert seen["counts"][1] == seen["counts"][0] + 1  # the set-up and put-back are silent
    assert "s3cr3t" not in seen["notebook"]  # the set-up is not in the session's record
    assert seen["refused"][0] == 400 and "JUPYTER_CI_BROKER_TOKEN" in seen["refused"][1]
    async with AsyncClient(url, token) as client, await client.session() as py:
        during = await py.execute("import os\nos.environ['RUN_ONLY']", envs={"RUN_ONLY": "a"})
        after = await py.execute("import os\n'RUN_ONLY' in os.environ")
        assert (during.text, after.text) == ("'a'", "False")


SHOWS = """
import sys
from IPython.display import HTML, JSON, Image, display
print('out')
print('err', file=sys.stderr)
display(HTML('<b>hi</b>'))
display(JSON({'a': 1}))
display(Image(data=b'\\x89PNG\\r\\n\\x1a\\nfake', format='png'))
1
"""


async def test_an_execution_reads_as_e2bs_and_the_model_still_gets_its_summary(
    server: tuple[str, str],
) -> None:
    url, token = server
    async with AsyncClient(url, token) as client, await client.session() as py:
        run = await py.execute(SHOWS)
        failed = await py.execute("1 / 0")
    assert run.text == "1" and "Out: 1" in run.summary
    assert run.logs.stdout == ["out\n"] and run.logs.stderr == ["err\n"]
    html, data, image, main = run.results
    assert html.html == "<b>hi</b>" and not html.is_main_result
    assert data.json == {"a": 1} and "application/json" in data.formats()
    assert image.png == "iVBORw0KGgpmYWtl" and image.text is not None
    assert main.is_main_result and main.text == "1" and main.data["text/plain"] == "1"
    assert Execution.from_json(run.to_json()) == run
    assert json.loads(run.to_json())["status"] == "ok"
    assert failed.error is not None and failed.error.name == "ZeroDivisionError"
    assert failed.error.value == "division by zero" and failed.error["ename"] == failed.error.name
    assert "ZeroDivisionError" in failed.error.traceback and "\x1b[" not in failed.error.traceback
    assert "ZeroDivisionError" in failed.text  # no value to show: the summary
    # A model is given the summary, as before.
    message = tool_result("openai", "call_1", run)[0]
    assert "Out: 1" in message["content"] and "out" in message["content"]


async def test_the_async_client_does_all_the_sync_one_does(server: tuple[str, str]) -> None:
    url, token = server
    heard: list[str] = []

    async def on_stdout(text: str) -> None:
        await asyncio.sleep(0)  # a real coroutine: it only counts if it is awaited
        heard.append(text)

    async with AsyncClient(url, token) as client:
        py = await client.session()
        assert [s["id"] for s in await client.sessions()] == [py.id]
        assert (await py.upload("a.txt", b"x"))["path"] == "a.txt"
        assert [f["path"] for f in await py.files()] == ["a.txt"]
        await py.remove("a.txt")
        assert await py.files() == []
        await py.execute("y = 1\nprint('live', flush=True)", on_stdout=on_stdout)
        assert heard == ["live\n"]
        assert (await py.refresh())["executions"] == 1
        await py.restart()
        assert (await py.execute("y")).error is not None
        cells = (await py.notebook())["cells"]
        assert [c["source"] for c in cells] == ["y"]  # a restart starts the history afresh
        await py.delete()
        assert await client.sessions() == []
