"""Which box a user's notebook kernel gets: one by default (`c.JupyterCI.notebook_sandbox`).

Every kernel the server starts that is not a REST session's (a notebook's from JupyterLab or
Notebook 7, a console's, the MCP notebook door's) is decided here, at its start:

- a kernelspec that names the sandbox provisioner is boxed, whatever the setting;
- 'never' starts the kernelspec as it is;
- 'auto' boxes it where bubblewrap works, unless the user chose "Run this notebook unboxed"
  for that notebook (choices.py); 'always' boxes it or refuses to start it;
- a Python kernel is boxed as it is (the user's own interpreter, its name kept, so the
  notebook's file and headless runs elsewhere see no change); another language through its
  `<name>-sandboxed` kernelspec where one is installed; else it runs unboxed ('auto') or is
  refused ('always'), with the reason.

The kernel keeps the name it was asked for: the box is given by the kernelspec the kernel's
manager reads during this start alone (a context variable), and its manager keeps that spec
for its restarts. A kernel started through a gateway is the gateway's to box.
"""

from __future__ import annotations

import contextvars
import copy
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from logging import Logger
from typing import Any, cast

from jupyter_client.kernelspec import NATIVE_KERNEL_NAME, KernelSpec

from jupyter_ci.config_sessions import SandboxSettings
from jupyter_ci.server.sandbox import egress
from jupyter_ci.server.sandbox.box import problem
from jupyter_ci.server.sandbox.choices import Choices
from jupyter_ci.server.sandbox.environ import ENV_HOSTS, ENV_SESSION, NOTEBOOK_BOX, PROVISIONER
from jupyter_ci.wire.box import BoxStatus, NotebookSandbox

_HOOKED = "_jupyter_ci_notebook_boxes"
#: The boxed kernelspec of the kernel being started in this context, by the names it is read.
_boxing: contextvars.ContextVar[tuple[frozenset[str], KernelSpec] | None] = \
    contextvars.ContextVar("jupyter_ci_boxing", default=None)
#: What the unboxed choice is called in the page.
UNBOX_COMMAND = "Run this notebook unboxed"


class CannotBox(RuntimeError):
    """A notebook kernel that must be boxed and cannot be: the message says why."""


@dataclass(frozen=True)
class Placed:
    """Whether a kernel runs boxed, why not, and the notebook it was started for."""

    boxed: bool
    reason: str
    notebook: str


