"""A kernel under Jupyter Server asks the server's model service: no SDK in the kernel.

Kernels here are notebook kernels started by a real `jupyter lab` subprocess (POST
/api/kernels), driven over ZMQ with jupyter_client, with both providers pointing at the fake
model server. (A REST session's kernel holds no credential: tests/security/
test_session_credentials.py.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from queue import Empty
from typing import Any

import pytest
from jupyter_client import BlockingKernelClient

from tests.fakellm import FakeLLM, Turn
from tests.kernelrun import connection_file
from tests.nbrun import TEST_KEY
from tests.ui.lab import LabServer, start_lab

ANTHROPIC_KEY = "sk-ant-test-service-0123456789"
#: What a kernel has loaded that a provider SDK would bring in.
SDK_MODULES = ("import sys, json, threading\n"
               "print(json.dumps([sorted(m for m in ('openai', 'anthropic', 'httpx', 'httpx2', "
               "'pydantic') if m in sys.modules), sorted(t.name for t in threading.enumerate())]))")


@pytest.fixture
def fake(session_fake: FakeLLM) -> FakeLLM:
    """The session's fake model server, emptied for this test."""
    session_fake.reset()
    return session_fake


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, session_fake: FakeLLM
           ) -> Iterator[LabServer]:
    """A Jupyter server holding both keys."""
    base = tmp_path_factory.mktemp("service-kernel")
    config = base / "config"
    config.mkdir()
    (config / "jupyter_server_config.json").write_text(json.dumps({"JupyterCI": {
        "session_pool": 0, "session_sandbox": "never"}}))
    lab = start_lab(base, {"OPENAI_API_KEY": TEST_KEY,
                           "OPENAI_BASE_URL": session_fake.openai_base_url,
                           "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
                           "ANTHROPIC_BASE_URL": session_fake.anthropic_base_url})
    yield lab
    lab.stop()


@dataclass
class Ran:
    """What one execute showed: its status, its text (streams, values, errors), its error."""

    status: str
    text: str
    error: dict[str, Any] | None


class NotebookKernel:
    """A kernel the server started for a notebook, driven with jupyter_client."""

    def __init__(self, server: LabServer) -> None:
        self.server = server
        self.id = server.api("POST", "/api/kernels", {"name": "python3"}, timeout=60)["id"]
        self.client = BlockingKernelClient(connection_file=str(
            connection_file(server.root.parent / "runtime", self.id)))
        self.client.load_connection_file()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)

    def execute(self, code: str, timeout: float = 90) -> Ran:
        """Run code; past `timeout` seconds interrupt it (through the server) and say so."""
        msg_id = self.client.execute(code)
        #: (display id or None, text) of each output; an update replaces its display's text.
        shown: list[tuple[str | None, str]] = []
        error: dict[str, Any] | None = None
        interrupt_at, timed_out = time.monotonic() + timeout, False
        while True:
            if not timed_out and time.monotonic() > interrupt_at:
                self.server.api("POST", f"/api/kernels/{self.id}/interrupt")
                timed_out = True
            try:
                msg = self.client.get_iopub_msg(timeout=0.2)
            except Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "status" and content["execution_state"] == "idle":
                break
            text = content.get("data", {}).get("text/plain", "")
            display = content.get("transient", {}).get("display_id")
            if kind == "stream":
                shown.append((None, content["text"]))
            elif kind == "update_display_data":  # an ask's cell log, as it grows
                shown = [(at, text if at == display else was) for at, was in shown]
            elif kind in ("execute_result", "display_data"):
                shown.append((display, text))
            elif kind == "error":
                error = content
                shown.append((None, f"{content['ename']}: {content['evalue']}"))
        status = "timeout" if timed_out else "error" if error else "ok"
        return Ran(status, "".join(text for _, text in shown), error)

    def close(self) -> None:
        self.client.stop_channels()
        self.server.api("DELETE", f"/api/kernels/{self.id}")


@pytest.fixture
def session(server: LabServer, fake: FakeLLM) -> Iterator[NotebookKernel]:
    """A fresh notebook kernel started by the server, with the extension loaded."""
    kernel = NotebookKernel(server)
    try:
        kernel.execute("%load_ext jupyter_ci")
        yield kernel
    finally:
        kernel.close()


def ask_cell(model: str, prompt: str) -> str:
    return f"%%ask -m {model}\n{prompt}"


