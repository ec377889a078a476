"""Finding 1: code in a kernel cannot read the provider key from the server's process.

Two real servers run side by side as an unprivileged user (see unprivileged.py): one as
shipped (non-dumpable, with a second key in a key file) and a control with
`harden_process=False`, against which the same attack must find the key, so the test
can fail. The attack is what one line of model-written code could do: read the parent's
/proc/<pid>/environ and /proc/<pid>/mem, every readable /proc/*/environ and cmdline, and
its own os.environ, looking for anything shaped like a key.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient

from jupyter_ci import providers
from jupyter_ci.models.broker import ENV_TOKEN, ENV_URL
from tests.fakellm_wire import anthropic_events
from tests.security.unprivileged import Server, User, find_user, start_server, wait_ready

ANTHROPIC_MODEL = providers.PROVIDERS["anthropic"].default_model_id

ATTACK = r"""
import hashlib, json, os, re
def _attack():
    pid = int(os.environ.get("JPY_PARENT_PID") or os.getppid())
    blobs, denied = {}, {}
    def read(label, path):
        try:
            with open(path, "rb") as f:
                blobs[label] = f.read()
        except OSError as err:
            denied[label] = type(err).__name__
    read("server environ", f"/proc/{pid}/environ")
    try:
        with open(f"/proc/{pid}/maps") as f:
            maps = [line.split() for line in f.read().splitlines()]
        chunks = []
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            for fields in maps:  # writable heap, stack and anonymous memory
                if fields[1].startswith("rw") and (len(fields) < 6 or fields[5][0] == "["):
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    try:
                        mem.seek(start)
                        chunks.append(mem.read(min(end - start, 1 << 26)))
                    except OSError:
                        pass
        blobs["server mem"] = b"".join(chunks)
    except OSError as err:
        denied["server mem"] = type(err).__name__
    others = [p for p in os.listdir("/proc") if p.isdigit()]
    for p in others:
        for part in ("environ", "cmdline"):
            read(f"/proc/{p}/{part}", f"/proc/{p}/{part}")
    blobs["kernel os.environ"] = repr(dict(os.environ)).encode()
    shaped = re.compile(rb"sk-[A-Za-z0-9_-]{16,}")
    # Hashes, not values: the scan may meet real keys of other processes of this user.
    digest = lambda m: hashlib.sha256(m).hexdigest()
    found = {k: sorted({digest(m) for m in shaped.findall(v)}) for k, v in blobs.items()}
    st = lambda path: os.stat(path).st_uid
    return {"found": {k: v for k, v in found.items() if v}, "read": sorted(blobs),
            "denied": {k: v for k, v in denied.items() if k.startswith("server")},
            "server_pid": pid, "ppid": os.getppid(), "scanned": len(others),
            "server_environ_uid": st(f"/proc/{pid}/environ"),
            "own_environ_uid": st("/proc/self/environ"), "uid": os.getuid(),
            "own_environ_readable": bool(open("/proc/self/environ", "rb").read())}
