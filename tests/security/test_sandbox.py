"""Attacks from a REST session's code on a real server, boxed and not (issue 19).

Code in a session (model-written, steered by what it read) tries what an attacker would: read
another session's files, the server's token and key file, see and signal the server's
process, reach the server's port and another local port, fork without end, allocate past its
memory, write a huge file, fill /tmp. Each attack runs against a server whose sessions are
boxed and one whose sessions are not: unboxed it succeeds (so the test can fail), boxed it is
refused or contained, the server and another session keep answering, and the attacked
session recovers with a restart. Servers and kernels run as an unprivileged user, as Linux
exempts root from the process limit (tests/security/unprivileged.py).
"""

from __future__ import annotations

import base64
import json
import secrets
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.security.test_key_exposure import user
from tests.security.unprivileged import Server, User, start_server, wait_ready

__all__ = ["user"]  # the unprivileged user, with a folder of its own (a fixture)

MODES = ("boxed", "open")
LIMITS = {"sandbox_memory_bytes": 256 << 20, "sandbox_processes": 64,
          "sandbox_file_bytes": 8 << 20, "sandbox_tmp_bytes": 16 << 20}
KEY = "sk-in-the-key-file-" + secrets.token_hex(8)


def call(server: Server, method: str, path: str, body: Any = None,
         timeout: float = 120) -> tuple[int, Any]:
    """Send one REST request with the server's token; return status and decoded JSON."""
    data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
    request = urllib.request.Request(f"{server.url}{path}", data=data, method=method,
                                     headers={"Authorization": f"token {server.token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


class Session:
    """A REST session of one server, deleted at the end of its `with`."""

    def __init__(self, server: Server) -> None:
        self.server = server
        status, self.info = call(server, "POST", "jupyter-ci/sessions")
        assert status == 201, self.info
        self.id = self.info["id"]

    def run(self, code: str, timeout: float = 60) -> dict[str, Any]:
        """Execute code; return the API's result."""
        status, result = call(self.server, "POST", f"jupyter-ci/sessions/{self.id}/execute",
                              {"code": code, "timeout": timeout}, timeout=timeout + 60)
        assert status == 200, result
        return dict(result)

    def text(self, code: str) -> str:
        """Execute code that must succeed; return what it printed."""
        result = self.run(code)
        assert result["status"] == "ok", result
        return "".join(o.get("text", "") for o in result["outputs"] if o["output_type"] == "stream")

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        call(self.server, "DELETE", f"jupyter-ci/sessions/{self.id}")


@pytest.fixture(scope="module")
def servers(user: User) -> Iterator[dict[str, Server]]:
    """One server whose sessions must be boxed, one whose sessions never are."""
    started: dict[str, Server] = {}
    try:
        for mode in MODES:
            key_file = user.root / f"{mode}-keys.json"
            key_file.write_text(json.dumps({"OPENAI_API_KEY": KEY}))
            key_file.chmod(0o600)
            user.own(key_file)
            ci = {"session_pool": 0, "key_file": str(key_file), **LIMITS,
                  "session_sandbox": "always" if mode == "boxed" else "never"}
            started[mode] = start_server(user, mode, {}, ci)
        for server in started.values():
            wait_ready(server)
        yield started
    finally:
        for server in started.values():
            server.stop()


@pytest.fixture
def outside() -> Iterator[int]:
    """A listening port of the host's loopback that is not Jupyter's."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield int(listener.getsockname()[1])


def contained(server: Server, attacked: Session, witness: Session) -> None:
    """Check the server and another session answer, and the attacked one recovers."""
    assert call(server, "GET", "api/status")[0] == 200
    assert witness.text("print(6 * 7)").strip() == "42"
    status, info = call(server, "POST", f"jupyter-ci/sessions/{attacked.id}/restart")
    assert status == 200, info
    assert attacked.text("print('back')").strip() == "back"


@pytest.mark.parametrize("mode", MODES)
def test_sessions_are_boxed_as_configured(servers: dict[str, Server], mode: str) -> None:
    with Session(servers[mode]) as session:
        assert session.info["sandboxed"] is (mode == "boxed")
        assert session.info["kernel_name"] == (
            "python3-sandboxed" if mode == "boxed" else "python3")


@pytest.mark.parametrize("mode", MODES)
def test_another_sessions_files(servers: dict[str, Server], mode: str) -> None:
    server = servers[mode]
    with Session(server) as victim, Session(server) as attacker:
        secret = secrets.token_hex(8)
        where = victim.text(f"open('secret.txt', 'w').write({secret!r})\n"
                            "import os; print(os.path.abspath('secret.txt'))").strip()
        got = attacker.run(f"print(open({where!r}).read())")
        if mode == "boxed":
            assert got["status"] == "error" and got["outputs"][-1]["ename"] == "FileNotFoundError"
        else:
            assert secret in json.dumps(got["outputs"])


@pytest.mark.parametrize("mode", MODES)
def test_the_servers_token_and_key_file(servers: dict[str, Server], mode: str) -> None:
    server = servers[mode]
    runtime = server.info["runtime_dir"]
    key_file = Path(server.home).parent / f"{mode}-keys.json"
    with Session(server) as session:
        code = (f"import glob, os\ninfo = glob.glob({runtime!r} + '/jpserver-*.json')\n"
                "print([open(f).read() for f in info])\n"
                f"print(open({str(key_file)!r}).read() if os.path.exists({str(key_file)!r}) "
                "else 'no key file')")
        out = session.text(code)
    if mode == "boxed":
        assert server.token not in out and KEY not in out
        assert out.splitlines() == ["[]", "no key file"]
    else:
        assert server.token in out and KEY in out


CONNECTION_FILES = """import glob
print(len(glob.glob({runtime!r} + '/kernel-*.json')
          + glob.glob('/tmp/jupyter-ci-*/*/kernel.json')))"""


@pytest.mark.parametrize("mode", MODES)
def test_other_kernels_connection_files(servers: dict[str, Server], mode: str) -> None:
    # A connection file holds a kernel's HMAC key: with it, code could drive that kernel.
    server = servers[mode]
    with Session(server), Session(server) as attacker:
        seen = int(attacker.text(CONNECTION_FILES.format(runtime=server.info["runtime_dir"])))
    # Boxed, only its own (in its private folder); unboxed, every kernel's.
    assert seen == 1 if mode == "boxed" else seen >= 2


@pytest.mark.parametrize("mode", MODES)
def test_the_servers_process(servers: dict[str, Server], mode: str) -> None:
    server = servers[mode]
    pid = server.proc.pid
    with Session(server) as session:
        # Signal 0: "may I signal it?" (a real signal would end the unboxed server).
        out = session.text(f"import os\ntry:\n    os.kill({pid}, 0)\n    print('can signal')\n"
                           "except OSError as e:\n    print(type(e).__name__)\n"
                           f"print(os.path.exists('/proc/{pid}/cmdline'))")
    if mode == "boxed":
        assert out.split() == ["ProcessLookupError", "False"]
    else:
        assert out.split() == ["can", "signal", "True"]


REACH = """import socket
def reach(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        return "reached"
    except OSError as e:
        return type(e).__name__
print(reach({server}), reach({outside}), [name for _, name in socket.if_nameindex()])"""


@pytest.mark.parametrize("mode", MODES)
def test_the_network(servers: dict[str, Server], mode: str, outside: int) -> None:
    server = servers[mode]
    port = int(server.url.rsplit(":", 1)[1].strip("/"))
    with Session(server) as session:
        out = session.text(REACH.format(server=port, outside=outside))
    if mode == "boxed":
        assert out.strip() == "ConnectionRefusedError ConnectionRefusedError ['lo']"
    else:
        assert out.startswith("reached reached")


FORKS = """import os, time
made = 0
for _ in range(200):
    try:
        if os.fork() == 0:
            time.sleep(2)
            os._exit(0)
        made += 1
    except OSError as e:
        print("refused:", e.strerror)
        break
print("forked", made)
for _ in range(made):
    os.wait()"""


@pytest.mark.parametrize("mode", MODES)
def test_a_fork_bomb(servers: dict[str, Server], mode: str) -> None:
    # Bounded at 200 so the unboxed run stays harmless; boxed, the limit (64) stops it.
    server = servers[mode]
    with Session(server) as attacked, Session(server) as witness:
        out = attacked.text(FORKS)
        made = int(out.split("forked")[1])
        if mode == "boxed":
            assert "Resource temporarily unavailable" in out and made < LIMITS["sandbox_processes"]
            contained(server, attacked, witness)
        else:
            assert made == 200


ATTACKS = {
    "memory": ("b = bytearray(1 << 30)\nprint('allocated', len(b))", "MemoryError"),
    "file": ("open('big.bin', 'wb').write(b'x' * (16 << 20))\nprint('written')", "OSError"),
    "tmp": ("open('/tmp/fill', 'wb').write(b'x' * (32 << 20))\nprint('written')", "OSError"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_memory_disk_and_tmp_limits(servers: dict[str, Server], mode: str, attack: str) -> None:
    code, error = ATTACKS[attack]
    server = servers[mode]
    with Session(server) as attacked, Session(server) as witness:
        result = attacked.run(code)
        if mode == "boxed":
            assert result["status"] == "error", result
            assert result["outputs"][-1]["ename"] == error
            contained(server, attacked, witness)
        else:
            assert result["status"] == "ok", result
            attacked.run("import os\nfor f in ('big.bin', '/tmp/fill'):\n"
                         "    os.path.exists(f) and os.remove(f)")


def test_boxed_kernels_die_with_the_server(user: User) -> None:
    server = start_server(user, "dying", {}, {"session_pool": 0, "session_sandbox": "always"})
    try:
        wait_ready(server)
        Session(server).text("print('started')")  # never deleted: the server dies first
        boxes = [pid for pid in _descendants(server.proc.pid) if _comm(pid) == "bwrap"]
        kernels = [pid for pid in _descendants(server.proc.pid) if _comm(pid) != "bwrap"]
        assert boxes and kernels
        server.proc.kill()  # no shutdown: SIGKILL, as an OOM killer or a crash would
        server.proc.wait(10)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in boxes + kernels) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in boxes + kernels if _alive(pid)]
    finally:
        server.stop()


def _descendants(pid: int) -> list[int]:
    """Return every process below `pid`, from /proc."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        found += [int(child) for child in children]
        queue += [int(child) for child in children]
    return found


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """Tell a live process (a zombie waiting for its parent is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


ESCAPE_C = """#include <stdio.h>
__attribute__((constructor)) static void escaped(void) {
    FILE *f = fopen("%s", "w");
    if (f) { fputs("ran outside the box", f); fclose(f); }
}
"""


def test_a_sessions_env_cannot_reach_the_box_launcher_or_its_settings(
        servers: dict[str, Server], user: User, tmp_path: Path) -> None:
    # The launcher (bubblewrap) starts on the host with the session's environment: a
    # preloaded library planted by an earlier session would run there, outside any box.
    marker = user.root / "escaped"
    source = tmp_path / "escape.c"
    source.write_text(ESCAPE_C % marker)
    library = tmp_path / "escape.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    server = servers["boxed"]
    with Session(server) as planter:
        planted = planter.text(
            f"import base64, os\nopen('escape.so', 'wb').write(base64.b64decode("
            f"{base64.b64encode(library.read_bytes()).decode()!r}))\n"
            "print(os.path.abspath('escape.so'))").strip()
        attempts = {"LD_PRELOAD": planted, "LD_LIBRARY_PATH": str(Path(planted).parent),
                    "GCONV_PATH": "/tmp", "JUPYTER_CI_SANDBOX_BROKER": "/run/docker.sock",
                    "JUPYTER_CI_SANDBOX_HIDE": "", "KERNEL_WORKING_DIR": "/"}
        for name, value in attempts.items():
            status, body = call(server, "POST", "jupyter-ci/sessions", {"env": {name: value}})
            assert status == 400 and name in body["message"], (name, status, body)
    assert not marker.exists(), marker.read_text()
