"""A real `jupyter server` stops on SIGTERM while its session pool is starting a kernel."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.test_server import _wait_for_server_info

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def left_behind(folder: Path) -> list[int]:
    """Return the pids of live processes whose command line names `folder` (kernels, boxes)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            named = str(folder).encode() in cmdline.read_bytes()
            state = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if named and state != "Z":
            found.append(int(cmdline.parent.name))
    return found


def post(url: str) -> int:
    """POST an empty JSON object with the test's token; return the status."""
    request = urllib.request.Request(url, method="POST", data=b"{}",
                                     headers={"Authorization": "token secret"})
    for _ in range(100):  # the info file comes before the port is bound
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return int(response.status)
        except urllib.error.URLError:
            time.sleep(0.1)
    raise AssertionError(f"{url} is not reachable")


def slow_kernel_starts(tmp_path: Path, env: dict[str, str]) -> dict[str, Any]:
    """Give the server a default kernel seconds slow to launch (tests/slow_provisioner.py)."""
    site = tmp_path / "site"
    info = site / "slow_provisioner-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: slow-provisioner\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[jupyter_client.kernel_provisioners]\n"
        "slow-provisioner = tests.slow_provisioner:SlowProvisioner\n")
    env["PYTHONPATH"] += os.pathsep + str(site)
    spec = Path(env["JUPYTER_DATA_DIR"]) / "kernels" / "slow-python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (slow to start)", "language": "python",
        "metadata": {"kernel_provisioner": {"provisioner_name": "slow-provisioner"}}}))
    env["SLOW_PROVISIONER_S"] = "2"
    return {"MappingKernelManager": {"default_kernel_name": "slow-python3"}}


@pytest.mark.parametrize(("start", "delay"), [("ordinary", 0.0), ("slow", 0.5)])
def test_sigterm_during_a_pool_kernel_start_exits_and_leaves_no_kernel(
    tmp_path: Path, start: str, delay: float
) -> None:
    config, runtime = tmp_path / "config", tmp_path / "runtime"
    config.mkdir()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config), "JUPYTER_RUNTIME_DIR": str(runtime),
           "JUPYTER_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path),
           "PYTHONPATH": str(Path(__file__).parent.parent)}
    slow = slow_kernel_starts(tmp_path, env) if start == "slow" else {}
    (config / "jupyter_server_config.json").write_text(json.dumps({
        "ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
        # Unboxed: the default kernelspec (the slow one, when asked) is what sessions use.
        "JupyterCI": {"session_pool": 1, "session_sandbox": "never"}, **slow}))
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root", "--port=0",
             "--ip=127.0.0.1", "--IdentityProvider.token=secret",
             f"--ServerApp.root_dir={tmp_path}"],
            env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        info = _wait_for_server_info(runtime, proc)
        # A notebook's kernel, as in JupyterLab, then the first session (started cold).
        for route in ("api/kernels", "jupyter-ci/sessions"):
            assert post(f"{info['url']}{route}") == 201
        # The first session started cold; the pool's kernel is starting now.
        time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        # A hang guard (on a loaded machine a clean stop can take seconds); not a speed bound.
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(40)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert proc.returncode == 0, f"exit {proc.returncode} after {took:.1f} s:\n{text[-3000:]}"
    # Its cleanup ran to the end: the kernel manager shut the notebook's kernel down.
    assert re.search(r"Shutting down 1 kernel", text), text[-3000:]
    deadline = time.monotonic() + 3  # a kernel told to stop may take a moment to go
    while left_behind(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = left_behind(tmp_path)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left running: {left}\n{text[-3000:]}"
    # The server's own errors (a kernel interrupted while importing may print its traceback).
    assert not re.search(r"^\[E |Task was destroyed|Exception in callback", text, re.M), text
