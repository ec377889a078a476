"""Which kernels ran model-written code since they started: the page runs none of their script.

Model-written code can leave hooks behind in its kernel (an IPython `post_run_cell` callback,
an HTML formatter, a patched `_repr_html_`, `sys.displayhook`) that put script into the
outputs of the user's own later cells, which JupyterLab would render trusted. So once model
code ran in a kernel, the labextension renders none of that kernel's outputs as trusted until
it restarts (labextension/src/outputtrust.ts), and a sandboxed kernel's never.

What marks a kernel, each before any model-written code runs there: the `%%ask` magic at the
start of each ask (its kernel's credential, on the model service's route), the page when it
sees an ask start or runs an ask's cell (the user's Jupyter login), and the start of a REST
session's kernel (everything it runs is a client's or a model's). A restart (the user's, or
the automatic one of a kernel that died) starts a new process without the hooks: the mark
goes, and with the kernel's end. A page that loads or reconnects asks here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from jupyter_ci.server.sandbox.environ import NOTEBOOK_BOX
from jupyter_ci.server.sandbox.provisioner import NAME as SANDBOX_PROVISIONER

#: The route of the page: GET what it must know of a kernel, POST that model code ran there.
PAGE_ROUTE = r"/jupyter-ci/kernels/(?P<kernel_id>[0-9A-Za-z_.:-]{1,128})/model-code"


@dataclass
class ModelCodeKernels:
    """The ids of the kernels where model-written code may have run since their start."""

    ids: set[str] = field(default_factory=set)

    def mark(self, kernel_id: str) -> None:
        """Remember that model code is about to run (or ran) in `kernel_id`."""
        self.ids.add(kernel_id)

    def forget(self, kernel_id: str) -> None:
        """Forget a kernel that restarted (a new process) or ended."""
        self.ids.discard(kernel_id)

    def __contains__(self, kernel_id: object) -> bool:
        return kernel_id in self.ids


def sandboxed(kernel: Any) -> bool:
    """Tell a kernel chosen by a sandboxed kernelspec, whose outputs no one trusts.

    A notebook's kernel boxed by `notebook_sandbox` is the user's own: its outputs are
    trusted as an unboxed kernel's are, until model code runs there (the marks above).
    """
    spec = getattr(kernel, "kernel_spec", None)
    metadata = getattr(spec, "metadata", None) or {}
    if metadata.get(NOTEBOOK_BOX):
        return False
    named = (metadata.get("kernel_provisioner") or {}).get("provisioner_name")
    return named == SANDBOX_PROVISIONER or str(getattr(kernel, "kernel_name", "")).endswith(
        "-sandboxed")


class ModelCodeHandler(APIHandler):
    """GET whether a kernel's outputs may run script; POST that model code runs there."""

    auth_resource = "jupyter_ci"

    def initialize(self, kernels: ModelCodeKernels) -> None:
        """Keep the registry of marked kernels."""
        self.kernels = kernels

    @web.authenticated
    @authorized
    def get(self, kernel_id: str) -> None:
        """Answer {model_code, sandboxed} for a kernel of this server (404 for another)."""
        self._answer(kernel_id)

    @web.authenticated
    @authorized
    def post(self, kernel_id: str) -> None:
        """Mark the kernel; answer as GET does."""
        if kernel_id in self.kernel_manager:
            self.kernels.mark(kernel_id)
        self._answer(kernel_id)

    def _answer(self, kernel_id: str) -> None:
        if kernel_id not in self.kernel_manager:
            self.set_status(404)
            self.finish(json.dumps({"reason": "no_such_kernel", "message":
                                    f"This server runs no kernel {kernel_id!r}."}))
            return
        kernel = self.kernel_manager.get_kernel(kernel_id)
        self.finish(json.dumps({"model_code": kernel_id in self.kernels,
                                "sandboxed": sandboxed(kernel)}))
