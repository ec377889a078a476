"""The sandbox provisioner: its box, a sandboxed notebook kernel on a real server, the choice.

The attacks a box stops are tests/security/test_sandbox.py; a sandboxed kernel behind a
Kernel Gateway is tests/test_gateway.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_ci.server.sandbox import box
from jupyter_ci.server.sandbox.box import Box, Limits, command
from jupyter_ci.server.sandbox.provisioner import private_base, private_folder
from jupyter_ci.server.sessions import sandbox as session_sandbox
from jupyter_ci.server.sessions.errors import CannotSandbox
from tests.fakellm import FakeLLM, Turn
from tests.nbrun import TEST_KEY
from tests.test_gateway import _run_in_kernel, code_turn
from tests.ui.lab import LabServer, start_lab


def mounts(args: list[str]) -> list[tuple[str, str]]:
    """Return (option, path) of each mount of a bwrap command, in order."""
    found = []
    for i, arg in enumerate(args):
        if arg in ("--bind", "--ro-bind"):
            found.append((arg, args[i + 2]))
        elif arg == "--tmpfs":
            found.append((arg, args[i + 1]))
    return found


def test_the_deepest_mount_of_a_path_decides_and_hidden_names_do_not_show(
        tmp_path: Path) -> None:
    for folder in ("root/.sessions/s1", "root/.sessions/s2", "root/.venv", "root/rt", "k1",
                   "home/.ssh"):
        (tmp_path / folder).mkdir(parents=True)
    root = tmp_path / "root"
    the_box = Box(workdir=root / ".sessions/s1", private=tmp_path / "k1", limits=Limits(),
                  readonly=(root, root / ".venv"),
                  hidden=(root, root / ".sessions", root / "rt", tmp_path / "home/.ssh"))
    made = mounts(command(the_box, ["python"]))
    # The root shows (the Python environment lives in it), read-only...
    assert ("--ro-bind", str(root)) in made and ("--tmpfs", str(root)) not in made
    # ...but not the runtime folder or the other sessions, which come after it...
    for hidden in (root / "rt", root / ".sessions"):
        assert made.index(("--tmpfs", str(hidden))) > made.index(("--ro-bind", str(root)))
    # ...and the session's own folder is writable, on top of the hidden sessions folder.
    assert made.index(("--bind", str(root / ".sessions/s1"))) > made.index(
        ("--tmpfs", str(root / ".sessions")))
    # Nothing shows ~/.ssh, so no empty mount point tells its name.
    assert not [m for m in made if m[1] == str(tmp_path / "home/.ssh")]
    args = command(the_box, ["python"])
    assert args[args.index("--") + 1:] == [*Limits().prlimit(), "python"]
    # Once built, the box's own root is read-only (a tmpfs anyone could fill memory with).
    chdir = args.index("--chdir")
    assert args[chdir - 2:chdir] == ["--remount-ro", "/"]


def test_a_missing_bubblewrap_is_named_with_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    box.problem.cache_clear()
    try:
        why = box.problem()
        assert why is not None and "bubblewrap" in why and "apt-get install" in why

        class Specs:
            def get_all_specs(self) -> dict[str, object]:
                return {"python3": {"spec": {"metadata": {}}},
                        "python3-sandboxed": {"spec": {"metadata": {"kernel_provisioner": {
                            "provisioner_name": "jupyter-ci-sandbox"}}}}}

        class Manager:
            kernel_spec_manager = Specs()

        log = logging.getLogger("test-sandbox")
        with pytest.raises(CannotSandbox, match="bubblewrap"):
            asyncio.run(session_sandbox.choose("always", None, "python3", Manager(), log))
        # Only where no box can run at all does auto run a session unboxed, and says why.
        auto = asyncio.run(session_sandbox.choose("auto", None, "python3", Manager(), log))
        assert (auto.kernel_name, auto.sandboxed) == ("python3", False)
        assert auto.unboxed_reason.startswith("no box can run here: `bwrap` is not installed")
        assert "UNBOXED" in caplog.text and "bubblewrap" in caplog.text
        # A client naming the sandboxed kernelspec gets it whatever the mode.
        named = asyncio.run(session_sandbox.choose("never", "python3-sandboxed", "python3",
                                                   Manager(), log))
        assert named == session_sandbox.Choice("python3-sandboxed", True)
    finally:
        box.problem.cache_clear()


@pytest.fixture(scope="module")
def fake_model() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, fake_model: FakeLLM) -> Iterator[LabServer]:
    """A server holding a key, where notebooks may use the sandboxed kernelspec."""
    server = start_lab(tmp_path_factory.mktemp("sandbox-lab"), {
        "OPENAI_API_KEY": TEST_KEY, "OPENAI_BASE_URL": fake_model.openai_base_url,
        "JUPYTER_CI_MODEL": "openai:gpt-test"})
    yield server
    server.stop()


def test_a_sandboxed_notebook_kernel_asks_through_the_broker_socket(
        lab: LabServer, fake_model: FakeLLM) -> None:
    (lab.root / "nb").mkdir()
    kernel = lab.api("POST", "/api/kernels", {"name": "python3-sandboxed", "path": "nb"},
                     timeout=120)
    kid = kernel["id"]
    try:
        report = json.loads(asyncio.run(_run_in_kernel(lab, kid, (
            "import os, json, socket\n"
            "print(json.dumps({'cwd': os.getcwd(), 'pid': os.getpid(), 'root': sorted("
            f"os.listdir({str(lab.root)!r})), 'key': 'OPENAI_API_KEY' in os.environ, "
            "'socket': os.environ.get('JUPYTER_CI_BROKER_SOCKET')}))"))))
        # It works in the notebook's folder and sees no other file of the server's root.
        assert report["cwd"] == str(lab.root / "nb") and report["root"] == ["nb"]
        assert report["pid"] == 2 and report["key"] is False
        assert report["socket"] == "/run/jupyter-ci/broker.sock"
        # Its box's own socket to the model service, made when it started.
        own = private_base() / f"b-{kid.replace('-', '')[:16]}.sock"
        assert own.is_socket() and oct(own.stat().st_mode)[-3:] == "600"
        fake_model.push(code_turn("total = 6 * 7"), Turn("**42**"))
        out = asyncio.run(_run_in_kernel(lab, kid, (
            "%load_ext jupyter_ci\nget_ipython().run_cell_magic('ask', '', 'six by seven')\n"
            "print('after', total)")))
        assert "after 42" in out, out
        assert fake_model.requests[-1].headers["authorization"] == f"Bearer {TEST_KEY}"
        # An interrupt reaches the kernel in the box (not bubblewrap, which would end it).
        asyncio.run(_interrupt_a_sleep(lab, kid))
        assert "still here" in asyncio.run(_run_in_kernel(lab, kid, "print('still here')"))
        lab.api("POST", f"/api/kernels/{kid}/restart", timeout=120)
        assert "NameError" in asyncio.run(_run_in_kernel(lab, kid, "print(total)"))
        assert own.is_socket()  # kept over a restart
        folder = private_folder(kid, make=False)
        assert folder.is_dir() and oct(folder.stat().st_mode)[-3:] == "700"
    finally:
        lab.api("DELETE", f"/api/kernels/{kid}")
    deadline = time.monotonic() + 10
    while private_folder(kid, make=False).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not private_folder(kid, make=False).exists()
    assert not own.exists()  # removed with the kernel


async def _interrupt_a_sleep(lab: LabServer, kid: str) -> None:
    """Start a long sleep in the kernel, interrupt it, and see KeyboardInterrupt."""
    running = asyncio.ensure_future(_run_in_kernel(lab, kid, "import time\ntime.sleep(60)"))
    await asyncio.sleep(2)
    await asyncio.to_thread(lab.api, "POST", f"/api/kernels/{kid}/interrupt")
    out = await asyncio.wait_for(running, 20)
    assert "KeyboardInterrupt" in out, out


def test_the_package_offers_the_sandboxed_kernelspec(lab: LabServer) -> None:
    spec = lab.api("GET", "/api/kernelspecs")["kernelspecs"]["python3-sandboxed"]["spec"]
    assert spec["display_name"] == "Python 3 (sandboxed)"
    assert spec["metadata"]["kernel_provisioner"]["provisioner_name"] == "jupyter-ci-sandbox"
