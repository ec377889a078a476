"""Find the notebook a headless runner executes, which no runner tells the kernel outright.

nbclient, papermill and nbconvert send each cell's source only. What names the notebook:
`$JUPYTER_CI_NOTEBOOK` (the user's), `$JPY_SESSION_NAME` (Jupyter Server's sessions),
`PAPERMILL_INPUT_PATH` (a variable papermill defines with `--inject-paths` or
`--inject-input-path`), else the runner's own command line (`papermill in.ipynb out.ipynb`),
read from /proc on Linux.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def named_notebooks(cwd: Path) -> list[Path]:
    """Return the notebooks the environment, or papermill's injected variable, names."""
    named = [os.environ.get("JUPYTER_CI_NOTEBOOK"), os.environ.get("JPY_SESSION_NAME")]
    found = [cwd / name for name in named if name]  # an absolute name replaces cwd
    injected = _papermill_input_path()
    if injected:
        # Relative to where papermill started, which `--cwd` makes another folder than ours.
        found += _existing(injected, [cwd, *_starting_folders()])[:1] or [cwd / injected]
    return found


def runner_notebooks() -> list[Path]:
    """Return the existing notebooks named on the command line of the process that started us."""
    proc = Path("/proc") / str(os.getppid())
    try:
        args = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")[1:]
    except OSError:  # not Linux, or the runner is gone
        return []
    found: list[Path] = []
    for arg in args:
        value = arg.rpartition("=")[2]  # `--input=report.ipynb` too
        if value.endswith(".ipynb"):
            found += [p for p in _existing(value, _starting_folders()) if p not in found]
    return found


def _papermill_input_path() -> str | None:
    """Return papermill's PAPERMILL_INPUT_PATH from the kernel's namespace, if it is there."""
    from IPython import get_ipython

    shell = get_ipython()
    value = shell.user_ns.get("PAPERMILL_INPUT_PATH") if shell is not None else None
    return value if isinstance(value, str) and value else None


def _starting_folders() -> list[Path]:
    """Where the runner resolves relative paths: where its shell started it, and its cwd now."""
    folders = [os.environ.get("PWD")]  # inherited from the runner: it may chdir (--cwd) later
    with contextlib.suppress(OSError):  # not Linux, or the runner is gone
        folders.append(os.readlink(f"/proc/{os.getppid()}/cwd"))
    return [Path(f) for f in folders if f]


def _existing(name: str, folders: list[Path]) -> list[Path]:
    """Return `name` resolved against each folder (once, if absolute), where it is a file."""
    found: list[Path] = []
    for folder in folders if not Path(name).is_absolute() else [Path("/")]:
        path = Path(os.path.normpath(folder / name))
        if path.is_file() and path not in found:
            found.append(path)
    return found
