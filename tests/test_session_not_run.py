"""An execute the kernel did not run is never `ok` (issue 24.14): the kernel's own reply says
so (`aborted` after another request's error, an interrupt that hit before the code ran)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from traitlets.config import Config

from tests.nbrun import session_server_config
from tests.test_sessions import Fetch, call, new_session, run, stdout


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch) -> Config:
    """The extension with its sessions (no provider: nothing here asks a model)."""
    config: Config = session_server_config(monkeypatch, {})
    return config


async def test_an_execute_the_kernel_aborted_says_it_did_not_run(
        jp_fetch: Fetch, jp_serverapp: Any) -> None:
    session = await new_session(jp_fetch)
    # Another client of the same kernel (a notebook open on it, a script) runs code that fails
    # while the session's execute waits in the kernel's queue: the kernel aborts the queue.
    other = BlockingKernelClient()
    other.load_connection_info(
        jp_serverapp.kernel_manager.get_kernel(session["kernel_id"]).get_connection_info())
    other.start_channels()
    try:
        other.execute("import time\ntime.sleep(1.5)\n1 / 0", stop_on_error=True)
        await asyncio.sleep(0.5)  # it runs; the execute below queues behind it
        result = await run(jp_fetch, session["id"], "ran = True\nprint('ran')")
    finally:
        other.stop_channels()
    assert result["status"] == "error", result
    error = result["outputs"][-1]
    assert error["output_type"] == "error" and error["ename"] == "NotRun", error
    assert "did not run" in error["evalue"] and "run it again" in error["evalue"]
    assert stdout(await run(jp_fetch, session["id"], "print('ran' in dir())")) == "False\n"
    notebook = (await call(jp_fetch, "GET", session["id"], "notebook"))[1]
    assert notebook["cells"][0]["outputs"][-1]["ename"] == "NotRun"  # the record says so too


async def test_under_an_interrupt_storm_every_ok_execute_ran(
        jp_fetch: Fetch, jp_serverapp: Any) -> None:
    # Before, an interrupt that hit the kernel's own handling of a request (no reply, or an
    # error reply without an error output) left an `ok` for code that never ran.
    session = await new_session(jp_fetch)
    sid, kernel_id = session["id"], session["kernel_id"]
    await run(jp_fetch, sid, "done = []")
    storming = True

    async def storm() -> None:  # another client pressing Interrupt, over and over
        while storming:
            await jp_serverapp.kernel_manager.interrupt_kernel(kernel_id)
            await asyncio.sleep(0.01)

    stormer = asyncio.ensure_future(storm())
    results = []
    try:
        for i in range(25):
            results.append(await run(jp_fetch, sid, f"done.append({i})"))
    finally:
        storming = False
        await stormer
    said_ok = {i for i, result in enumerate(results) if result["status"] == "ok"}
    assert said_ok, results  # the storm let some through: the check below has work to do
    for result in results:
        assert result["status"] in ("ok", "error", "dead"), result
        if result["status"] == "error":  # each failure says what happened
            assert result["outputs"][-1]["ename"] in ("KeyboardInterrupt", "NotRun",
                                                      "KernelError"), result
    if results[-1]["status"] == "dead":  # a signal can kill it: said so, and nothing to read
        return
    ran = await run(jp_fetch, sid, "print(sorted(set(done)))")
    assert said_ok <= set(json.loads(stdout(ran))), (said_ok, stdout(ran))
