"""Attack: a `jupyter_ci.py` (or `jupyter_ci/` package) next to a notebook someone sent.

The labextension loads jupyter-ci silently before a kernel's first request. A kernel's
working directory is the notebook's folder and sits on sys.path ahead of site-packages, so
a plain `__import__("jupyter_ci")` would run the attacker's module without the user running
any cell. These tests send the exact lines the labextension sends (read from its source).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import jupyter_ci
from tests.kernelrun import Kernel
from tests.nbrun import clean_env

FRONTEND_TS = Path(__file__).parents[2] / "labextension" / "src" / "frontend.ts"
# What the labextension sent before the fix: an import the working directory can shadow.
NAIVE_LOAD = ('try:\n    __import__("jupyter_ci").load_ipython_extension(get_ipython())\n'
              "except Exception:\n    pass")
PAYLOAD = ("open({marker!r}, 'w').write('ran')\n"
           "def load_ipython_extension(ipython):\n    pass\n")


def load_code() -> str:
    """Return the loader the labextension sends, as frontend.ts spells it."""
    source = FRONTEND_TS.read_text()
    block = re.search(r"const LOAD_CODE = \[\n(.*?)\n\]\.join\('\\n'\);", source, re.S)
    assert block is not None, "LOAD_CODE not found in frontend.ts"
    lines = [ast.literal_eval(item.strip().rstrip(",")) for item in block.group(1).split("\n")]
    assert all(isinstance(line, str) for line in lines)
    return "\n".join(lines)


@pytest.fixture(params=["module", "package"])
def planted(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A notebook folder holding a malicious jupyter_ci module or package; return its marker."""
    marker = tmp_path / "PWNED"
    payload = PAYLOAD.format(marker=str(marker))
    if request.param == "module":
        (tmp_path / "jupyter_ci.py").write_text(payload)
    else:
        (tmp_path / "jupyter_ci").mkdir()
        (tmp_path / "jupyter_ci" / "__init__.py").write_text(payload)
    return marker


@pytest.fixture
def kernel(planted: Path) -> Iterator[Kernel]:
    """A real kernel started in the planted folder."""
    k = Kernel(clean_env(), str(planted.parent))
    try:
        yield k
    finally:
        k.close()


def state(kernel: Kernel) -> dict[str, object]:
    """Report what the kernel loaded and from where."""
    shown = kernel.execute(
        "import json as _j, sys as _s\n"
        "_m = _s.modules.get('jupyter_ci')\n"
        "print(_j.dumps({'file': getattr(_m, '__file__', None),"
        " 'ask': 'ask' in get_ipython().magics_manager.magics['cell'],"
        " 'leftover': '_jupyter_ci_load' in globals()}))")
    text = "".join(m["content"].get("text", "") for m in shown.of_type("stream"))
    return dict(json.loads(text))


def test_the_silent_loader_never_runs_a_jupyter_ci_from_the_notebook_folder(
    kernel: Kernel, planted: Path
) -> None:
    kernel.execute(load_code())
    assert not planted.exists(), "the planted jupyter_ci ran"
    seen = state(kernel)
    assert seen["file"] == jupyter_ci.__file__ and seen["ask"] is True
    assert seen["leftover"] is False


def test_the_naive_loader_did_run_it(kernel: Kernel, planted: Path) -> None:
    # The control: the attack is real, so the test above can fail.
    kernel.execute(NAIVE_LOAD)
    assert planted.read_text() == "ran"
    assert state(kernel)["ask"] is False
