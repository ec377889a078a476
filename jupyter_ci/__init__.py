"""jupyter-ci: a code interpreter inside Jupyter."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from jupyter_ci._version import __version__

if TYPE_CHECKING:
    from jupyter_server.extension.application import ExtensionApp

__all__ = ["__version__"]


def load_ipython_extension(ipython: Any) -> None:
    """Register the %ask and %%ask magics (`%load_ext jupyter_ci`)."""
    from jupyter_ci.kernel.magics import register

    register(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyter-ci"}]


class _ExtensionPoint(TypedDict):
    """What Jupyter Server loads: the module, and its extension app."""

    module: str
    app: type[ExtensionApp]


def _jupyter_server_extension_points() -> list[_ExtensionPoint]:
    from jupyter_ci.server.app import JupyterCIApp

    return [{"module": "jupyter_ci.server.app", "app": JupyterCIApp}]
