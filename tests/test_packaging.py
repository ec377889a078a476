"""The built wheel: labextension prebuilt inside, both extensions enabled in a fresh venv."""

from __future__ import annotations

import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return ANSI.sub("", done.stdout + done.stderr)


def test_the_wheel_installs_both_extensions_enabled_in_a_fresh_venv(tmp_path: Path) -> None:
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp_path / "dist", ROOT)
    wheel = next((tmp_path / "dist").glob("jupyter_ci-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    data = "jupyter_ci-0.1.0.data/data"
    assert f"{data}/share/jupyter/labextensions/jupyter-ci/package.json" in names
    assert any(n.startswith(f"{data}/share/jupyter/labextensions/jupyter-ci/static/remoteEntry")
               for n in names)
    assert f"{data}/etc/jupyter/jupyter_server_config.d/jupyter_ci.json" in names
    assert not any(n.startswith("tests/") for n in names)

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    run(bin_dir / "python", "-m", "pip", "install", "-q", f"{wheel}[lab]")
    labext = run(bin_dir / "jupyter", "labextension", "list")
    assert re.search(r"jupyter-ci v0\.1\.0 enabled\s+OK", labext), labext
    serverext = run(bin_dir / "jupyter", "server", "extension", "list")
    assert re.search(r"jupyter_ci enabled", serverext), serverext
    assert re.search(r"jupyter_ci 0\.1\.0 OK", serverext), serverext
    # The magic loads in the fresh environment without the SDKs being imported.
    probe = ("import sys, IPython; ip = IPython.InteractiveShell.instance(); "
             "ip.run_line_magic('load_ext', 'jupyter_ci'); "
             "print('ask' in ip.magics_manager.magics['cell'], 'openai' in sys.modules)")
    assert run(bin_dir / "python", "-c", probe).splitlines()[0] == "True False"


def test_the_floors_ci_tests_are_the_floors_the_package_declares() -> None:
    """tests/floors.txt pins, for scripts/test.sh's second run, exactly the declared floors."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.version import Version

    from tests.floors import CONSTRAINTS, PATHS

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [Requirement(r) for r in project["dependencies"]
                + project["optional-dependencies"]["test-floors"]]
    floors = {r.name.replace("-", "_").lower(): spec.version for r in declared
              for spec in r.specifier if spec.operator == ">="}
    pinned = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pinned[name.strip().replace("-", "_").lower()] = version.strip()
    stack = ("ipython", "ipykernel", "jupyter_server", "jupyter_client", "jupyterlab")
    assert sorted(pinned) == sorted(stack)
    for name in stack:  # ">=8.12" declares 8.12.0: the same version to pip
        assert Version(pinned[name]) == Version(floors[name]), (name, pinned[name], floors[name])
    assert all((ROOT / path).exists() for path in PATHS)
