"""REST sessions on a real Jupyter Server (pytest-jupyter) with real kernels, token auth on."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from tornado.httpclient import HTTPClientError, HTTPResponse
from traitlets.config import Config

from jupyter_ci.models.broker import MANAGED
from jupyter_ci.server.sessions import files as session_files
from jupyter_ci.server.sessions import runs as session_runs
from tests import openapi_check

Fetch = Any


@pytest.fixture
def ci_config() -> dict[str, Any]:
    """c.JupyterCI for the test's server (no pool unless a test asks: kernels cost time)."""
    return {"session_pool": 0}


@pytest.fixture
def more_config() -> dict[str, Any]:
    """Other sections of the test server's config."""
    return {}


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, ci_config: dict[str, Any],
                     more_config: dict[str, Any]) -> Config:
    """Enable the extension with no provider configured."""
    for var in (*MANAGED, "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    return Config({"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
                   "JupyterCI": ci_config, **more_config})


async def call(jp_fetch: Fetch, method: str, *path: str, body: Any = None,
               raw: bytes | None = None, **kwargs: Any) -> tuple[int, Any]:
    """Call a session route with the test's token; return (status, decoded JSON or bytes)."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    if data is None and method in ("POST", "PUT"):
        data = b""
    try:
        response: HTTPResponse = await jp_fetch("jupyter-ci", "sessions", *path, method=method,
                                                body=data, **kwargs)
    except HTTPClientError as err:
        assert err.response is not None
        response = err.response
    assert response.code < 500, response.body
    content = response.body or b""
    openapi_check.check(method, response.effective_url, response.code,
                        response.headers.get("Content-Type", ""), content,
                        response.headers.get("Allow"))
    if response.headers.get("Content-Type", "").startswith("application/json") and content:
        return response.code, json.loads(content)
    return response.code, content


async def new_session(jp_fetch: Fetch, **body: Any) -> dict[str, Any]:
    code, session = await call(jp_fetch, "POST", body=body)
    assert code == 201, session
    return dict(session)


async def run(jp_fetch: Fetch, sid: str, code: str, **extra: Any) -> dict[str, Any]:
    status, result = await call(jp_fetch, "POST", sid, "execute", body={"code": code, **extra})
    assert status == 200, result
    return dict(result)


def stdout(result: dict[str, Any]) -> str:
    return "".join(o.get("text", "") for o in result["outputs"] if o["output_type"] == "stream")


S = "sessions/s1"
ROUTES = [("POST", "sessions"), ("GET", "sessions"), ("GET", S), ("DELETE", S),
          ("POST", f"{S}/restart"), ("POST", f"{S}/execute"), ("POST", f"{S}/ask"),
          ("GET", f"{S}/notebook"), ("GET", f"{S}/files"), ("GET", f"{S}/files/a.txt"),
          ("PUT", f"{S}/files/a.txt"), ("DELETE", f"{S}/files/a.txt"), ("GET", "openapi.json")]


async def test_every_route_needs_jupyters_authentication(
    jp_serverapp: Any, http_server_client: Any, jp_base_url: str
) -> None:
    for method, tail in ROUTES:
        body = b"{}" if method in ("POST", "PUT") else None
        response = await http_server_client.fetch(
            f"{jp_base_url}jupyter-ci/{tail}", method=method, body=body, raise_error=False)
        assert response.code == 403, (method, tail, response.code)  # Jupyter: never 401


async def test_a_session_keeps_state_lists_and_is_deleted_whole(
    jp_fetch: Fetch, jp_serverapp: Any, http_server_client: Any, jp_base_url: str,
    jp_auth_header: dict[str, str],
) -> None:
    session = await new_session(jp_fetch)
    sid = session["id"]
    assert session["status"] == "idle"
    # Boxed where bubblewrap works (session_sandbox "auto"): then the sandboxed kernelspec.
    assert session["kernel_name"] == ("python3-sandboxed" if session["sandboxed"] else "python3")
    first = await run(jp_fetch, sid, "x = 20\nx + 1")
    assert first["status"] == "ok" and first["files"] == []
    assert first["outputs"][0]["data"]["text/plain"] == "21"
    second = await run(jp_fetch, sid, "import os\nprint(x * 2, os.getcwd())")
    out = stdout(second).split()
    assert out[0] == "40" and second["execution_count"] > first["execution_count"]
    directory = Path(out[1])
    assert directory.name == sid and directory.is_dir()
    # The sessions' root is a hidden directory: not in the file browser or contents API.
    hidden = await http_server_client.fetch(
        f"{jp_base_url}api/contents/{directory.parent.name}/{sid}", headers=jp_auth_header,
        raise_error=False)
    assert directory.parent.name.startswith(".") and hidden.code == 404
    assert (await call(jp_fetch, "GET", sid))[1]["executions"] == 2
    assert [s["id"] for s in (await call(jp_fetch, "GET"))[1]] == [sid]
    kernel_id = session["kernel_id"]
    assert kernel_id in jp_serverapp.kernel_manager  # started by the server's kernel manager
    assert (await call(jp_fetch, "DELETE", sid))[0] == 204
    assert kernel_id not in jp_serverapp.kernel_manager and not directory.exists()
    assert (await call(jp_fetch, "GET", sid))[0] == 404


async def test_deleting_a_busy_session_ends_its_run_with_a_404(
    jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    session = await new_session(jp_fetch)
    sid = session["id"]
    directory = Path(stdout(await run(jp_fetch, sid, "import os\nprint(os.getcwd())")).strip())
    busy = asyncio.ensure_future(call(jp_fetch, "POST", sid, "execute",
                                      body={"code": "import time\ntime.sleep(60)"}))
    await asyncio.sleep(0.5)
    started = time.monotonic()
    assert (await call(jp_fetch, "DELETE", sid))[0] == 204
    code, reply = await busy
    assert (code, reply["reason"]) == (404, "unknown_session"), reply
    assert time.monotonic() - started < 10
    assert session["kernel_id"] not in jp_serverapp.kernel_manager and not directory.exists()


async def test_sessions_are_isolated_and_a_runaway_does_not_delay_another(
    jp_fetch: Fetch,
) -> None:
    one, two = (await new_session(jp_fetch))["id"], (await new_session(jp_fetch))["id"]
    await run(jp_fetch, one, "secret = 42\nopen('mine.txt', 'w').write('one')")
    assert (await run(jp_fetch, two, "secret"))["status"] == "error"
    assert (await call(jp_fetch, "GET", two, "files"))[1] == []
    assert (await call(jp_fetch, "GET", two, "files", "mine.txt"))[0] == 404
    runaway = asyncio.ensure_future(run(jp_fetch, one, "while True: pass", timeout=4))
    await asyncio.sleep(0.5)
    quick = await run(jp_fetch, two, "y = 1")
    # Answered while the runaway still runs: it did not wait for the runaway's timeout.
    assert quick["status"] == "ok" and not runaway.done()
    stuck = await runaway
    assert stuck["status"] == "timeout"
    # The timed-out session is interrupted, not lost.
    assert stdout(await run(jp_fetch, one, "print(secret)")) == "42\n"


async def test_a_dead_kernel_is_reported_and_restart_brings_it_back(jp_fetch: Fetch) -> None:
    sid = (await new_session(jp_fetch))["id"]
    await run(jp_fetch, sid, "kept = 1\nopen('kept.txt', 'w').write('file')")
    died = await run(jp_fetch, sid, "import os\nos._exit(1)", timeout=20)
    assert died["status"] == "dead"
    assert (await call(jp_fetch, "GET", sid))[1]["status"] == "dead"
    code, restarted = await call(jp_fetch, "POST", sid, "restart")
    assert code == 200 and restarted["status"] == "idle"
    after = await run(jp_fetch, sid, "print(open('kept.txt').read())\nkept")
    assert stdout(after) == "file\n" and after["status"] == "error"  # files kept, state not
    # Restarting a session stuck in a long run stops the run instead of waiting it out.
    stuck = asyncio.ensure_future(run(jp_fetch, sid, "while True: pass", timeout=300))
    await asyncio.sleep(0.5)
    started = time.monotonic()
    code, restarted = await call(jp_fetch, "POST", sid, "restart")
    assert code == 200 and restarted["status"] == "idle" and time.monotonic() - started < 15
    assert (await stuck)["status"] == "error"  # KeyboardInterrupt
    assert stdout(await run(jp_fetch, sid, "print('back')")) == "back\n"


# The server's restarter looks every 0.5 s instead of 3 s.
@pytest.mark.parametrize("more_config", [{"KernelRestarter": {"time_to_dead": 0.5}}])
async def test_a_kernel_killed_while_idle_stays_dead_though_the_server_revives_it(
    jp_fetch: Fetch,
) -> None:
    sid = (await new_session(jp_fetch))["id"]
    # The kernel kills itself once idle: a pid it reports may be its box's own (pid 2 there),
    # not the host's, so the test never signals a pid from inside.
    await run(jp_fetch, sid, "import os, signal, threading\nkept = 1\n"
              "threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGKILL)).start()")
    for _ in range(40):  # the server's restarter starts a blank kernel and tells the session
        if (await call(jp_fetch, "GET", sid))[1]["status"] == "dead":
            break
        await asyncio.sleep(0.25)
    assert (await call(jp_fetch, "GET", sid))[1]["status"] == "dead"
    refused = await run(jp_fetch, sid, "ran = True")  # not run in the blank kernel
    assert refused["status"] == "dead" and refused["outputs"] == []
    assert (await call(jp_fetch, "POST", sid, "restart"))[1]["status"] == "idle"
    assert stdout(await run(jp_fetch, sid, "print('ran' in dir(), 'kept' in dir())")) == \
        "False False\n"


async def stream(jp_fetch: Fetch, sid: str, code: str,
                 **kwargs: Any) -> list[tuple[float, str, Any]]:
    """Execute with Accept: text/event-stream; return (arrival time, event, data)."""
    events: list[tuple[float, str, Any]] = []
    buffer = b""

    def on_chunk(chunk: bytes) -> None:
        nonlocal buffer
        buffer += chunk
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            if block.startswith(b":"):  # an SSE comment: the stream's keep-alive
                events.append((time.monotonic(), "comment", block.decode()))
                continue
            fields = dict(line.split(": ", 1) for line in block.decode().splitlines())
            events.append((time.monotonic(), fields["event"], json.loads(fields["data"])))
            openapi_check.check_event(fields["event"], events[-1][2])

    await jp_fetch("jupyter-ci", "sessions", sid, "execute", method="POST",
                   body=json.dumps({"code": code}), headers={"Accept": "text/event-stream"},
                   streaming_callback=on_chunk, **kwargs)
    return events


async def test_a_streaming_execute_delivers_print_output_before_the_run_ends(
    jp_fetch: Fetch, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(session_runs, "KEEPALIVE_S", 0.5)
    sid = (await new_session(jp_fetch))["id"]
    events = await stream(jp_fetch, sid, "import time\nprint('first', flush=True)\n"
                                         "time.sleep(2)\nprint('second')")
    kinds = [kind for _, kind, _ in events]
    assert kinds.count("comment") >= 2, kinds  # the quiet 2 s kept alive
    events = [e for e in events if e[1] != "comment"]
    kinds = [kind for _, kind, _ in events]
    assert kinds[0] == "output" and kinds[-1] == "result"
    first_at = events[0][0]
    assert events[0][2]["text"] == "first\n"
    assert events[-1][0] - first_at > 1.5, "the first line came only at the end"
    result = events[-1][2]
    assert result["status"] == "ok" and stdout(result) == "first\nsecond\n"


async def test_a_client_that_hangs_up_on_a_stream_interrupts_the_run(jp_fetch: Fetch) -> None:
    sid = (await new_session(jp_fetch))["id"]
    with pytest.raises(HTTPClientError):  # tornado's client gives up after 2 s and hangs up
        await stream(jp_fetch, sid, "import time\nprint('go', flush=True)\ntime.sleep(60)",
                     request_timeout=2)
    started = time.monotonic()
    after = await run(jp_fetch, sid, "print('free')")
    assert stdout(after) == "free\n" and time.monotonic() - started < 10
    # Hanging up while queued behind another request's run drops only the queued one.
    other = asyncio.ensure_future(run(jp_fetch, sid, "time.sleep(2)\nprint('other')"))
    await asyncio.sleep(0.3)
    with pytest.raises(HTTPClientError):
        await stream(jp_fetch, sid, "queued = True", request_timeout=0.7)
    assert stdout(await other) == "other\n"
    assert stdout(await run(jp_fetch, sid, "print('queued' in dir())")) == "False\n"


async def test_a_client_that_hangs_up_on_a_plain_execute_interrupts_the_run(
    jp_fetch: Fetch,
) -> None:
    sid = (await new_session(jp_fetch))["id"]
    await run(jp_fetch, sid, "kept = 7")
    with pytest.raises(HTTPClientError):  # no reply within 1.5 s: tornado's client hangs up
        await jp_fetch("jupyter-ci", "sessions", sid, "execute", method="POST",
                       body=json.dumps({"code": "import time\ntime.sleep(60)"}),
                       request_timeout=1.5)
    started = time.monotonic()
    after = await run(jp_fetch, sid, "print(kept)")
    assert stdout(after) == "7\n" and time.monotonic() - started < 5
    cells = (await call(jp_fetch, "GET", sid, "notebook"))[1]["cells"]
    assert cells[1]["outputs"][-1]["ename"] == "KeyboardInterrupt"


async def test_a_timeout_of_0_or_null_means_no_deadline_and_none_the_servers(
    jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    jp_serverapp.web_app.settings["jupyter_ci"].timeout = 1  # the server's default, here
    session = await new_session(jp_fetch)
    sid = session["id"]
    nap = "import time\ntime.sleep(2)\nprint('woke')"
    assert (await run(jp_fetch, sid, nap))["status"] == "timeout"
    for none in (0, None):
        assert stdout(await run(jp_fetch, sid, nap, timeout=none)) == "woke\n"
    # The session says where it works; a run's env is checked as a session's is.
    assert stdout(await run(jp_fetch, sid, "import os\nprint(os.getcwd())")).strip() == \
        session["cwd"]
    for env in ({"A": 1}, {"JUPYTER_CI_BROKER_TOKEN": "x"}, ["A=1"]):
        code, reply = await call(jp_fetch, "POST", sid, "execute",
                                 body={"code": "1", "env": env})
        assert (code, reply["reason"]) == (400, "bad_request"), reply
    assert stdout(await run(jp_fetch, sid, "import os\nprint(os.environ['A'])",
                            env={"A": "1"})) == "1\n"


async def test_files_round_trip_exactly_and_runs_list_what_they_wrote(jp_fetch: Fetch) -> None:
    sid = (await new_session(jp_fetch))["id"]
    data = bytes(range(256)) * 1000 + b"\xff\xfe not utf-8"
    code, described = await call(jp_fetch, "PUT", sid, "files", "in", "data.bin", raw=data)
    assert code == 201 and described == {"path": "in/data.bin", "size": len(data),
                                         "mime": "application/octet-stream"}
    code, got = await call(jp_fetch, "GET", sid, "files", "in", "data.bin")
    assert code == 200 and got == data
    made = await run(jp_fetch, sid, "import pandas as pd\n"
                                    "pd.DataFrame({'a': [1, 2]}).to_csv('out.csv', index=False)\n"
                                    "print(len(open('in/data.bin', 'rb').read()))")
    assert stdout(made) == f"{len(data)}\n"
    assert made["files"] == [{"path": "out.csv", "size": 6, "mime": "text/csv"}]
    listing = (await call(jp_fetch, "GET", sid, "files"))[1]
    assert {f["path"] for f in listing} == {"in/data.bin", "out.csv"}
    assert (await call(jp_fetch, "DELETE", sid, "files", "out.csv"))[0] == 204
    assert (await call(jp_fetch, "GET", sid, "files", "out.csv"))[0] == 404


ESCAPES = ["../escape.txt", "a/../../escape.txt", "%2e%2e/escape.txt", "%2E%2E%2Fescape.txt",
           "%2Fetc%2Fescape.txt", "/etc/escape.txt", "out/escape.txt", ".%2e/escape.txt",
           "leak.txt"]


async def test_paths_that_leave_the_session_directory_are_refused(
    jp_fetch: Fetch, http_server_client: Any, jp_base_url: str, jp_auth_header: dict[str, str],
    jp_root_dir: Path, tmp_path: Path,
) -> None:
    sid = (await new_session(jp_fetch))["id"]
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    await run(jp_fetch, sid, f"import os\nos.symlink({str(outside)!r}, 'out')\n"
                             f"os.symlink({str(secret)!r}, 'leak.txt')")
    for path in ESCAPES:
        for method, raw in (("GET", None), ("PUT", b"x"), ("DELETE", None)):
            # Sent as written: no client-side quoting or normalising of the path.
            response = await http_server_client.fetch(
                f"{jp_base_url}jupyter-ci/sessions/{sid}/files/{path}", method=method,
                body=raw, headers=jp_auth_header, raise_error=False)
            assert response.code in (400, 404), (method, path, response.code, response.body)
            assert b"not yours" not in (response.body or b"")
    assert list(outside.iterdir()) == [] and not Path("/etc/escape.txt").exists()
    assert secret.read_text() == "not yours"
    assert not (jp_root_dir / ".jupyter-ci-sessions" / "escape.txt").exists()


@pytest.mark.parametrize("ci_config", [{"session_pool": 0, "max_code_bytes": 100,
                                        "max_upload_bytes": 1000}])
async def test_bad_input_gets_a_4xx_with_a_message_and_leaves_nothing(
    jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    sid = (await new_session(jp_fetch))["id"]
    bad: list[tuple[tuple[str, ...], bytes | None, int, str]] = [
        (("POST", sid, "execute"), b"{not json", 400, "bad_json"),
        (("POST", sid, "execute"), b"[1, 2]", 400, "bad_json"),
        (("POST", sid, "execute"), b'{"code": "\\ud800"}', 400, "bad_json"),  # lone surrogate
        (("POST",), b'{"env": {"A": "\\udfff"}}', 400, "bad_json"),
        (("POST", sid, "execute"), b"{}", 400, "bad_field"),
        (("POST", sid, "execute"), b'{"code": 5}', 400, "bad_field"),
        (("POST", sid, "execute"), b'{"code": "1", "timeout": "soon"}', 400, "bad_field"),
        (("POST", sid, "execute"), b'{"code": "1", "timeout": -1}', 400, "bad_field"),
        (("POST", sid, "execute"), json.dumps({"code": "x" * 101}).encode(), 413,
         "code_too_large"),
        (("POST", "nope", "execute"), b'{"code": "1"}', 404, "unknown_session"),
        (("POST",), b'{"env": {"JUPYTER_CI_BROKER_TOKEN": "mine"}}', 400, "bad_request"),
        (("POST",), b'{"env": ["A=1"]}', 400, "bad_request"),
        (("POST",), b'{"kernel_name": 3}', 400, "bad_field"),
        (("POST",), b'{"cwd_name": "../up"}', 400, "bad_request"),
        (("POST",), b'{"kernel_name": "no-such-kernel"}', 400, "bad_request"),
        (("PUT", sid, "files", "big.bin"), b"x" * 1001, 413, "upload_too_large"),
    ]
    assert (await call(jp_fetch, "PUT", sid, "files", "sub", "f.txt", raw=b"f"))[0] == 201
    bad += [(("PUT", sid, "files", "sub"), b"x", 400, "bad_path"),  # a directory
            (("PUT", sid, "files", "sub", "f.txt", "x"), b"x", 400, "bad_path"),  # under a file
            (("PUT", sid, "files", "sub/"), b"x", 400, "bad_path"),
            (("GET", sid, "files", "n" * 300), None, 400, "bad_path"),  # over NAME_MAX
            (("DELETE", sid, "files", "n" * 300), None, 400, "bad_path")]
    kernels = len(jp_serverapp.kernel_manager)
    for (method, *path), raw, status, reason in bad:
        code, reply = await call(jp_fetch, method, *path, raw=raw)
        assert (code, reply["reason"]) == (status, reason), (path, (raw or b"")[:40], reply)
        assert reply["message"] and "Traceback" not in reply["message"]
    assert len(jp_serverapp.kernel_manager) == kernels  # no orphan kernel
    listing = (await call(jp_fetch, "GET", sid, "files"))[1]
    assert [f["path"] for f in listing] == ["sub/f.txt"]  # no partial or temporary file


async def test_a_file_the_system_refuses_is_a_400(
    jp_fetch: Fetch, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = (await new_session(jp_fetch))["id"]
    await call(jp_fetch, "PUT", sid, "files", "locked.txt", raw=b"x")
    # Tests run as root, whom permissions never stop: refuse as the system would (EACCES).
    # The files routes open and unlink by name relative to a folder's descriptor.
    original_open, original_unlink = os.open, os.unlink

    def denied(original: Any) -> Any:
        def call_or_deny(path: Any, *args: Any, **kwargs: Any) -> Any:
            if path == "locked.txt":  # also the folder sub/locked.txt, made read-only
                raise PermissionError(13, "Permission denied")
            return original(path, *args, **kwargs)
        return call_or_deny

    monkeypatch.setattr(session_files.os, "open", denied(original_open))
    monkeypatch.setattr(session_files.os, "unlink", denied(original_unlink))
    for method, *path in (("GET", "locked.txt"), ("DELETE", "locked.txt"),
                          ("PUT", "sub", "locked.txt", "new.txt")):
        code, reply = await call(jp_fetch, method, sid, "files", *path,
                                 raw=b"x" if method == "PUT" else None)
        assert (code, reply["reason"]) == (400, "file_error"), (method, reply)
        assert "Permission denied" in reply["message"]


@pytest.mark.parametrize("ci_config", [{"session_pool": 0, "max_sessions": 1}])
async def test_max_sessions_answers_429(jp_fetch: Fetch) -> None:
    await new_session(jp_fetch)
    code, reply = await call(jp_fetch, "POST", body={})
    assert code == 429 and "max_sessions" in reply["message"]


@pytest.mark.parametrize("ci_config", [{"session_pool": 0, "session_idle_timeout": 1.0}])
async def test_idle_sessions_are_culled(jp_fetch: Fetch, jp_serverapp: Any) -> None:
    session, held = await new_session(jp_fetch), await new_session(jp_fetch)
    in_use = jp_serverapp.web_app.settings["jupyter_ci_sessions"].get(held["id"])
    async with in_use.lock:  # as an ask holds it between model calls
        in_use.last_activity -= 100  # long past the idle timeout
        for _ in range(40):
            await asyncio.sleep(0.25)
            if session["kernel_id"] not in jp_serverapp.kernel_manager:
                break
        await asyncio.sleep(0.5)  # two more rounds of the culler (every 0.25 s here)
        assert (await call(jp_fetch, "GET", held["id"]))[0] == 200
    assert (await call(jp_fetch, "GET", session["id"]))[0] == 404
    assert session["kernel_id"] not in jp_serverapp.kernel_manager


async def test_the_history_exports_as_a_valid_notebook(jp_fetch: Fetch) -> None:
    sid = (await new_session(jp_fetch))["id"]
    assert stdout(await run(jp_fetch, sid, "print('hello 😀')")) == "hello 😀\n"
    await run(jp_fetch, sid, "1 / 0")
    await run(jp_fetch, sid, "from IPython.display import HTML, display\ndisplay(HTML('<b>x</b>'))")
    code, nb = await call(jp_fetch, "GET", sid, "notebook")
    assert code == 200
    nbformat.validate(nb)
    assert [c["source"] for c in nb["cells"]][:2] == ["print('hello 😀')", "1 / 0"]
    assert nb["cells"][1]["outputs"][0]["output_type"] == "error"


@pytest.mark.parametrize("ci_config", [{"session_pool": 1}])
async def test_a_pooled_kernel_makes_creation_fast_and_runs_in_its_own_directory(
    jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    manager = jp_serverapp.web_app.settings["jupyter_ci_sessions"]
    assert not manager.kernels.pool  # nothing is started before the REST API is used
    started = time.monotonic()
    await new_session(jp_fetch)  # the first one starts cold and fills the pool
    cold = time.monotonic() - started
    for _ in range(120):
        if manager.kernels.pool:
            break
        await asyncio.sleep(0.25)
    assert manager.kernels.pool, "the pool never filled"
    pooled = manager.kernels.pool[0].kernel_id
    started = time.monotonic()
    session = await new_session(jp_fetch)
    took = time.monotonic() - started
    where = stdout(await run(jp_fetch, session["id"], "import os\nprint(os.getcwd())")).strip()
    assert Path(where).name == session["id"] and session["kernel_id"] == pooled
    # Measured against the cold start of this run (a kernel's start is most of it).
    assert took < cold / 2, (took, cold)
    # A pooled kernel shut down from elsewhere (JupyterLab lists it) is never handed out.
    for _ in range(120):
        if manager.kernels.pool:
            break
        await asyncio.sleep(0.25)
    gone = manager.kernels.pool[0]
    await jp_serverapp.kernel_manager.shutdown_kernel(gone.kernel_id, now=True)
    fresh = await new_session(jp_fetch)
    assert fresh["kernel_id"] != gone.kernel_id and not gone.directory.exists()
    assert (await run(jp_fetch, fresh["id"], "1"))["status"] == "ok"


async def test_a_missing_or_wrong_token_is_a_403_saying_so(
    jp_serverapp: Any, http_server_client: Any, jp_base_url: str
) -> None:
    for headers in ({}, {"Authorization": "token wrong-token"}):
        for method, tail in ROUTES:
            body = b'{"code": "1"}' if method in ("POST", "PUT") else None
            response = await http_server_client.fetch(
                f"{jp_base_url}jupyter-ci/{tail}", method=method, body=body, headers=headers,
                raise_error=False)
            reply = json.loads(response.body)
            assert response.code == 403 and reply["reason"] == "invalid_token", (tail, reply)
            assert "missing or invalid token" in reply["message"] and "_xsrf" not in reply[
                "message"]
            openapi_check.check(method, response.effective_url, response.code,
                                response.headers["Content-Type"], response.body)


async def test_under_a_jupyterhub_a_403_says_to_send_a_hub_token_not_lab_sh(
    jp_serverapp: Any, http_server_client: Any, jp_base_url: str,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a spawner sets it for a user's server (the server's own token leaves os.environ).
    monkeypatch.setenv("JUPYTERHUB_API_URL", "http://127.0.0.1:8081/hub/api")
    response = await http_server_client.fetch(
        f"{jp_base_url}jupyter-ci/sessions", method="POST", body=b"{}",
        headers={"Authorization": "token wrong-token"}, raise_error=False)
    reply = json.loads(response.body)
    assert response.code == 403 and reply["reason"] == "invalid_token", reply
    assert "JupyterHub API token" in reply["message"] and "/hub/token" in reply["message"]
    assert "lab.sh" not in reply["message"]


@pytest.mark.parametrize(("path", "body", "known"), [
    ((), {"kernel": "python3"}, "cwd_name, env, kernel_name"),
    (("{sid}", "execute"), {"code": "import time; time.sleep(30)", "tiemout": 1},
     "cells, code, env, language, timeout"),
    (("{sid}", "ask"), {"prompt": "hi", "modle": "openai:x", "max_step": 2},
     "approve, max_fixes, max_steps, model, prompt, timeout"),
])
async def test_unknown_fields_are_a_400_listing_the_known_ones(
    jp_fetch: Fetch, jp_serverapp: Any, path: tuple[str, ...], body: dict[str, Any],
    known: str
) -> None:
    sid = (await new_session(jp_fetch))["id"] if path else ""
    kernels = len(jp_serverapp.kernel_manager)
    started = time.monotonic()
    status, reply = await call(jp_fetch, "POST", *(p.format(sid=sid) for p in path), body=body)
    assert (status, reply["reason"]) == (400, "unknown_field"), reply
    unknown = ", ".join(sorted(set(body) - set(known.split(", "))))
    assert f"Unknown field(s): {unknown}" in reply["message"], reply
    assert f"known: {known}" in reply["message"], reply
    assert time.monotonic() - started < 5 and len(jp_serverapp.kernel_manager) == kernels


async def test_tracebacks_in_rest_outputs_carry_no_terminal_colours(jp_fetch: Fetch) -> None:
    sid = (await new_session(jp_fetch))["id"]
    result = await run(jp_fetch, sid, "def f():\n    return 1 / 0\nf()")
    error = next(o for o in result["outputs"] if o["output_type"] == "error")
    assert error["ename"] == "ZeroDivisionError" and len(error["traceback"]) > 1
    assert not any("\x1b" in line for line in error["traceback"]), error["traceback"]
    streamed = await stream(jp_fetch, sid, "1 / 0")
    assert "\\u001b" not in json.dumps(streamed) and "ZeroDivisionError" in json.dumps(streamed)
    _, nb = await call(jp_fetch, "GET", sid, "notebook")
    assert "\x1b" not in json.dumps(nb, ensure_ascii=False)
