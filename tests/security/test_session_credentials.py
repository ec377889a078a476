"""A REST session's kernel holds no model credential (issue 31.7): its asks run in the server.

The attack: code sent through `execute` looks for every way to the model service its
kernel's environment and files give it (a broker token, the service's URL, its socket inside
a box, the server's own socket and port as an unboxed kernel could guess them) and tries a
model call with each. Before, it made model calls on the operator's key with any model name.
Boxed and unboxed, cold and from the pool; a notebook kernel keeps its credential.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_ci.models.broker import ENV_TOKEN, ENV_URL
from jupyter_ci.server.sandbox.box import SOCKET_DIR
from jupyter_ci.server.sandbox.environ import ENV_BROKER_SOCKET
from tests.fakellm import FakeLLM, Turn
from tests.nbrun import TEST_KEY, session_server_config
from tests.test_sessions import Fetch, call, new_session, run, stdout

#: Run in the session: try the model service with whatever the kernel has, say what came back.
ATTACK = r"""
import glob, http.client, json, os, socket
env = dict(os.environ)
with open("/proc/self/environ", "rb") as f:  # what the kernel was started with
    env.update(line.decode().split("=", 1) for line in f.read().split(b"\0") if b"=" in line)
tokens = sorted({v for k, v in env.items() if "TOKEN" in k or "KEY" in k} | {""})
urls = {u for u in (env.get("JUPYTER_CI_BROKER_URL"), %(url)r) if u}
socks = {s for s in (env.get("JUPYTER_CI_BROKER_SOCKET"), env.get("JUPYTER_CI_SANDBOX_BROKER"),
                     %(socket)r, *glob.glob(%(socket_dir)r + "/*")) if s}
turn = json.dumps({"model": "openai:gpt-test",
                   "messages": [{"role": "user", "content": "spend the operator's money"}]})

class Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=20)
        self.path = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(20)
        self.sock.connect(self.path)

def post(connection, path, token):
    try:
        connection.request("POST", path + "/turn", turn, {
            "Authorization": "Bearer " + token, "Content-Type": "application/json"})
        reply = connection.getresponse()
        reply.read()
        return reply.status
    except OSError as error:
        return type(error).__name__

tried = []
for token in tokens:
    for url in urls:
        host, _, path = url.split("://", 1)[1].partition("/")
        tried.append([url, post(http.client.HTTPConnection(host, timeout=20), "/" + path, token)])
    for sock in socks:
        tried.append([sock, post(Unix(sock), "/jupyter-ci/broker", token)])
names = sorted(k for k in env if k.startswith("JUPYTER_CI_BROKER") or k in (
    "JUPYTER_CI_SANDBOX_BROKER", "JUPYTER_CI_MODEL", "JUPYTER_CI_PRICES"))
print(json.dumps({"names": names, "tokens": len(tokens) - 1, "tried": tried}))
"""

CASES: dict[str, dict[str, Any]] = {
    "boxed": {"session_sandbox": "auto"},
    "unboxed": {"session_sandbox": "never"},
    "boxed-pooled": {"session_sandbox": "auto", "session_pool": 1},
    "unboxed-pooled": {"session_sandbox": "never", "session_pool": 1},
}


@pytest.fixture(params=list(CASES))
def case(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM, case: str) -> Config:
    """A server holding the operator's key, its model the fake's."""
    config: Config = session_server_config(monkeypatch, {
        "OPENAI_API_KEY": TEST_KEY, "OPENAI_BASE_URL": fake.openai_base_url})
    for name, value in CASES[case].items():
        setattr(config.JupyterCI, name, value)
    return config


async def _session(jp_fetch: Fetch, jp_serverapp: Any, case: str) -> dict[str, Any]:
    """Start the session the case says: cold, or taken from the pool."""
    if not case.endswith("pooled"):
        return await new_session(jp_fetch)
    manager = jp_serverapp.web_app.settings["jupyter_ci_sessions"]
    first = await new_session(jp_fetch)  # the pool fills from the first session on
    deadline = time.monotonic() + 120  # a hang guard only
    while not manager.kernels.pool:
        assert time.monotonic() < deadline, "the pool never filled"
        await asyncio.sleep(0.1)
    pooled = manager.kernels.pool[0].kernel_id
    session = await new_session(jp_fetch)
    assert session["kernel_id"] == pooled and first["kernel_id"] != pooled
    return session


async def test_code_in_a_session_cannot_call_the_model_service(
    jp_fetch: Fetch, jp_serverapp: Any, fake: FakeLLM, case: str
) -> None:
    session = await _session(jp_fetch, jp_serverapp, case)
    assert session["sandboxed"] is case.startswith("boxed")
    fake.push(*[Turn("spent")] * 20)
    told = jp_serverapp.web_app.settings["jupyter_ci_told"]
    code = ATTACK % {"url": told.kernels[ENV_URL], "socket": told.boxes[ENV_BROKER_SOCKET],
                     "socket_dir": SOCKET_DIR}
    result = await run(jp_fetch, session["id"], code)
    assert result["status"] == "ok", result
    report = json.loads(stdout(result))
    assert fake.calls() == 0, f"the session's code reached the model: {report}"
    assert report["names"] == [] and report["tokens"] == 0, report
    # What it could reach refused it; a box reaches nothing at all.
    assert all(status in (401, 403) or isinstance(status, str) for _, status in report["tried"])
    if case.startswith("unboxed"):
        assert any(status == 403 for _, status in report["tried"]), report


async def test_a_session_cannot_give_itself_a_credential(jp_fetch: Fetch, case: str) -> None:
    # The mark that takes the credential away is set after the client's variables.
    for env in ({"JUPYTER_CI_SANDBOX_SESSION": "0"}, {ENV_TOKEN: "mine"}):
        status, body = await call(jp_fetch, "POST", body={"env": env})
        assert (status, body["reason"]) == (400, "bad_request"), body


@pytest.mark.parametrize("case", ["unboxed"], indirect=True)
async def test_a_notebook_kernel_keeps_its_credential(
    jp_fetch: Fetch, jp_serverapp: Any, case: str
) -> None:
    response = await jp_fetch("api", "kernels", method="POST", body=json.dumps({}))
    kernel_id = json.loads(response.body)["id"]
    env = jp_serverapp.kernel_manager.get_kernel(kernel_id)._launch_args["env"]
    broker = jp_serverapp.web_app.settings["jupyter_ci_broker"]
    assert env[ENV_URL] and broker.authenticate(env[ENV_TOKEN]) == kernel_id
    await jp_fetch("api", "kernels", kernel_id, method="DELETE")


async def test_an_ask_in_a_sessions_code_says_where_asks_go(
    jp_fetch: Fetch, jp_serverapp: Any, fake: FakeLLM, case: str
) -> None:
    # Not "set OPENAI_API_KEY" (advice that would put a key in the kernel): the ask route.
    session = await _session(jp_fetch, jp_serverapp, case)
    assert (await run(jp_fetch, session["id"], "%load_ext jupyter_ci"))["status"] == "ok"
    for cell in ("%%ask -m openai:gpt-test\nsay hi", "%%ask\nsay hi"):
        result = await run(jp_fetch, session["id"], cell)
        text = json.dumps(result)
        assert result["status"] == "error" and "/jupyter-ci/sessions/<id>/ask" in text, text
        assert "OPENAI_API_KEY (or" not in text
    assert fake.calls() == 0
