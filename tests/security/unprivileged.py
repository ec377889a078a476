"""Run real `jupyter server` processes as an unprivileged user, for tests of /proc defences.

Root reads every process's /proc files, dumpable or not, so a test of the server's
non-dumpable hardening is only meaningful when the server and its kernels run as someone
else. As root we drop to uid/gid 65534 (`nobody`) with util-linux's `setpriv`. That user
cannot enter /root, where a pyenv interpreter (and so a venv made from it) may live; then
we make a venv in a temp dir from the system's Python of the same X.Y and add this
environment's site-packages to it with a .pth file: the same installed packages and the
same working tree, on an interpreter the user can run.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.kernelrun import connection_file

NOBODY = 65534
# setpriv keeps root's capabilities until its own execve, so a program it execs directly
# is opened with root's file access (a venv under /root would start, then fail to start
# kernels). `env` execs the program as the user proper.
SETPRIV = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "env"]
REPO = Path(__file__).resolve().parents[2]
_PROBE = "import jupyter_server, ipykernel, matplotlib, jupyter_ci"


@dataclass(frozen=True)
class User:
    """How to start a process as the unprivileged user, and a directory it owns."""

    prefix: list[str]
    python: str
    root: Path
    uid: int
    gid: int

    def own(self, *paths: Path) -> None:
        """Give `paths` to the user (as root; a no-op when we are that user)."""
        if os.geteuid() == 0:
            for path in paths:
                os.chown(path, self.uid, self.gid)


def _cannot(why: str) -> NoReturn:
    """Skip a test this machine cannot run; on CI (CI=true), where it must run, fail."""
    # CI's machines are Linux, root, with setpriv (util-linux): a skip there would hide a
    # defence that no longer gets tested.
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run this test, but {why}", pytrace=False)
    pytest.skip(why)


def find_user(root: Path) -> User:
    """Return a way to run servers unprivileged from `root`, or skip (fail on CI) saying why
    not."""
    if not sys.platform.startswith("linux"):
        _cannot("the /proc defences exist on Linux only")
    if os.geteuid() != 0:
        return User([], sys.executable, root, os.getuid(), os.getgid())
    if shutil.which("setpriv") is None:
        _cannot("running as root, and no setpriv to drop to an unprivileged user")
    os.chown(root, NOBODY, NOBODY)
    problems = []
    for python in _interpreters(root):
        problem = _probe(python, root)
        if problem is None:
            print(f"servers run as uid {NOBODY} via setpriv with {python}")
            return User(SETPRIV, python, root, NOBODY, NOBODY)
        problems.append(f"{python}: {problem}")
    _cannot("no interpreter uid 65534 can run with this environment's packages: "
            + "; ".join(problems))


#: Who runs a test's server: an unprivileged user always, and root when the tests run as
#: root (as many container images run Jupyter), for defences that differ for uid 0.
WHO = ["unprivileged", *(["root"] if os.geteuid() == 0 else [])]


def user_named(who: str, root: Path) -> User:
    """Return root itself (`who` "root") or the unprivileged user, with the folder `root`."""
    return User([], sys.executable, root, 0, 0) if who == "root" else find_user(root)


def _interpreters(root: Path) -> Iterator[str]:
    """Yield this interpreter, then a venv in `root` on a system Python of the same X.Y."""
    yield sys.executable
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = shutil.which(version, path="/usr/local/bin:/usr/bin:/bin")
    if base is None:
        return
    venv = root / "venv"
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    parent = sysconfig.get_paths()["purelib"]
    _let_others_traverse(Path(parent), REPO)
    site = next(venv.glob("lib/python*/site-packages"))
    # addsitedir (not a bare path) so the parent's own .pth files (the editable install) run.
    (site / "_parent_env.pth").write_text(f"import site; site.addsitedir({parent!r})\n")
    yield str(venv / "bin" / "python")


def _let_others_traverse(*paths: Path) -> None:
    """Let the user pass through the private directories above `paths` until the tests end."""
    # A checkout in a 0700 directory (`mktemp -d`) hides this environment's packages and the
    # working tree from the user: only traversal (o+x) is added, and taken back at exit.
    for path in paths:
        for folder in path.resolve().parents:
            mode = folder.stat().st_mode
            if not mode & stat.S_IXOTH:
                folder.chmod(mode | stat.S_IXOTH)
                atexit.register(folder.chmod, stat.S_IMODE(mode))


def _probe(python: str, cwd: Path) -> str | None:
    """Return why the user cannot import the server's packages with `python`, or None."""
    done = subprocess.run([*SETPRIV, python, "-c", _PROBE], cwd=cwd, env=_base_env(cwd),
                          capture_output=True, text=True, timeout=60)
    lines = (done.stderr.strip() or f"exit {done.returncode}").splitlines()
    return None if done.returncode == 0 else lines[-1]


