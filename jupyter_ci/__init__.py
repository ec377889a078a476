"""jupyter-ci: a code interpreter inside Jupyter."""

from __future__ import annotations

from typing import Any

from jupyter_ci._version import __version__

__all__ = ["__version__"]


def load_ipython_extension(ipython: Any) -> None:
    """Register the %ask and %%ask magics (`%load_ext jupyter_ci`)."""
    from jupyter_ci.kernel.magics import register

    register(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyter-ci"}]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from jupyter_ci.server.app import JupyterCIApp

    return [{"module": "jupyter_ci.server.app", "app": JupyterCIApp}]
