"""Which kernel a REST session starts, boxed or not (`c.JupyterCI.session_sandbox`).

A session asks for a kernel by name (or the server's default). Boxing it means starting a
kernelspec that names the sandbox provisioner: `python3-sandboxed` (installed with the
package) for the default Python kernel, `<name>-sandboxed` for another kernel (such as the
`bash-sandboxed` that scripts/install-languages.sh writes), or any kernelspec a session names
whose metadata names the provisioner itself.

Where a box can run (bubblewrap works here; with a gateway, it offers a sandboxed
kernelspec), every session is boxed or refused, whatever kernel or language the client (an
app's user, a prompt-injected agent) names: a kernel without a sandboxed kernelspec is a 400
naming what would allow it. Only where no box can run at all does `auto` start sessions
unboxed, with a warning in the log and the reason in the session's info; `always` then
refuses them too. `never` starts what is asked for, unboxed unless it names a box itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from logging import Logger
from typing import Any

from jupyter_core.utils import ensure_async

from jupyter_ci.models.broker import ENV_REST_SESSION
from jupyter_ci.server.gateway import is_gateway
from jupyter_ci.server.sandbox.box import problem
from jupyter_ci.server.sandbox.environ import ENV_PASS, ENV_SESSION
from jupyter_ci.server.sandbox.provisioner import NAME as PROVISIONER
from jupyter_ci.server.sessions.errors import CannotSandbox, SandboxRequired, SessionError

#: The kernelspec the package installs: the default Python kernel, boxed.
SANDBOXED_PYTHON = "python3-sandboxed"
PYTHONS = frozenset({"python3", "python"})


@dataclass(frozen=True)
class Choice:
    """The kernelspec a session starts, whether it runs in a box, and if not, why."""

    kernel_name: str
    sandboxed: bool
    unboxed_reason: str = ""


async def choose(mode: str, requested: str | None, default: str, km: Any, log: Logger
                 ) -> Choice:
    """Pick the kernelspec for a session asking for `requested` (None: the default)."""
    name = requested or default
    specs = await _specs(km)
    if name not in specs and boxed_name(name) not in specs:
        raise SessionError(f"There is no kernel named {name!r}; this server has: "
                           f"{', '.join(sorted(specs))}.")
    if _boxes(specs.get(name)):
        return Choice(name, True)  # a sandboxed kernelspec named by the client
    if mode == "never":
        return Choice(name, False, "c.JupyterCI.session_sandbox is 'never'")
    gateway = is_gateway(km)
    why = _no_box(specs, gateway)
    if why is None:
        if _boxes(specs.get(boxed_name(name))):
            return Choice(boxed_name(name), True)
        raise SandboxRequired(_needs_box(name, mode, gateway))
    if mode == "always":
        raise CannotSandbox(f"This server boxes every session (c.JupyterCI.session_sandbox = "
                            f"'always'), and it cannot box this one: {why}.")
    log.warning("jupyter-ci: a REST session runs UNBOXED (c.JupyterCI.session_sandbox = "
                "'auto'), as no box can run here: %s. Its code can read the server's files "
                "and reach the network.", why)
    return Choice(name, False, f"no box can run here: {why}")


def session_environ(env: dict[str, str] | None) -> dict[str, str]:
    """Return a session kernel's start env: the client's variables, then that it is one."""
    given = env or {}
    return {**os.environ, **given, ENV_SESSION: "1", ENV_REST_SESSION: "1",
            ENV_PASS: ",".join(given)}


def boxed_name(name: str) -> str:
    """Return the name of a kernel's sandboxed kernelspec."""
    return SANDBOXED_PYTHON if name in PYTHONS else f"{name}-sandboxed"


def _no_box(specs: dict[str, object], gateway: bool) -> str | None:
    """Say why no session can be boxed here at all (None when a box can run)."""
    if gateway:
        if any(_boxes(spec) for spec in specs.values()):
            return None  # the gateway's machine boxes them; this one need not be able to
        return (f"the gateway offers no kernelspec naming the {PROVISIONER!r} provisioner "
                f"(install jupyter-ci beside the gateway for {SANDBOXED_PYTHON!r})")
    return problem()


def _needs_box(name: str, mode: str, gateway: bool) -> str:
    """Say that the kernel `name` has no sandboxed kernelspec, and what would allow it."""
    where = "the gateway has" if gateway else "this server has"
    how = ("pip install jupyter-ci installs it" if name in PYTHONS else
           "scripts/install-languages.sh writes bash's and R's; see the README's sandbox "
           "section for writing one")
    rule = "in a box" if mode == "always" else "in a box where it can"
    return (f"This server runs every session {rule} (c.JupyterCI.session_sandbox = "
            f"{mode!r}), and the kernel {name!r} has no sandboxed "
            f"kernelspec: {where} no {boxed_name(name)!r} whose metadata names the "
            f"{PROVISIONER!r} provisioner ({how}). Ask for a kernel that has one, install "
            f"{boxed_name(name)!r}, or let sessions run unboxed, where their code can read "
            "the server's files and token, with c.JupyterCI.session_sandbox = 'never'.")


def _boxes(spec: Any) -> bool:
    """Tell a kernelspec (a model dict, or a KernelSpec) that names the sandbox provisioner."""
    if spec is None:
        return False
    if isinstance(spec, dict):
        spec = spec.get("spec", spec)
        metadata = spec.get("metadata") or {}
    else:
        metadata = getattr(spec, "metadata", None) or {}
    provisioner = metadata.get("kernel_provisioner") or {}
    return isinstance(provisioner, dict) and provisioner.get("provisioner_name") == PROVISIONER


async def _specs(km: Any) -> dict[str, object]:
    """Return the kernelspecs the kernel manager can start, by name."""
    found = await ensure_async(km.kernel_spec_manager.get_all_specs())
    specs = found.get("kernelspecs", found) if isinstance(found, dict) else {}
    return dict(specs)
