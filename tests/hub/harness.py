"""A real JupyterHub for tests: its proxy, LocalProcessSpawner, Unix users, jupyter-ci's service.

The Hub runs as root (as the tests do in CI) from a temp dir, with configurable-http-proxy
from tests/hub-proxy (npm ci, scripts/setup-env.sh), DummyAuthenticator, and the config the
docs show (docs/hub/jupyterhub_config.py), loaded unchanged after the test's own lines (ports,
the proxy's path, the users' interpreter) and followed by the test users' budgets. Each
user is a real Unix account made with useradd for the module and removed after; their
servers run as them (LocalProcessSpawner), on an interpreter they can reach (the venv of
these tests lives under /root: tests/security/unprivileged.py builds one from the system
Python). A service of the test's own ("tester") holds the token that drives the Hub's API.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.security.unprivileged import REPO, _cannot, _let_others_traverse

PROXY = REPO / "tests" / "hub-proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
DOCS_CONFIG = REPO / "docs" / "hub" / "jupyterhub_config.py"
#: The provider key the Hub's service holds: it must appear nowhere a user can look.
HUB_KEY = "sk-test-HUB-held-key-7f3a9c"


def free_port() -> int:
    """Return a TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class UnixUser:
    """A user account made for the tests."""

    name: str
    uid: int
    home: Path


def make_users(names: list[str]) -> list[UnixUser]:
    """Create fresh Unix accounts `names` (removing leftovers of an earlier run first)."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        _cannot("the JupyterHub tests create Unix users: they need root and useradd")
    made = []
    for name in names:
        remove_user(name)
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True)
        entry = pwd.getpwnam(name)
        made.append(UnixUser(name, entry.pw_uid, Path(entry.pw_dir)))
    return made


def remove_user(name: str) -> None:
    """Remove a user, their processes and their home, if they exist."""
    with contextlib.suppress(KeyError):
        pwd.getpwnam(name)
        # pkill does not wait, and userdel refuses a user whose processes still run (exit 8,
        # then useradd's exit 9: the name is taken): wait until they are gone.
        deadline = time.monotonic() + 30
        while subprocess.run(["pkill", "-KILL", "-u", name], check=False).returncode == 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the processes of the test user {name} do not end")
            time.sleep(0.1)
        done = subprocess.run(["userdel", "--remove", "--force", name], check=False,
                              capture_output=True, text=True)
        if done.returncode not in (0, 12):  # 12: the home could not be removed (none made)
            raise RuntimeError(f"userdel {name}: {done.stderr.strip()} (exit {done.returncode})")


def reachable_python(root: Path, user: UnixUser) -> str:
    """Return an interpreter `user` can run with this environment's packages."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = shutil.which(version, path="/usr/local/bin:/usr/bin:/bin")
    if base is None:
        _cannot(f"no system {version} that the test users could run")
    venv = root / "venv"
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    import sysconfig

    parent = sysconfig.get_paths()["purelib"]
    _let_others_traverse(Path(parent), REPO)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "_parent_env.pth").write_text(f"import site; site.addsitedir({parent!r})\n")
    python = str(venv / "bin" / "python")
    done = subprocess.run(["setpriv", f"--reuid={user.uid}", f"--regid={user.uid}",
                           "--clear-groups", "env", python, "-c",
                           "import jupyterhub.singleuser, jupyter_ci, ipykernel"],
                          capture_output=True, text=True, cwd=user.home, timeout=120)
    if done.returncode:
        _cannot(f"{user.name} cannot run {python}: {done.stderr.strip()[-500:]}")
    return python


