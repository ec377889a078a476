"""Missing packages end to end: real kernels, real pip, a wheel made here, no index reached.

Installs go into a throwaway virtual environment made for the test (its interpreter runs the
kernel, so `%pip install` lands there and the shared one stays clean); pip finds the wheel
through PIP_FIND_LINKS with PIP_NO_INDEX set, so nothing reaches the internet.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.demo_wheel import PACKAGE, demo_wheel
from tests.fakellm import FakeLLM, Turn
from tests.kernelrun import Kernel
from tests.nbrun import error_of, openai_env, run_cells, text_of

FRONTEND = {"jupyter_ci_frontend": {"protocol": 2, "generated": []}, "cellId": "ask-cell-1"}
USES_IT = f"import {PACKAGE}\nprint('value', {PACKAGE}.VALUE)"


def code(src: str, text: str = "") -> Turn:
    return Turn(text, tool_calls=[("run_python", {"code": src})])


def tool_results(fake: FakeLLM, index: int) -> list[str]:
    return [m["content"] for m in fake.requests[index].messages if m.get("role") == "tool"]


def pip_env(fake: FakeLLM, wheels: Path) -> dict[str, str]:
    """A kernel environment whose pip sees only the wheels folder."""
    return {**openai_env(fake), "PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1",
            "PIP_CONFIG_FILE": "/dev/null"}


@pytest.fixture
def venv_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Make a throwaway venv that sees the test environment's packages; return its kernel."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                          "['purelib'])"], check=True, capture_output=True, text=True)
    shared = sysconfig.get_paths()["purelib"]
    # After the venv's own site-packages: ipykernel, pip and the rest come from the shared one.
    (Path(own.stdout.strip()) / "shared.pth").write_text(
        f"import site; site.addsitedir({shared!r})\n")
    spec = tmp_path / "jupyter" / "kernels" / "jci-venv"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "throwaway venv", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    yield "jci-venv"
    assert importlib.util.find_spec(PACKAGE) is None, "installed into the shared environment"


def ipython_config(tmp_path: Path, text: str) -> dict[str, str]:
    """Put `text` in an ipython_config.py of a fresh IPython dir; return the env naming it."""
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text(text)
    return {"IPYTHONDIR": str(tmp_path / "ipython")}


def test_always_installs_the_missing_package_as_its_own_step_and_runs_the_code_again(
    fake: FakeLLM, tmp_path: Path, venv_kernel: str
) -> None:
    env = {**pip_env(fake, tmp_path / "wheels"),
           **ipython_config(tmp_path, 'c.JupyterCI.install = "always"\n')}
    demo_wheel(tmp_path / "wheels")
    fake.push(code(USES_IT), Turn("The value is 42."))
    nb = run_cells(["%%ask\nshow the demo value",
                    f"import sys, {PACKAGE}\nprint({PACKAGE}.__file__.startswith(sys.prefix), "
                    "sys.prefix)"], env, tmp_path, kernel_name=venv_kernel)
    ask, after = nb.cells[1], nb.cells[2]
    shown = text_of(ask)
    assert error_of(ask) is None, shown
    assert "Step 1 (installing jci_demo_pkg)" in shown and "%pip install jci_demo_pkg" in shown
    assert "Successfully installed jci_demo_pkg-0.1" in shown
    assert "Step 2 (the code again, with jci_demo_pkg installed)" in shown
    assert "value 42" in shown and "The value is 42." in shown
    assert "· 2 steps ·" in shown
    # The model was asked twice: the retry was no fix of its own.
    assert fake.calls() == 2
    sent = tool_results(fake, 1)[-1]
    assert sent.startswith("value 42")
    assert ("jci_demo_pkg was missing, so it was installed (`%pip install jci_demo_pkg`, "
            "step 1)") in sent
    # Installed into the kernel's own environment, and importable there afterwards.
    assert text_of(after).strip() == f"True {tmp_path / 'venv'}"


def test_install_allow_refuses_a_package_not_listed(fake: FakeLLM, tmp_path: Path) -> None:
    env = {**pip_env(fake, tmp_path / "no-wheels"),
           **ipython_config(tmp_path, 'c.JupyterCI.install = "always"\n'
                                      'c.JupyterCI.install_allow = ["pandas", "pyyaml"]\n')}
    fake.push(code(USES_IT), code("print('value', 42)"), Turn("42, without the package."))
    nb = run_cells(["%%ask\nshow the demo value"], env, tmp_path)
    shown = text_of(nb.cells[1])
    assert error_of(nb.cells[1]) is None, shown
    assert "%pip install" not in shown and "value 42" in shown
    sent = tool_results(fake, 1)[-1]
    assert "No module named 'jci_demo_pkg'" in sent
    assert ("`jci_demo_pkg` is not installed, and jci_demo_pkg is not among the packages that "
            "may be installed here (c.JupyterCI.install_allow)") in sent


def test_headless_default_never_installs_and_the_model_does_without(
    fake: FakeLLM, tmp_path: Path
) -> None:
    fake.push(code(USES_IT), code("print('value', 42)"), Turn("42, without the package."))
    nb = run_cells(["%%ask\nshow the demo value"], pip_env(fake, tmp_path / "no-wheels"),
                   tmp_path)
    shown = text_of(nb.cells[1])
    assert error_of(nb.cells[1]) is None, shown
    assert "%pip install" not in shown and "value 42" in shown
    sent = tool_results(fake, 1)[-1]
    assert "ModuleNotFoundError: No module named 'jci_demo_pkg'" in sent
    assert ("`jci_demo_pkg` is not installed, and packages cannot be installed here "
            "(install policy: never). Do without it") in sent
    assert "42, without the package." in shown


def test_ask_on_stdin_and_yes_installs(fake: FakeLLM, tmp_path: Path, venv_kernel: str) -> None:
    demo_wheel(tmp_path / "wheels")
    kernel = Kernel(pip_env(fake, tmp_path / "wheels"), str(tmp_path), venv_kernel)
    try:
        assert kernel.execute("%load_ext jupyter_ci").reply["content"]["status"] == "ok"
        fake.push(code(USES_IT), Turn("The value is 42."))
        run = kernel.execute("%%ask\nshow the demo value", FRONTEND, answers=["y"], timeout=120)
        after = kernel.execute(f"import {PACKAGE}; print({PACKAGE}.VALUE)")
    finally:
        kernel.close()
    assert run.prompts == ["Install jci_demo_pkg with pip? [y/N] "]
    data = run.comm_data()
    starts = [(d["step"], d["attempt"], d["code"]) for d in data if d["type"] == "step_start"]
    assert starts == [(1, 1, USES_IT), (1, 2, "%pip install jci_demo_pkg"), (2, 1, USES_IT)]
    assert [d["status"] for d in data if d["type"] == "step_end"] == ["error", "ok", "ok"]
    assert data[-1]["status"] == "done" and data[-1]["record"]["steps"] == 2
    pip_out = "".join(d["output"].get("text", "") for d in data
                      if d["type"] == "output" and d["step"] == 1)
    assert "Successfully installed jci_demo_pkg-0.1" in pip_out
    log = json.dumps([m["content"] for m in run.of_type("display_data", "update_display_data")])
    assert "installed jci_demo_pkg" in log
    assert "42" in "".join(m["content"].get("text", "") for m in after.of_type("stream"))


def test_ask_on_stdin_and_no_leaves_the_model_to_do_without(
    fake: FakeLLM, tmp_path: Path
) -> None:
    kernel = Kernel(pip_env(fake, tmp_path / "no-wheels"), str(tmp_path))
    try:
        assert kernel.execute("%load_ext jupyter_ci").reply["content"]["status"] == "ok"
        fake.push(code(USES_IT), code("print('value', 42)"), Turn("42, without it."))
        run = kernel.execute("%%ask\nshow the demo value", answers=["n"])
    finally:
        kernel.close()
    assert run.prompts == ["Install jci_demo_pkg with pip? [y/N] "]
    assert run.reply["content"]["status"] == "ok"
    shown = json.dumps([m["content"] for m in run.iopub])
    assert "%pip install" not in shown and "value 42" in shown
    sent = tool_results(fake, 1)[-1]
    assert "jci_demo_pkg was not installed: the user declined. Do without it" in sent