def test_asks_of_both_providers_load_no_sdk_in_the_kernel(session: NotebookKernel, fake: FakeLLM
                                                          ) -> None:
    session.execute("x = 20")
    fake.push(Turn("", tool_calls=[("run_python", {"code": "y = x + 1\nprint(y)"})]),
              Turn("It is **21**."), Turn("Claude says hi."))
    first = session.execute(ask_cell("openai:gpt-test", "add one to x"))
    assert "21" in first.text and "It is" in first.text, first.text
    second = session.execute(ask_cell("anthropic:claude-test", "say hi"))
    assert "Claude says hi." in second.text, second.text
    modules, threads = json.loads(session.execute(SDK_MODULES).text)
    # The kernel spoke only our own turn format; the server's SDK clients did the rest.
    assert modules == []
    assert not [name for name in threads if "prepare" in name]
    # The provider saw the server's keys (the kernel never had them).
    assert [r.path for r in fake.requests] == ["/v1/chat/completions"] * 2 + ["/v1/messages"]
    assert TEST_KEY in fake.requests[0].headers["authorization"]
    assert ANTHROPIC_KEY in (fake.requests[2].headers.get("x-api-key", "")
                             + fake.requests[2].headers.get("authorization", ""))
    env = session.execute("import os\nprint(sorted(os.environ))").text
    assert "OPENAI_API_KEY" not in env and "ANTHROPIC_API_KEY" not in env


def test_an_interrupted_ask_stops_the_providers_stream_and_keeps_the_kernel(
        session: NotebookKernel, fake: FakeLLM) -> None:
    session.execute("kept = 7")
    # 200 chunks 50 ms apart: 10 s of streaming unless the hang-up reaches the provider.
    fake.push(Turn("word " * 200, chunk_chars=5, chunk_delay=0.05))
    started = time.monotonic()
    # The REST execute interrupts the kernel when its timeout passes: the kernel's turn is
    # cut by KeyboardInterrupt, its connection closes, and the server cancels the stream.
    done = session.execute(ask_cell("openai:gpt-test", "talk a lot"), timeout=2)
    assert done.status in ("timeout", "error"), done.status
    deadline = time.monotonic() + 5
    while not fake.cut_streams and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake.cut_streams, "the provider's stream ran on after the kernel was interrupted"
    assert fake.cut_streams[0] - started < 4.5
    assert session.execute("print(kept)").text.strip() == "7"


def test_a_refused_turn_says_what_to_do_and_loses_nothing(session: NotebookKernel, tmp_path: Path
                                                          ) -> None:
    session.execute("kept = 3")
    done = session.execute(ask_cell("openai-ish:gpt", "hi"))
    assert "Unknown model provider 'openai-ish'" in done.text + json.dumps(done.error or {})
    # A credential that is not this kernel's: the service refuses it, the kernel says so.
    forged = session.execute(
        "import os\nos.environ['JUPYTER_CI_BROKER_TOKEN'] = 'forged'\n"
        "from jupyter_ci.models.service import ServiceModel\n"
        "from jupyter_ci.models.resolve import ModelSettings, resolve_model\n"
        "m = resolve_model('openai:gpt-test', ModelSettings(), os.environ)\n"
        "print(type(m).__name__)\n"
        "from jupyter_ci.agent.types import Message, ModelRequest\n"
        "try:\n"
        "    m.complete(ModelRequest('', (Message('user', 'hi'),), ()), print)\n"
        "except Exception as e:\n"
        "    print(type(e).__name__, e)\n")
    assert "ServiceModel" in forged.text
    assert "ModelConfigError" in forged.text and "Restart the kernel" in forged.text
    assert session.execute("print(kept)").text.strip() == "3"


def test_an_ask_through_the_service_is_recorded_and_replays(
        session: NotebookKernel, fake: FakeLLM, server: LabServer) -> None:
    folder = server.root / "recorded"
    fake.push(Turn("", tool_calls=[("run_python", {"code": "print(6 * 7)"})]),
              Turn("It is **42**."))
    session.execute(f'%config JupyterCI.record_dir = "{folder}"')
    first = session.execute(ask_cell("anthropic:claude-test", "multiply six by seven"))
    assert "It is" in first.text, first.text
    session.execute('%config JupyterCI.record_dir = ""')
    [written] = list(folder.iterdir())
    turns = json.loads(written.read_text())["turns"]
    assert [t["text"] for t in turns] == ["", "It is **42**."]
    assert TEST_KEY not in written.read_text() and ANTHROPIC_KEY not in written.read_text()
    # Played back in the kernel, no model call.
    calls = len(fake.requests)
    again = session.execute(ask_cell(f"replay:{folder}", "multiply six by seven"))
    assert "42" in again.text and len(fake.requests) == calls
