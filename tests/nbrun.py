"""Run notebooks headless with nbclient in a real kernel, pointed at a fake model server."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

from jupyter_ci import providers
from jupyter_ci.models.broker import MANAGED
from tests.fakellm import FakeLLM

PROVIDER_VARS = (*(v for s in providers.configurable() for v in (s.key_var, s.url_var)),
                 *MANAGED)
TEST_KEY = "sk-test-0123456789abcdefghij"


def clean_env(**extra: str) -> dict[str, str]:
    """Return this process's environment without any provider settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    env.update(extra)
    return env


def openai_env(fake: FakeLLM, model: str = "openai:gpt-test") -> dict[str, str]:
    """Environment for a kernel that talks to the fake as OpenAI."""
    return clean_env(OPENAI_API_KEY=TEST_KEY, OPENAI_BASE_URL=fake.openai_base_url,
                     JUPYTER_CI_MODEL=model)


def anthropic_env(fake: FakeLLM, model: str = "anthropic:claude-test") -> dict[str, str]:
    """Environment for a kernel that talks to the fake as Anthropic."""
    return clean_env(ANTHROPIC_API_KEY=TEST_KEY, ANTHROPIC_BASE_URL=fake.anthropic_base_url,
                     JUPYTER_CI_MODEL=model)


def session_server_config(monkeypatch: Any, env: dict[str, str]) -> Any:
    """Config for a pytest-jupyter server with jupyter-ci whose broker holds `env`'s keys."""
    from traitlets.config import Config

    for var in MANAGED:  # what a parent server would have published
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    return Config({"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
                   "JupyterCI": {"session_pool": 0, "model": "openai:gpt-test"}})


def run_cells(sources: Iterable[str], env: dict[str, str], cwd: Path,
              timeout: int = 90, kernel_name: str = "python3") -> Any:
    """Execute `sources` as one notebook (errors allowed) and return the executed notebook."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in ["%load_ext jupyter_ci", *sources]]
    # startup_timeout is a hang guard: CI's floors pass saw a kernel take over nbclient's
    # default 60 s to answer while the other worker drove Chromium.
    client = NotebookClient(nb, timeout=timeout, allow_errors=True, kernel_name=kernel_name,
                            startup_timeout=180, resources={"metadata": {"path": str(cwd)}})
    client.execute(env=env)
    return nb


def text_of(cell: Any) -> str:
    """Join everything a cell shows as text (streams, text/plain, Markdown, errors)."""
    parts: list[str] = []
    previous = None
    for out in cell.outputs:
        if out.output_type == "stream" and previous == out.name:
            # One print can arrive as two stream outputs when the kernel flushes between its
            # writes (a loaded machine); frontends show them as one text, and so does this.
            parts[-1] += out.text
        elif out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type == "error":
            parts.append(f"{out.ename}: {out.evalue}")
        else:
            data = out.get("data", {})
            parts.append(data.get("text/markdown") or data.get("text/plain") or "")
        previous = out.name if out.output_type == "stream" else None
    return "\n".join(parts)


def error_of(cell: Any) -> Any:
    """Return the cell's last error output (the one that ended it), or None."""
    return next((o for o in reversed(cell.outputs) if o.output_type == "error"), None)
