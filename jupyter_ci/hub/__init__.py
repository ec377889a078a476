"""jupyter-ci on JupyterHub: a Hub-managed service that holds the keys and the policy."""

from jupyter_ci.hub.deploy import configure

__all__ = ["configure"]
