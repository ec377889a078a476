"""A box floods the model service's socket: the server and other sessions keep answering.

Code in a sandboxed notebook kernel opens thousands of connections to the broker socket bound
into its box from several processes and holds them, then churns more (connect, a request or
half of one, hang up). The server runs with 1024 descriptors, as many distributions' default:
without a per-box cap it accepts until it runs out, then `/api/status` and new sessions time
out and tornado logs a traceback on every loop turn. With the cap, the box's own backlog
absorbs the flood: Jupyter's API answers about as fast as before the attack (judged against
a baseline measured here), another session runs code, and the log stays small.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.security.test_key_exposure import user
from tests.security.test_sandbox import Session, call
from tests.security.unprivileged import Server, User, start_server, wait_ready
from tests.test_gateway import _run_in_kernel

__all__ = ["user"]

#: Processes of the box that each hold this many connections, then one that churns them
#: (connect, a request, hang up).
HOLDERS, HELD = 6, 900
FLOOD = f"""
import os, socket, time
path = os.environ["JUPYTER_CI_BROKER_SOCKET"]
def connect():
    s = socket.socket(socket.AF_UNIX)
    s.setblocking(False)
    try:
        s.connect(path)
    except OSError:
        s.close()
        return None
    return s
deadline = time.monotonic() + 300  # a hang guard: the test says when to stop
def running():
    return not os.path.exists("stop") and time.monotonic() < deadline
def holder(i):
    held, tried = [], 0
    while running() and not os.path.exists("churn"):
        if len(held) >= {HELD}:
            time.sleep(0.1)
            continue
        tried += 1
        if tried == 2000:
            open(f"held-{{i}}", "w").write(f"{{len(held)}} {{tried}}")
        s = connect()
        if s is None:
            time.sleep(0.005)  # the backlog is full: try again as the server accepts
            continue
        try:
            s.send(b"POST /jupyter-ci/broker/turn HTTP/1.1\\r\\nContent-Length: 10\\r\\n")
            held.append(s)
        except OSError:
            s.close()
    for s in held:
        s.close()
def churner():
    while not os.path.exists("churn") and running():
        time.sleep(0.05)
    churned = 0
    while running():
        s = connect()
        if s is None:
            time.sleep(0.001)
            continue
        churned += 1
        host = b"Host: localhost\\r\\n" if churned % 2 else b""
        try:
            s.send(b"GET /jupyter-ci/broker/info HTTP/1.1\\r\\n" + host + b"\\r\\n")
        except OSError:
            pass
        s.close()
    open("churned", "w").write(str(churned))
for i in range({HOLDERS + 1}):
    if os.fork() == 0:
        try:
            holder(i) if i < {HOLDERS} else churner()
        except OSError:
            pass  # the box's own limit of open files
        finally:
            os._exit(0)
print("flooding")
"""


@pytest.fixture(scope="module")
def server(user: User) -> Iterator[Server]:
    """A server of 1024 descriptors whose sessions are boxed."""
    started = start_server(user, "flood", {}, {"session_pool": 0, "session_sandbox": "always"},
                           limits=("--nofile=1024:1024",))
    try:
        wait_ready(started)
        started.request("api/status")  # the info file is written before the port is bound
        yield started
    finally:
        started.stop()


def status_seconds(server: Server, timeout: float) -> float:
    """Time one GET /api/status, which must answer 200 within the hang guard `timeout`."""
    request = urllib.request.Request(f"{server.url}api/status",
                                     headers={"Authorization": f"token {server.token}"})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            assert response.status == 200
            response.read()
    except (urllib.error.URLError, TimeoutError) as err:
        raise AssertionError(f"/api/status did not answer during the flood: {err!r}") from None
    return time.perf_counter() - start


def wait_for(path: Path) -> str:
    """Wait until a process of the flood writes `path`, and read it (a hang guard of 120 s)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.2)
    raise AssertionError(f"the flood did not write {path.name}: {sorted(path.parent.iterdir())}")


def test_a_box_flooding_the_model_service_socket_does_not_take_the_server_down(
        server: Server, user: User) -> None:
    folder = server.home / "nb"
    folder.mkdir()
    user.own(folder)
    with Session(server) as witness:
        assert witness.text("print(6 * 7)").strip() == "42"
        baseline = statistics.median(status_seconds(server, 30) for _ in range(9))
        log_before = server.log.stat().st_size
        status, kernel = call(server, "POST", "api/kernels",
                              {"name": "python3-sandboxed", "path": "nb"})
        assert status == 201, kernel
        ws = SimpleNamespace(port=int(server.url.rsplit(":", 1)[1].strip("/")),
                             token=server.token)
        try:
            out = asyncio.run(_run_in_kernel(ws, kernel["id"], FLOOD))  # type: ignore[arg-type]
            assert "flooding" in out, out
            held = [wait_for(folder / f"held-{i}").split() for i in range(HOLDERS)]
            # The box holds what it can and keeps trying thousands more, from now on.
            holding = [status_seconds(server, 60) for _ in range(5)]
            assert witness.text("print(6 * 7)").strip() == "42"
            (folder / "churn").touch()
            churning = [status_seconds(server, 60) for _ in range(5)]
            status, again = call(server, "POST", "jupyter-ci/sessions")
            assert status == 201, again
            call(server, "DELETE", f"jupyter-ci/sessions/{again['id']}")
        finally:
            (folder / "stop").touch()
            churned = wait_for(folder / "churned")
            call(server, "DELETE", f"api/kernels/{kernel['id']}")
    grown = server.log.stat().st_size - log_before
    during = holding + churning
    print(f"/api/status: {baseline * 1000:.1f} ms before the flood, "
          f"{statistics.median(during) * 1000:.1f} ms during it (held {held}, "
          f"{churned} churned); log +{grown} bytes")
    # Jupyter's API answers as before: a loaded machine may slow it, never by this much.
    assert statistics.median(during) < 25 * baseline + 0.5, (baseline, during)
    assert grown < 256 << 10, server.log.read_text()[-3000:]