@dataclass
class Hub:
    """A running JupyterHub, and how a test talks to it."""

    proc: subprocess.Popen[bytes]
    root: Path
    url: str
    token: str = field(repr=False)
    service_url: str = ""

    @property
    def log(self) -> str:
        """Return the Hub's log (its services' and users' servers' too) so far."""
        return (self.root / "hub.log").read_text(errors="replace")

    def request(self, method: str, path: str, token: str | None = None,
                body: object = None, timeout: float = 60) -> tuple[int, Any]:
        """Send one request through the proxy (path below its root); return status, JSON."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}{path.lstrip('/')}", method=method, data=data,
            headers={"Authorization": f"token {token or self.token}",
                     "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
                status = response.status
        except urllib.error.HTTPError as err:
            raw, status = err.read(), err.code
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def api(self, method: str, path: str, body: object = None) -> Any:
        """Call the Hub's API with the tester's token; raise unless it succeeds."""
        status, reply = self.request(method, f"hub/api/{path.lstrip('/')}", body=body)
        assert status < 300, (method, path, status, reply)
        return reply

    def token_for(self, user: str, scopes: list[str]) -> str:
        """Make an API token of `user` with `scopes` (the Hub keeps those the user holds)."""
        made = self.api("POST", f"users/{user}/tokens",
                        {"scopes": scopes, "expires_in": 3600, "note": "jupyter-ci tests"})
        return str(made["token"])

    def start_server(self, user: str, timeout: float = 180) -> None:
        """Start `user`'s server and wait until the Hub calls it ready."""
        status, reply = self.request("POST", f"hub/api/users/{user}/server")
        assert status in (201, 202, 400), (status, reply)  # 400: it runs already
        self.wait_server(user, True, timeout)

    def stop_server(self, user: str, timeout: float = 60) -> None:
        """Stop `user`'s server and wait until it is gone."""
        status, reply = self.request("DELETE", f"hub/api/users/{user}/server")
        assert status in (202, 204, 400), (status, reply)
        self.wait_server(user, False, timeout)

    def wait_server(self, user: str, ready: bool, timeout: float) -> None:
        """Wait for `user`'s server to be ready (or gone)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the Hub exited:\n{self.log[-4000:]}")
            model = self.api("GET", f"users/{user}")
            server = (model.get("servers") or {}).get("")
            if (server is not None and server.get("ready")) == ready and not model.get(
                    "pending"):
                return
            time.sleep(0.3)
        raise AssertionError(f"{user}'s server is not {'ready' if ready else 'gone'}:\n"
                             f"{self.log[-4000:]}")

    def stop(self) -> None:
        """Stop the Hub (it stops the users' servers, its proxy and its services)."""
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def hub_config(root: Path, python: str, users: list[str], admin: str, token: str,
               ports: dict[str, int], budgets: dict[str, dict[str, object]],
               settings: dict[str, object]) -> str:
    """Write the test's jupyterhub_config.py: its lines, the docs' config, the budgets."""
    config_path = root / "config"
    config_path.mkdir()
    (config_path / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}}}))
    config_path.chmod(0o755)
    text = f"""
import json
import jupyter_ci.hub.deploy as deploy

c = get_config()  # noqa: F821
# The test's own: ports, the proxy, who logs in, the users' interpreter.
deploy.DEFAULT_URL = "http://127.0.0.1:{ports['service']}"
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {ports['public']}
c.JupyterHub.hub_port = {ports['hub']}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{ports['proxy_api']}"
c.ConfigurableHTTPProxy.command = [{str(PROXY)!r}]
c.JupyterHub.db_url = "sqlite:///{root}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{root}/cookie_secret"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = {set(users)!r}
c.Authenticator.admin_users = {{{admin!r}}}
c.Spawner.cmd = [{python!r}, "-m", "jupyterhub.singleuser"]
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
c.Spawner.environment = {{"JUPYTER_CONFIG_PATH": {str(config_path)!r},
                          "JUPYTERHUB_ACTIVITY_INTERVAL": "1"}}
c.JupyterHub.services = [{{"name": "tester", "api_token": {token!r}}}]
c.JupyterHub.load_roles = [{{"name": "tester", "services": ["tester"], "scopes": [
    "admin:users", "admin:servers", "admin:groups", "tokens", "access:servers",
    "read:hub"]}}]

load_subconfig({str(DOCS_CONFIG)!r})  # noqa: F821

# The test users' budgets, added to the docs' policy.
service = next(s for s in c.JupyterHub.services if s["name"] == "jupyter-ci")
policy = json.loads(service["environment"]["JUPYTER_CI_HUB_POLICY"])
policy.setdefault("users", {{}}).update({budgets!r})
service["environment"]["JUPYTER_CI_HUB_POLICY"] = json.dumps(policy)
# The service's settings (a test sees groups it changed at once: users_ttl 0).
service["environment"]["JUPYTER_CI_HUB_SETTINGS"] = json.dumps({settings!r})
"""
    path = root / "jupyterhub_config.py"
    path.write_text(text)
    return str(path)


@contextlib.contextmanager
def running_hub(root: Path, python: str, users: list[str], admin: str,
                env: dict[str, str], budgets: dict[str, dict[str, object]],
                settings: dict[str, object] | None = None) -> Iterator[Hub]:
    """Run JupyterHub from `root` until the block ends (`settings`: the service's)."""
    if not PROXY.exists():
        _cannot("configurable-http-proxy is not installed: (cd tests/hub-proxy && npm ci)")
    ports = {name: free_port() for name in ("public", "hub", "proxy_api", "service")}
    token = secrets.token_hex(16)
    config = hub_config(root, python, users, admin, token, ports, budgets, settings or {})
    log = (root / "hub.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterhub", "-f", config, "--log-level=DEBUG"],
        cwd=root, stdout=log, stderr=subprocess.STDOUT,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
             "HOME": str(root), "LANG": "C.UTF-8", **env})
    hub = Hub(proc, root, f"http://127.0.0.1:{ports['public']}/", token,
              f"http://127.0.0.1:{ports['service']}/services/jupyter-ci/")
    try:
        _wait_up(hub)
        yield hub
    finally:
        hub.stop()
        log.close()


def _wait_up(hub: Hub, timeout: float = 120) -> None:
    """Wait until the Hub's API and the jupyter-ci service answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if hub.proc.poll() is not None:
            raise AssertionError(f"the Hub exited:\n{hub.log[-4000:]}")
        with contextlib.suppress(OSError, AssertionError):
            hub.api("GET", "info")
            status, _ = hub.request("GET", "services/jupyter-ci/policy")
            if status == 403:  # the service answers (the tester is not a user)
                return
        time.sleep(0.3)
    raise AssertionError(f"the Hub did not start:\n{hub.log[-4000:]}")
