"""A server whose jupyter-ci extension failed to load still stops cleanly (issue 31.9).

A bad setting stops the extension's loading part way; Jupyter Server serves on without it
and, when it stops, still calls the extension's stop_extension, which must not trip over
what loading never made (it raised AttributeError: broker_socket, and the server did not
stop on SIGTERM).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.test_server import _wait_for_server_info

#: Settings that fail at different points of loading: at once (the settings object), and
#: after the broker, the kernel manager's hook and the HTTP client were made (the prices).
BAD = {"first": {"approval_minimum": "sometimes"},
       "later": {"prices": {"openai:gpt-x": {"input": "cheap", "output": 1.0}}}}


@pytest.mark.parametrize("where", sorted(BAD))
def test_a_server_whose_extension_failed_to_load_stops_without_a_traceback(
    tmp_path: Path, where: str
) -> None:
    config, runtime = tmp_path / "config", tmp_path / "runtime"
    config.mkdir()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config), "JUPYTER_RUNTIME_DIR": str(runtime),
           "JUPYTER_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path),
           "PYTHONPATH": str(Path(__file__).parent.parent)}
    settings: dict[str, Any] = {"session_sandbox": "never", **BAD[where]}
    (config / "jupyter_server_config.json").write_text(json.dumps({
        # Real-time collaboration left out: its own stop prints a traceback when no document
        # was ever opened (docs/upstream/ydoc_stop_traceback.md), which is not ours to judge.
        "ServerApp": {"jpserver_extensions": {"jupyter_ci": True, "jupyter_server_ydoc": False}},
        "JupyterCI": settings}))
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root", "--port=0",
             "--ip=127.0.0.1", "--IdentityProvider.token=secret",
             f"--ServerApp.root_dir={tmp_path}"],
            env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for_server_info(runtime, proc)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)  # a hang guard: it stops in about a second
        except subprocess.TimeoutExpired:
            pytest.fail(f"SIGTERM did not stop the server:\n{log.read_text()[-3000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    loading, _, stopping = text.partition("received signal 15")
    assert "jupyter_ci | extension failed loading" in loading, text[-3000:]
    assert next(iter(BAD[where])) in loading  # the setting at fault is named
    assert stopping and proc.returncode == 0, text[-3000:]
    assert "Traceback" not in stopping and "[E " not in stopping, stopping
