"""The default model's SDK loads in the background once `%load_ext jupyter_ci` has returned."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

import jupyter_ci
from jupyter_ci.kernel import prepare
from jupyter_ci.models.resolve import ModelSettings
from tests.fakellm import FakeLLM, Turn
from tests.kernelrun import Kernel
from tests.nbrun import PROVIDER_VARS, anthropic_env, openai_env

SDKS = {"openai": "anthropic", "anthropic": "openai"}  # each SDK, and the one not wanted
PREPARING = ("import sys, threading\n"
             f"print({prepare.THREAD_NAME!r} in [t.name for t in threading.enumerate()])")


def printed(kernel: Kernel, code: str) -> str:
    """Run code that must succeed and return what it printed."""
    done = kernel.execute(code, timeout=180)
    assert done.reply["content"]["status"] == "ok", done.reply["content"]
    return "".join(m["content"]["text"] for m in done.of_type("stream"))


def wait_prepared(kernel: Kernel) -> None:
    """Wait for the background preparation to end, between cells (it pauses during them)."""
    deadline = time.monotonic() + 120
    while printed(kernel, PREPARING).strip() == "True":
        assert time.monotonic() < deadline, "the preparation never ended"
        time.sleep(0.1)


@pytest.fixture
def kernel(request: pytest.FixtureRequest, fake: FakeLLM, tmp_path: Path) -> Iterator[Kernel]:
    """Start a kernel whose default model is the fake's, as `request.param` (a provider)."""
    env = (openai_env if request.param == "openai" else anthropic_env)(fake)
    started = Kernel(env, str(tmp_path))
    try:
        yield started
    finally:
        started.close()


@pytest.mark.parametrize("kernel", list(SDKS), indirect=True)
def test_the_default_models_sdk_loads_after_the_load_ext_cell_and_only_it(
    kernel: Kernel, fake: FakeLLM, request: pytest.FixtureRequest
) -> None:
    sdk = request.node.callspec.params["kernel"]
    # %load_ext returned before anything was imported: the thread starts when its cell ends.
    during = printed(kernel, "%load_ext jupyter_ci\nimport sys, threading\n"
                     f"print({sdk!r} in sys.modules, "
                     f"{prepare.THREAD_NAME!r} in [t.name for t in threading.enumerate()])")
    assert during.split() == ["False", "False"]
    printed(kernel, "pass")  # the user's next cell, before any ask
    wait_prepared(kernel)
    after = printed(kernel, f"print({sdk!r} in sys.modules, {SDKS[sdk]!r} in sys.modules)")
    assert after.split() == ["True", "False"]
    assert fake.calls() == 0  # preparing sends nothing
    fake.push(Turn("", tool_calls=[("run_python", {"code": "y = 6 * 7"})]), Turn("Done."))
    printed(kernel, "%%ask\nset y")
    assert printed(kernel, "print(y)").strip() == "42" and fake.calls() == 2


@pytest.mark.parametrize("kernel", ["openai"], indirect=True)
def test_the_users_imports_from_the_sdks_tree_work_while_it_loads(kernel: Kernel) -> None:
    printed(kernel, "%load_ext jupyter_ci")
    # The next cell imports the SDK's own dependencies and the SDK while the thread loads
    # them (it is seen running, or has loaded the SDK, before the imports begin).
    code = f"""
import sys, threading, time

def preparing():
    names = [t.name for t in threading.enumerate()]
    return {prepare.THREAD_NAME!r} in names or 'openai' in sys.modules

deadline = time.monotonic() + 60
while not preparing() and time.monotonic() < deadline:
    time.sleep(0.001)
print('preparing' if preparing() else 'nothing started')
import pydantic, httpx2, openai
from openai.types.chat import ChatCompletion
import pandas
print(ChatCompletion.__name__, pandas.DataFrame({{'a': [1]}}).shape)
"""
    assert printed(kernel, code).split("\n")[:2] == ["preparing", "ChatCompletion (1, 1)"]
    wait_prepared(kernel)
    assert printed(kernel, "print(openai.OpenAI.__name__)").strip() == "OpenAI"


@pytest.fixture
def started(shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[list[ModelSettings]]:
    """Record the settings each background preparation was started with, in its thread."""
    for name in PROVIDER_VARS:
        monkeypatch.delenv(name, raising=False)
    calls: list[ModelSettings] = []
    names: list[str] = []

    def record(settings: ModelSettings) -> None:
        names.append(threading.current_thread().name)
        calls.append(settings)

    monkeypatch.setattr(prepare, "prepare_default", record)
    yield calls
    for thread in threading.enumerate():
        if thread.name == prepare.THREAD_NAME:
            thread.join(10)
    assert set(names) <= {prepare.THREAD_NAME}


def test_the_settings_set_in_the_load_ext_cell_are_the_ones_prepared(
    shell: InteractiveShell, started: list[ModelSettings]
) -> None:
    shell.run_cell("%load_ext jupyter_ci\n%config JupyterCI.model = 'openai:gpt-x'\n"
                   "during = [t.name for t in __import__('threading').enumerate()]")
    assert prepare.THREAD_NAME not in shell.user_ns["during"]
    shell.run_cell("x = 1")
    for thread in threading.enumerate():
        if thread.name == prepare.THREAD_NAME:
            thread.join(10)
    assert [s.default for s in started] == ["openai:gpt-x"]  # once, not per cell


def test_no_preparation_when_turned_off(shell: InteractiveShell,
                                        started: list[ModelSettings]) -> None:
    shell.run_cell("%load_ext jupyter_ci\n%config JupyterCI.preload_model = False")
    shell.run_cell("x = 1")
    assert started == []
    jupyter_ci.load_ipython_extension(shell)  # loaded already: nothing new is scheduled
    shell.run_cell("x = 2")
    assert started == []
