"""REST sessions under faults: a run deaf to SIGINT, a restart racing a delete."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_ci.server.sessions import executor
from tests.test_sessions import call, new_session, run

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
DEAF = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n"


@pytest.fixture
def ci_config() -> dict[str, Any]:
    return {"session_pool": 0, "session_sandbox": "never"}


@pytest.fixture
def jp_server_config(ci_config: dict[str, Any]) -> Config:
    return Config({"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
                   "JupyterCI": ci_config})


@pytest.fixture
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wait 2 s, not 10, for an interrupted run to stop."""
    monkeypatch.setattr(executor, "INTERRUPT_GRACE_S", 2.0)


async def test_a_run_deaf_to_sigint_restarts_the_kernel_and_the_session_goes_on(
    jp_fetch: Any, short_grace: None
) -> None:
    session = await new_session(jp_fetch)
    await run(jp_fetch, session["id"], "kept = 1")
    started = time.monotonic()
    result = await run(jp_fetch, session["id"], DEAF, timeout=1)
    assert result["status"] == "timeout", result
    assert time.monotonic() - started < 8
    error = [o for o in result["outputs"] if o["output_type"] == "error"]
    assert error and "kernel restarted, variables lost" in error[-1]["evalue"], result
    # Usable at once, blank.
    _, info = await call(jp_fetch, "GET", session["id"])
    assert info["status"] == "idle", info
    after = await run(jp_fetch, session["id"], "print(1 + 1)\n'kept' in globals()")
    assert after["status"] == "ok", after
    assert after["outputs"][0]["text"] == "2\n"
    assert after["outputs"][-1]["data"]["text/plain"] == "False"
    await call(jp_fetch, "DELETE", session["id"])


@pytest.mark.parametrize("ci_config", [{"session_pool": 0, "session_sandbox": "never",
                                        "restart_on_stuck_interrupt": False}])
async def test_without_the_setting_a_deaf_run_leaves_the_session_dead(
    jp_fetch: Any, short_grace: None
) -> None:
    session = await new_session(jp_fetch)
    result = await run(jp_fetch, session["id"], DEAF, timeout=1)
    assert result["status"] == "dead", result
    _, info = await call(jp_fetch, "GET", session["id"])
    assert info["status"] == "dead"
    status, _ = await call(jp_fetch, "POST", session["id"], "restart")
    assert status == 200
    assert (await run(jp_fetch, session["id"], "1"))["status"] == "ok"
    await call(jp_fetch, "DELETE", session["id"])


def kernel_processes() -> set[int]:
    """Return the live kernel processes this process (the server) started."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            kernel = b"ipykernel" in (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if kernel and fields[0] != "Z" and int(fields[1]) == os.getpid():
            found.add(int(stat.parent.name))
    return found


async def test_a_restart_racing_a_delete_leaves_no_kernel(
    jp_fetch: Any, jp_serverapp: Any, tmp_path: Path
) -> None:
    km = jp_serverapp.kernel_manager
    before, processes = set(km.list_kernel_ids()), kernel_processes()
    for attempt in range(8):
        session = await new_session(jp_fetch)
        restart = asyncio.ensure_future(call(jp_fetch, "POST", session["id"], "restart"))
        await asyncio.sleep(0.01 * attempt)  # the delete lands at a different moment each time
        delete = asyncio.ensure_future(call(jp_fetch, "DELETE", session["id"]))
        (restarted, _), (deleted, _) = await asyncio.gather(restart, delete)
        assert restarted in (200, 404) and deleted in (204, 404), (restarted, deleted)
    _, listed = await call(jp_fetch, "GET")
    assert listed == []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (set(km.list_kernel_ids()) - before):
        await asyncio.sleep(0.1)
    assert set(km.list_kernel_ids()) - before == set()
    while time.monotonic() < deadline and kernel_processes() - processes:
        await asyncio.sleep(0.1)
    assert kernel_processes() - processes == set()
    root = Path(jp_serverapp.root_dir) / ".jupyter-ci-sessions"
    assert not root.exists() or [p.name for p in root.iterdir() if p.name[0] != "."] == []
