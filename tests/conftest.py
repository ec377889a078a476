"""Shared pytest setup: the fake model server and a fresh in-process IPython shell."""

from __future__ import annotations

import atexit
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from jupyter_client.channels import HBChannel
from traitlets.config import Config

from tests.fakellm import FakeLLM

# The browser fixtures are a plugin: tests/ui and tests/security/browser share one Chromium.
pytest_plugins = ["pytest_jupyter.jupyter_server", "tests.ui.fixtures"]

_LAST = ("last_type", "last_value", "last_traceback", "last_exc")

# A client without a kernel manager (one that reads a connection file) judges a kernel alive by
# its heartbeat, one ping a second by default: on a loaded 2-core CI machine a kernel that is
# still starting misses one, and wait_for_ready raises "Kernel died before replying to
# kernel_info" for a live kernel (CI saw it). Ten seconds still tells a dead one.
HBChannel.time_to_dead = 10.0


@pytest.fixture(autouse=True)
def one_worker_per_group(request: pytest.FixtureRequest) -> None:
    """Fail a grouped test that pytest-xdist did not group (its group shares fixtures)."""
    names = sorted({str(mark.args[0]) for mark in request.node.iter_markers("xdist_group")})
    # A worker of `--dist loadgroup` has option.loadgroup; it gives a grouped test's id the
    # group's suffix, which is how the controller sends the group to one worker. Without it
    # the group is spread over the workers, which then fight over one Hub's users or one lab.
    grouping = names and getattr(request.config.option, "loadgroup", False)
    if grouping and not request.node.nodeid.endswith("@" + "_".join(names)):
        pytest.fail("pytest-xdist did not group this test (--dist loadgroup): see "
                    "pyproject.toml's pytest pin (pytest-dev/pytest-xdist#1386)")


@pytest.fixture(scope="session", autouse=True)
def private_jupyter_data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Give the tests (and the kernels they start) a Jupyter data dir of their own."""
    # The record-signing secret lives there: tests must neither read nor write the user's.
    with pytest.MonkeyPatch.context() as patch:
        data = tmp_path_factory.mktemp("jupyter-data")
        patch.setenv("JUPYTER_DATA_DIR", str(data))
        yield data


@pytest.fixture(autouse=True)
def no_kept_headless_answers(private_jupyter_data: Path) -> None:
    """Start each test without the answers earlier tests' headless asks kept (replayed)."""
    shutil.rmtree(private_jupyter_data / "jupyter_ci" / "headless", ignore_errors=True)


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    """Serve a fake OpenAI + Anthropic API for one test: push its turns, read its requests."""
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="session")
def session_fake() -> Iterator[FakeLLM]:
    """Serve one fake API for the session, for servers started once (the browser tests)."""
    with FakeLLM() as server:
        yield server


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    """Give a fresh IPython shell with in-memory history; undo its global side effects.

    It is the process's current shell (`InteractiveShell.instance()`) for the test, so
    `display()` reaches it; a shell that was current before is current again afterwards.
    """
    main = sys.modules["__main__"]
    before = InteractiveShell._instance
    saved = {name: getattr(sys, name) for name in _LAST if hasattr(sys, name)}
    for name in saved:
        delattr(sys, name)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    sh = InteractiveShell.instance(config=config)
    try:
        yield sh
    finally:
        atexit.unregister(sh.atexit_operations)
        InteractiveShell.clear_instance()
        InteractiveShell._instance = before
        sys.modules["__main__"] = main  # the shell installs its own __main__
        for name in _LAST:
            if hasattr(sys, name):
                delattr(sys, name)
        for name, value in saved.items():
            setattr(sys, name, value)
