"""A server killed with -9, started again on the same session root: no orphans, clear 404s."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


class Server:
    """A real `jupyter server` process with jupyter-ci, sessions under a given root."""

    def __init__(self, tmp_path: Path, name: str, root: Path, **ci: Any) -> None:
        self.home = tmp_path / name
        self.runtime = self.home / "runtime"
        config = self.home / "config"
        config.mkdir(parents=True)
        (config / "jupyter_server_config.json").write_text(json.dumps({
            "ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
            "JupyterCI": {"session_pool": 1, "session_sandbox": "never",
                          "session_root": str(root), **ci}}))
        env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config),
               "JUPYTER_RUNTIME_DIR": str(self.runtime),
               "JUPYTER_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path),
               "PYTHONPATH": str(Path(__file__).parent.parent)}
        self.log = self.home / "server.log"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root",
                 "--port=0", "--ip=127.0.0.1", "--IdentityProvider.token=secret",
                 f"--ServerApp.root_dir={tmp_path}"], env=env, stdout=out,
                stderr=subprocess.STDOUT)
        self.url = self._wait_for_url()

    def _wait_for_url(self) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            for info in self.runtime.glob(f"jpserver-{self.proc.pid}.json"):
                with contextlib.suppress(ValueError):
                    return str(json.loads(info.read_text())["url"])
            time.sleep(0.2)
        raise AssertionError("jupyter server did not start")

    def call(self, method: str, route: str, body: Any = None) -> tuple[int, Any]:
        """Call a route with the token; return (status, decoded JSON)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}jupyter-ci/{route}", method=method,
                                         data=data, headers={"Authorization": "token secret"})
        for _ in range(100):  # the info file comes before the port is bound
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    raw = response.read()
                    return response.status, json.loads(raw) if raw else None
            except urllib.error.HTTPError as error:
                return error.code, json.loads(error.read())
            except urllib.error.URLError:
                time.sleep(0.1)
        raise AssertionError(f"{self.url} is not reachable")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def users_of(needles: list[str]) -> list[int]:
    """Return the live processes whose command line names any of `needles`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes()
            state = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(n.encode() in text for n in needles):
            found.append(int(cmdline.parent.name))
    return found


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    """Servers the test starts, stopped at its end whatever happens."""
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


def connection_files(server: Server) -> set[str]:
    return {str(p) for p in server.runtime.glob("kernel-*.json")}


@pytest.mark.parametrize("kept", [86400.0, 0.0])
def test_a_server_killed_with_sigkill_leaves_nothing_after_its_next_start(
    tmp_path: Path, servers: list[Server], kept: float
) -> None:
    root = tmp_path / "sessions"
    # Another server on the same root, alive throughout: its session is never touched.
    other = Server(tmp_path, "other", root, session_pool=0)
    servers.append(other)
    status, theirs = other.call("POST", "sessions", {})
    assert status == 201, theirs
    assert other.call("POST", f"sessions/{theirs['id']}/execute", {"code": "x = 42"})[0] == 200

    first = Server(tmp_path, "first", root, session_orphans_kept=kept)
    servers.append(first)
    lost = [first.call("POST", "sessions", body)[1] for body in ({}, {"cwd_name": "work"})]
    for session in lost:
        status, _ = first.call("POST", f"sessions/{session['id']}/execute",
                               {"code": "open('notes.txt', 'w').write('kept?')"})
        assert status == 200
    time.sleep(1)  # the pool's kernel too
    leftovers = connection_files(first)
    assert len(leftovers) == 3, leftovers  # two sessions and the pool's kernel
    first.stop(signal.SIGKILL)
    assert all(Path(s["cwd"]).is_dir() for s in lost)  # what a kill leaves

    again = Server(tmp_path, "again", root, session_orphans_kept=kept)
    servers.append(again)
    # Connection files of the dead server's kernels are gone, and so are their processes.
    assert leftovers & connection_files(first) == set()
    assert users_of(sorted(leftovers)) == []
    for session in lost:
        assert not Path(session["cwd"]).exists()
        status, body = again.call("GET", f"sessions/{session['id']}")
        assert (status, body["reason"]) == (404, "unknown_session"), body
        assert "lost when the server restarted" in body["message"], body
        kept_dir = root / ".lost" / session["id"]
        if kept:
            assert (kept_dir / "notes.txt").read_text() == "kept?"
            assert str(kept_dir) in body["message"]
        else:
            assert not kept_dir.exists() and "its files are gone" in body["message"]
    # The only session directory left: the live server's (a pool fills at a first session).
    assert {p.name for p in root.iterdir() if not p.name.startswith(".")} == {theirs["id"]}
    status, result = other.call("POST", f"sessions/{theirs['id']}/execute", {"code": "x"})
    assert (status, result["status"]) == (200, "ok"), result
    assert result["outputs"][0]["data"]["text/plain"] == "42"
    # A clean stop leaves no record behind: the next start has nothing to clear.
    again.stop()
    assert [p.name for p in (root / ".kernels").iterdir()] == [f"{theirs['kernel_id']}.json"]
    # And the lost sessions are still remembered after one more restart.
    third = Server(tmp_path, "third", root, session_orphans_kept=kept, session_pool=0)
    servers.append(third)
    status, body = third.call("GET", f"sessions/{lost[0]['id']}")
    assert status == 404 and "lost when the server restarted" in body["message"], body


def test_a_boxed_kernels_private_folder_is_cleared_after_a_kill(
    tmp_path: Path, servers: list[Server]
) -> None:
    root = tmp_path / "sessions"
    first = Server(tmp_path, "first", root, session_pool=0, session_sandbox="always")
    servers.append(first)
    status, session = first.call("POST", "sessions", {})
    assert "kernel_id" in session, (status, session)  # setup-env.sh installs bubblewrap
    record = json.loads((root / ".kernels" / f"{session['kernel_id']}.json").read_text())
    private = Path(record["connection_file"]).parent
    assert private.is_dir() and private.name != "runtime", record
    first.stop(signal.SIGKILL)
    again = Server(tmp_path, "again", root, session_pool=0, session_sandbox="always")
    servers.append(again)
    assert not private.exists()
    assert users_of([str(private)]) == []
    status, body = again.call("GET", f"sessions/{session['id']}")
    assert status == 404 and "lost when the server restarted" in body["message"]
