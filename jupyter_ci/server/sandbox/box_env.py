"""Where `%pip install` installs in a notebook's box: a Python environment of the user's boxes.

The kernel's own environment is read-only in a box (code that could write it would run in
every later Python of the user, boxed or not). So a notebook's Python kernel runs on an
environment made for the boxes, one per interpreter: a venv (no pip of its own) whose
site-packages come first and whose `.pth` adds the kernel's own environment after it. pip
then works as it does anywhere: `%pip install x` and `!pip install x` install into it, the
kernel imports the package at once, `--target`, `--prefix` and `--user` mean what they
always mean, and what the kernel's environment has already satisfies a requirement. What a
box installs, the user's other boxed kernels import; no unboxed Python reads it.

Made once per interpreter (about 0.1 s), atomically: two kernels starting at once agree.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

#: What the environment's folder holds once it is whole.
_MARK = "jupyter-ci-box-env"
#: pip as a program, on the environment's interpreter.
_PIP = "#!{python}\nimport sys\nfrom pip._internal.cli.main import main\nsys.exit(main())\n"
_PROBE = ("import json, site, sys; print(json.dumps({'version': '%d.%d' % sys.version_info[:2],"
          " 'prefix': sys.prefix, 'sites': site.getsitepackages(),"
          " 'pip': __import__('importlib.util').util.find_spec('pip') is not None}))")


def box_python(executable: str, env: dict[str, str], folder: Path) -> Path | None:
    """Return the interpreter of the boxes' environment over `executable` (None: no Python).

    `folder` is the boxes' folder; the environment is made there the first time.
    """
    found = shutil.which(executable, path=env.get("PATH")) if os.sep not in executable \
        else executable
    if found is None:
        return None
    real = os.path.realpath(found)
    info = _probe(found, real)
    if info is None:
        return None
    version, prefix, sites, pip = info
    tag = hashlib.sha256(prefix.encode()).hexdigest()[:10]
    target = folder / "envs" / f"{version}-{tag}"
    python = target / "bin" / "python"
    if not (target / _MARK).exists():
        _make(found, target, sites, pip)
    return python if python.exists() else None


@functools.lru_cache(maxsize=16)
def _probe(executable: str, real: str) -> tuple[str, str, tuple[str, ...], bool] | None:
    """Ask an interpreter its version, prefix, site folders and whether it has pip."""
    import json

    try:
        done = subprocess.run([executable, "-c", _PROBE], capture_output=True, text=True,
                              timeout=60, check=True)
        found = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return found["version"], found["prefix"], tuple(found["sites"]), bool(found["pip"])


def _make(executable: str, target: Path, sites: tuple[str, ...], pip: bool) -> None:
    """Make the environment in a folder of its own, then move it into place whole."""
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        subprocess.run([executable, "-m", "venv", "--without-pip", str(partial)],
                       capture_output=True, timeout=120, check=True)
    except (OSError, subprocess.SubprocessError):
        shutil.rmtree(partial, ignore_errors=True)
        return
    site = next(partial.glob("lib/python*/site-packages"), None)
    if site is None:
        shutil.rmtree(partial, ignore_errors=True)
        return
    # addsitedir, not a bare path: the kernel environment's own .pth files (an editable
    # install) run too, after this environment's packages.
    lines = [f"import site; site.addsitedir({path!r})" for path in sites]
    (site / "_jupyter_ci_kernel_env.pth").write_text("\n".join(lines) + "\n")
    if pip:
        script = partial / "bin" / "pip"
        script.write_text(_PIP.format(python=target / "bin" / "python"))
        script.chmod(0o755)
        for alias in ("pip3",):
            (partial / "bin" / alias).symlink_to("pip")
    (partial / _MARK).write_text(f"{executable}\n")
    try:
        partial.rename(target)
    except OSError:  # another start made it meanwhile: theirs stands
        shutil.rmtree(partial, ignore_errors=True)