print(json.dumps(_attack()))
"""

KERNEL_HEALTH = """
import ctypes, json
import matplotlib.pyplot as plt
plt.plot([1, 2, 3])
plt.show()
print(json.dumps({"dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)}))
"""

BROKER_CALL = f"""
import json, os, urllib.request
turn = {{"model": {ANTHROPIC_MODEL!r}, "messages": [{{"role": "user", "content": "hi"}}]}}
request = urllib.request.Request(
    os.environ[{ENV_URL!r}] + "/turn", data=json.dumps(turn).encode(),
    headers={{"Authorization": "Bearer " + os.environ[{ENV_TOKEN!r}],
              "Content-Type": "application/json"}})
with urllib.request.urlopen(request, timeout=30) as reply:
    print(reply.status if b'"reply"' in reply.read() else "no reply")
"""


@dataclass
class Upstream:
    """A stand-in Anthropic API on 127.0.0.1 that records the keys it was sent."""

    url: str = ""
    keys: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    """Serve GET /v1/models and a streamed POST /v1/messages, recording each request's key."""
    seen = Upstream()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._key()
            self._send("application/json", b'{"data": [], "has_more": false}')

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._key()
            stream = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data
                             in anthropic_events("hi", [], model="m", chunk_chars=8,
                                                 usage=(1, 1)))
            self._send("text/event-stream", stream.encode())

        def _key(self) -> None:
            # anthropic 2.x sends its key as a bearer token; older SDKs as x-api-key.
            bearer = self.headers.get("Authorization", "").removeprefix("Bearer ")
            seen.keys.append(self.headers.get("x-api-key", "") or bearer)

        def _send(self, kind: str, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Handler) as httpd:
        seen.url = f"http://127.0.0.1:{httpd.server_address[1]}"
        threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
        yield seen
        httpd.shutdown()


@dataclass
class Run:
    """What a test saw of one server: the attack's report, the config route, the log."""

    keys: dict[str, str]
    report: dict[str, Any]
    config: dict[str, Any]
    log: str
    health: dict[str, Any] = field(default_factory=dict)
    mimetypes: set[str] = field(default_factory=set)
    broker_status: str = ""


@pytest.fixture(scope="module")
def user() -> Iterator[User]:
    """The unprivileged user, with a temp dir it owns (outside root's 0700 pytest dirs)."""
    root = Path(tempfile.mkdtemp(prefix="jupyter-ci-security-"))
    try:
        yield find_user(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _fake_key(kind: str) -> str:
    """A key-shaped value made at run time, so no fixed string can satisfy the checks."""
    return f"sk-{kind}-{secrets.token_hex(16)}"


def _key_file(user: User, name: str, lines: list[str], mode: int) -> Path:
    """Write a key file the user owns, with `mode`."""
    path = user.root / f"{name}.env"
    path.write_text("\n".join(lines) + "\n")
    path.chmod(mode)
    user.own(path)
    return path


@pytest.fixture(scope="module")
def runs(user: User, upstream: Upstream) -> dict[str, Run]:
    """Start a hardened and a control server at once, attack each from a kernel."""
    keys = {name: _fake_key(name) for name in ("hardened", "file", "control", "refused",
                                               "boxed")}
    file_vars = [f"ANTHROPIC_API_KEY={keys['file']}", f"ANTHROPIC_BASE_URL={upstream.url}",
                 "FOO_TOKEN=not-a-provider-variable"]
    hardened_file = _key_file(user, "hardened", file_vars, 0o600)
    # The control's key file is readable by others: the server must refuse it.
    refused_file = _key_file(user, "refused", [f"ANTHROPIC_API_KEY={keys['refused']}"], 0o644)
    # The hardening guards unboxed kernels (a notebook the user chose to run unboxed, or a
    # server where no box can run): those two run unboxed. The third is a notebook kernel as
    # the server starts it by default, on a server without the hardening: its box alone
    # must keep the key from it.
    unboxed = {"notebook_sandbox": "never"}
    servers = {
        "hardened": start_server(user, "hardened", {"OPENAI_API_KEY": keys["hardened"]},
                                 {**unboxed, "key_file": str(hardened_file)}),
        "control": start_server(user, "control", {"OPENAI_API_KEY": keys["control"]},
                                {**unboxed, "harden_process": False,
                                 "key_file": str(refused_file)}),
        "boxed": start_server(user, "boxed", {"OPENAI_API_KEY": keys["boxed"]},
                              {"harden_process": False}),
    }
    try:
        return {name: _exercise(server, keys) for name, server in servers.items()}
    finally:
        for server in servers.values():
            if server.proc.poll() is None:
                server.stop()


def _exercise(server: Server, keys: dict[str, str]) -> Run:
    """Attack the server from a kernel it started; check the kernel works; stop it."""
    wait_ready(server)
    status, config = server.request("jupyter-ci/config")
    assert status == 200, config
    client = BlockingKernelClient()
    client.load_connection_file(str(server.start_kernel()))
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        out, _ = _execute(client, ATTACK)
        run = Run(keys, json.loads(out), config, "")
        health, mimetypes = _execute(client, KERNEL_HEALTH)
        run.health, run.mimetypes = json.loads(health), mimetypes
        if ANTHROPIC_MODEL in config["models"]:
            run.broker_status = _execute(client, BROKER_CALL)[0].strip()
    finally:
        client.stop_channels()
    run.log = server.stop()
    return run


def _execute(client: BlockingKernelClient, code: str) -> tuple[str, set[str]]:
    """Run code in the kernel; return its stdout and the mimetypes it displayed."""
    out: list[str] = []
    mimetypes: set[str] = set()

    def hook(msg: dict[str, Any]) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream" and content["name"] == "stdout":
            out.append(content["text"])
        elif kind in ("display_data", "execute_result"):
            mimetypes.update(content["data"])
        elif kind == "error":
            raise AssertionError("\n".join(content["traceback"]))

    reply = client.execute_interactive(code, output_hook=hook, timeout=120)
    assert reply["content"]["status"] == "ok", reply["content"]
    return "".join(out), mimetypes


def _leaks(run: Run, *names: str) -> list[str]:
    """Say where the attack found any of the named keys."""
    digests = {name: hashlib.sha256(run.keys[name].encode()).hexdigest() for name in names}
    return [f"{name} in {where}" for name, digest in digests.items()
            for where, hits in run.report["found"].items() if digest in hits]


def test_kernel_cannot_read_the_key_from_a_hardened_server(runs: dict[str, Run]) -> None:
    run = runs["hardened"]
    assert _leaks(run, "hardened", "file") == []
    assert run.report["ppid"] == run.report["server_pid"]
    # The doors are shut, not missing: the server's files are there, and root's.
    assert run.report["denied"] == {"server environ": "PermissionError",
                                    "server mem": "PermissionError"}
    assert run.report["server_environ_uid"] == 0 != run.report["uid"]
    assert run.report["scanned"] > 3 and "kernel os.environ" in run.report["read"]


def test_control_server_without_hardening_leaks_to_the_same_attack(
    runs: dict[str, Run],
) -> None:
    run = runs["control"]
    # The test can fail: unhardened, the same reads find the key in both places.
    assert {"control in server environ", "control in server mem"} <= set(_leaks(run, "control"))
    assert run.report["server_environ_uid"] == run.report["uid"]
    assert _leaks(run, "refused") == []


def test_kernels_of_a_hardened_server_are_ordinary_processes(runs: dict[str, Run]) -> None:
    for run in runs.values():
        assert run.health == {"dumpable": 1}
        assert "image/png" in run.mimetypes  # matplotlib's inline backend
        assert run.report["own_environ_uid"] == run.report["uid"]
        assert run.report["own_environ_readable"]


def test_key_file_key_reaches_the_model_service_and_no_kernel(
    runs: dict[str, Run], upstream: Upstream
) -> None:
    run = runs["hardened"]
    assert ANTHROPIC_MODEL in run.config["models"]
    assert run.broker_status == "200"
    assert upstream.keys == [run.keys["file"]]
    assert _leaks(run, "file") == []
    assert "ignoring FOO_TOKEN, not a provider variable" in run.log
    assert "read ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL from the key file" in run.log


def test_key_file_readable_by_others_is_refused(runs: dict[str, Run]) -> None:
    run = runs["control"]
    refused = next(line for line in run.log.splitlines() if "Refusing the key file" in line)
    assert "refused.env" in refused and "(mode 644)" in refused
    assert "chmod 600" in refused
    assert not any(model.startswith("anthropic:") for model in run.config["models"])


def test_no_server_logged_a_key(runs: dict[str, Run]) -> None:
    for run in runs.values():
        assert not [name for name, key in run.keys.items() if key in run.log]


def test_a_notebook_kernel_is_boxed_by_default_and_its_box_keeps_the_key_from_it(
    runs: dict[str, Run],
) -> None:
    run = runs["boxed"]
    # Not hardened: the control shows this attack finds the key from an unboxed kernel.
    assert _leaks(run, "boxed") == []
    assert "kernel os.environ" in run.report["read"]
    # Its own PID namespace: it sees its box's few processes, not the server's or others'.
    assert run.report["scanned"] <= 4, run.report