def _base_env(home: Path) -> dict[str, str]:
    """A minimal environment: nothing of the test process's own leaks into the server."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1"}


@dataclass
class Server:
    """A running `jupyter server` and what a test needs to talk to it."""

    proc: subprocess.Popen[bytes]
    home: Path
    log: Path
    token: str
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """Return the server's base URL, with a trailing slash."""
        return str(self.info["url"])

    def request(self, path: str, method: str = "GET") -> tuple[int, Any]:
        """Send one token-authenticated request; return status and decoded JSON body."""
        data = b"{}" if method == "POST" else None
        request = urllib.request.Request(f"{self.url}{path}", method=method, data=data,
                                         headers={"Authorization": f"token {self.token}"})
        for _ in range(100):
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return response.status, json.loads(response.read() or b"null")
            except urllib.error.HTTPError as err:
                return err.code, err.read().decode()
            except urllib.error.URLError:
                time.sleep(0.1)  # the info file is written before the port is bound
        raise AssertionError(f"{self.url}{path} is not reachable")

    def start_kernel(self) -> Path:
        """Start a kernel through the REST API; return its connection file.

        An unboxed kernel's is in the runtime folder; a boxed one's (the default for the
        kernels a notebook gets) in its box's private folder (sandbox/provisioner.py).
        """
        status, body = self.request("api/kernels", "POST")
        assert status == 201, body
        return connection_file(Path(self.info["runtime_dir"]), str(body["id"]),
                               self.home.stat().st_uid)

    def stop(self) -> str:
        """Stop the server (it shuts its kernels down); return its log."""
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        return self.log.read_text(errors="replace")


def start_server(user: User, name: str, env: dict[str, str], ci: dict[str, Any],
                 limits: tuple[str, ...] = ()) -> Server:
    """Start `jupyter server --port=0` as the user, with `env` and `c.JupyterCI` = `ci`.

    `limits` are `prlimit` options for the server's process (e.g. `--nofile=1024`).
    """
    home = user.root / name
    config, runtime, data = home / "config", home / "runtime", home / "data"
    for folder in (home, config, runtime, data):
        folder.mkdir()
        user.own(folder)
    (config / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}}, "JupyterCI": ci}))
    full_env = {**_base_env(home), "JUPYTER_CONFIG_DIR": str(config),
                "JUPYTER_RUNTIME_DIR": str(runtime), "JUPYTER_DATA_DIR": str(data), **env}
    token = f"jupyter-{name}-token"
    log = home / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*(["prlimit", *limits, "--"] if limits else []), *user.prefix, user.python,
             "-m", "jupyter_server", "--ServerApp.open_browser=False",
             "--port=0", "--ip=127.0.0.1", f"--IdentityProvider.token={token}",
             "--ServerApp.log_level=DEBUG", f"--ServerApp.root_dir={home}",
             *(["--allow-root"] if user.uid == 0 else [])],
            cwd=home, env=full_env, stdout=out, stderr=subprocess.STDOUT)
    return Server(proc, home, log, token)


@contextlib.contextmanager
def running(who: str, ci: dict[str, Any], env: dict[str, str] | None = None
            ) -> Iterator[Server]:
    """Run a server as `who` (see WHO) with `c.JupyterCI` = `ci`, answering, in a temp dir."""
    root = Path(tempfile.mkdtemp(prefix="jupyter-ci-security-"))
    try:
        started = start_server(user_named(who, root), who, env or {}, ci)
        try:
            wait_ready(started)
            started.request("api/status")  # the info file is written before the port is bound
            yield started
        finally:
            started.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def wait_ready(server: Server, timeout: float = 60) -> None:
    """Wait for the server's runtime info file, read it, and wait until its port listens."""
    runtime = server.home / "runtime"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise AssertionError(f"jupyter server exited:\n{server.log.read_text()[-3000:]}")
        for info in runtime.glob("jpserver-*.json"):
            try:
                server.info = {**json.loads(info.read_text()), "runtime_dir": str(runtime)}
            except ValueError:
                continue  # still being written
            # Jupyter writes the file before its loop binds the port: a request sent at once
            # on a loaded machine was refused (CI saw it).
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", int(server.info["port"])), timeout=1):
                return
        time.sleep(0.1)
    raise AssertionError(f"jupyter server did not start:\n{server.log.read_text()[-3000:]}")
