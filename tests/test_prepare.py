"""The default model's SDK loads in the background once `%load_ext jupyter_ci` has returned."""

from __future__ import annotations

import importlib
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Give a folder on sys.path for modules written by the test; forget them afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(prepare, "MAX_PAUSE_S", 60.0)  # longer than any wait below
    prepare.COURTESY.install()
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("prep_")]:
        del sys.modules[name]


def preparing(cells: prepare.Cells, module: str) -> threading.Event:
    """Import `module` in a thread that prepares politely; return an event set when done."""
    done = threading.Event()

    def run() -> None:
        prepare.COURTESY.threads[threading.get_ident()] = cells
        try:
            importlib.import_module(module)
        finally:
            del prepare.COURTESY.threads[threading.get_ident()]
            done.set()

    threading.Thread(target=run, daemon=True).start()
    return done


def test_the_preparation_waits_for_the_running_cell_before_each_import(modules: Path) -> None:
    (modules / "prep_outer.py").write_text("import prep_inner\n")
    (modules / "prep_inner.py").write_text("VALUE = 1\n")
    cells = prepare.Cells(shell=None, running=1, since=time.monotonic())
    done = preparing(cells, "prep_outer")
    # importlib.import_module raises no "import" audit event; the nested import statement
    # does, and waits there while the cell runs.
    assert not done.wait(0.3)
    assert "prep_outer" in sys.modules and "prep_inner" not in sys.modules
    cells.running = 0  # the cell ended
    assert done.wait(10) and sys.modules["prep_outer"].prep_inner.VALUE == 1


def test_a_users_import_of_a_module_the_preparation_holds_is_not_kept_waiting(
    modules: Path
) -> None:
    (modules / "prep_gate.py").write_text("import threading\n"
                                          "inside, go = threading.Event(), threading.Event()\n")
    (modules / "prep_held.py").write_text("import prep_gate\nprep_gate.inside.set()\n"
                                          "prep_gate.go.wait(30)\nimport prep_leaf\n")
    (modules / "prep_leaf.py").write_text("VALUE = 2\n")
    import prep_gate  # type: ignore[import-not-found]

    cells = prepare.Cells(shell=None)
    done = preparing(cells, "prep_held")
    assert prep_gate.inside.wait(10)
    # A cell begins while the thread is inside prep_held: it pauses before prep_leaf,
    # holding prep_held's import lock, until the cell imports prep_held too.
    cells.running, cells.since = 1, time.monotonic()
    prep_gate.go.set()
    users: list[Any] = []
    user = threading.Thread(target=lambda: users.append(importlib.import_module("prep_held")),
                            daemon=True)
    user.start()
    user.join(10)
    assert users and users[0].prep_leaf.VALUE == 2 and done.wait(10)
    assert cells.running == 1  # the cell still runs: the waiting import let it go on
