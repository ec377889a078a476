"""jupyter-ci-client: the client alone, from this repository, in a venv with no Jupyter or SDK."""

from __future__ import annotations

import asyncio
import os
import venv
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import importlib.util, sys
import jupyter_ci
from jupyter_ci.client import Client
absent = [m for m in ("jupyter_server", "openai", "anthropic", "IPython", "ipykernel")
          if importlib.util.find_spec(m) is not None]
assert not absent, absent
assert jupyter_ci.__file__.startswith(sys.prefix), jupyter_ci.__file__
with Client(sys.argv[1], sys.argv[2]) as client, client.session() as py:
    print(py.execute("6 * 7").text)
"""


@pytest.fixture
def jp_server_config() -> Config:
    return Config({"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
                   "JupyterCI": {"session_pool": 0}})


async def sh(*args: str | Path, cwd: Path) -> str:
    """Run a command without blocking the test's server; return its output, or fail."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = await asyncio.create_subprocess_exec(
        *map(str, args), cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out = (await asyncio.wait_for(proc.communicate(), 300))[0].decode()
    assert proc.returncode == 0, f"{args} failed:\n{out[-3000:]}"
    return out


async def test_the_slim_client_installs_alone_and_talks_to_a_real_server(
    tmp_path: Path, jp_serverapp: Any, http_server_client: Any,
    http_server_port: tuple[Any, int], jp_base_url: str
) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    await sh(python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
             ROOT / "client", cwd=tmp_path)
    url = f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url}"
    out = await sh(python, "-c", PROBE, url, str(jp_serverapp.identity_provider.token),
                   cwd=tmp_path)
    assert out.strip().splitlines()[-1] == "42"
    # The full package's wheel and this one hold the same files of the client.
    listed = await sh(python, "-m", "pip", "show", "-f", "jupyter-ci-client", cwd=tmp_path)
    assert "jupyter_ci/client/formats.py" in listed and "jupyter_ci/kernel" not in listed