@dataclass
class NotebookBoxes:
    """Box the kernels the server starts for the user's notebooks."""

    manager: Any
    settings: SandboxSettings
    root_dir: str
    choices: Choices
    log: Logger
    #: The least setting a JupyterHub's policy allows (users' settings cannot go below).
    floor: Callable[[], NotebookSandbox] = lambda: "never"
    kernels: dict[str, Placed] = field(default_factory=dict)

    def setting(self) -> NotebookSandbox:
        """Return the setting in force: the user's, raised to the Hub's floor."""
        order: list[NotebookSandbox] = ["never", "auto", "always"]
        mine = cast(NotebookSandbox, self.settings.notebook_sandbox)  # the trait's Enum
        return max(mine, self.floor(), key=order.index)

    def hook(self) -> None:
        """Wrap the kernel manager's start and its kernelspec manager's lookup (once)."""
        if getattr(self.manager, _HOOKED, False):
            return
        start = self.manager.start_kernel
        specs = self.manager.kernel_spec_manager
        lookup = specs.get_kernel_spec

        async def start_kernel(*, kernel_id: str | None = None, **kwargs: Any) -> str:
            if (kernel_id is not None and kernel_id in self.manager) or \
                    (kwargs.get("env") or {}).get(ENV_SESSION) == "1":
                return str(await start(kernel_id=kernel_id, **kwargs))
            return await self._start(start, kernel_id, kwargs)

        def get_kernel_spec(kernel_name: str, *args: Any, **kwargs: Any) -> Any:
            boxing = _boxing.get()
            if boxing is not None and kernel_name in boxing[0]:
                return boxing[1]
            return lookup(kernel_name, *args, **kwargs)

        self.manager.start_kernel = start_kernel
        specs.get_kernel_spec = get_kernel_spec
        self._lookup = lookup
        setattr(self.manager, _HOOKED, True)

    async def _start(self, start: Any, kernel_id: str | None, kwargs: dict[str, Any]) -> str:
        """Start a notebook's kernel in the box this module decides."""
        env = dict(os.environ if kwargs.get("env") is None else kwargs["env"])
        notebook = self.notebook_of(env)
        name = kwargs.get("kernel_name") or self.manager.default_kernel_name
        spec, placed = self.decide(name, notebook)
        env[ENV_HOSTS] = ",".join(self.choices.hosts(notebook)) if notebook else ""
        kwargs["env"] = env
        names = frozenset({name, NATIVE_KERNEL_NAME} if name == "python" else {name})
        token = _boxing.set((names, spec) if spec is not None else None)
        try:
            started = str(await start(kernel_id=kernel_id, **kwargs))
        finally:
            _boxing.reset(token)
        for gone in [k for k in self.kernels if k not in self.manager]:
            del self.kernels[gone]
        self.kernels[started] = placed
        return started

    def decide(self, name: str, notebook: str) -> tuple[KernelSpec | None, Placed]:
        """Return the boxed kernelspec to start for `name` (None: as it is) and the placing."""
        spec = self._lookup(NATIVE_KERNEL_NAME if name == "python" else name)
        metadata = spec.metadata or {}
        provisioner = metadata.get("kernel_provisioner") or {}
        named = provisioner.get("provisioner_name") if isinstance(provisioner, dict) else None
        if named == PROVISIONER:
            return None, Placed(True, "", notebook)
        setting = self.setting()
        if setting == "never":
            return None, Placed(False, "c.JupyterCI.notebook_sandbox is 'never'", notebook)
        if setting == "auto" and notebook and self.choices.unboxed(notebook):
            return None, Placed(False, f"you chose '{UNBOX_COMMAND}' for it", notebook)
        why = problem()
        if why is None and named:
            why = f"its kernelspec {name!r} names its own provisioner ({named})"
        boxed = None if why else self._boxed_spec(name, spec)
        if boxed is None:
            why = why or (f"the kernel {name!r} has no sandboxed kernelspec "
                          f"({name}-sandboxed): see the README's sandbox section")
            if setting == "always":
                raise CannotBox(f"This server runs every notebook kernel in a box "
                                f"(c.JupyterCI.notebook_sandbox = 'always'), and it cannot "
                                f"box this one: {why}.")
            self.log.warning("jupyter-ci: a notebook kernel (%s) runs UNBOXED: %s", name, why)
            return None, Placed(False, why, notebook)
        return boxed, Placed(True, "", notebook)

    def _boxed_spec(self, name: str, spec: KernelSpec) -> KernelSpec | None:
        """Return `spec` boxed: a Python kernel as it is, another by its sandboxed twin."""
        if spec.language.lower() != "python":
            try:
                spec = self._lookup(f"{name}-sandboxed")
            except Exception:  # no such kernelspec (jupyter_client's NoSuchKernel)
                return None
            provisioner = (spec.metadata or {}).get("kernel_provisioner") or {}
            if provisioner.get("provisioner_name") != PROVISIONER:
                return None
        metadata = copy.deepcopy(spec.metadata or {})
        # A twin keeps its provisioner's own config.
        metadata.setdefault("kernel_provisioner", {"provisioner_name": PROVISIONER, "config": {}})
        # The user's own notebook in its box: its outputs are trusted as any notebook's are
        # (broker/model_code.py), unlike a kernel chosen by its sandboxed kernelspec.
        metadata[NOTEBOOK_BOX] = True
        return KernelSpec(resource_dir=spec.resource_dir, **{**spec.to_dict(),
                                                             "metadata": metadata})

    def notebook_of(self, env: dict[str, str]) -> str:
        """Return the notebook a start is for, relative to Jupyter's root ("" if none)."""
        # jupyter_server's session manager names the notebook (its OS path when it knows
        # the file's name, else its path relative to the root).
        path = env.get("JPY_SESSION_NAME", "")
        if not path:
            return ""
        if os.path.isabs(path):
            root = os.path.realpath(self.root_dir)
            real = os.path.realpath(path)
            if os.path.commonpath([root, real]) != root:
                return ""
            path = os.path.relpath(real, root)
        return path.strip("/")

    def status(self, kernel_id: str) -> BoxStatus | None:
        """Return what the page shows of a kernel's box (None: no such kernel here)."""
        if kernel_id not in self.manager:
            return None
        placed = self.kernels.get(kernel_id) or Placed(False, "it was started before "
                                                       "jupyter-ci was loaded", "")
        setting = self.setting()
        network = tuple(egress.entries(kernel_id)) if placed.boxed else ()
        refused = tuple(egress.refusals(kernel_id)) if placed.boxed else ()
        return BoxStatus(kernel_id, placed.boxed, placed.reason, placed.notebook, setting,
                         setting != "always", network, refused)

    def allow(self, notebook: str, host: str) -> None:
        """Let a notebook's boxes reach `host`, now and at their next starts."""
        self.choices.allow(notebook, host)
        for kernel_id, placed in list(self.kernels.items()):
            if placed.boxed and placed.notebook == notebook.strip("/"):
                egress.allow(kernel_id, [host])
