"""Which kernel a REST session starts, boxed or not (`c.JupyterCI.session_sandbox`).

A session asks for a kernel by name (or the server's default). Boxing it means starting a
kernelspec that names the sandbox provisioner: `python3-sandboxed` (installed with the
package) for the default Python kernel, `<name>-sandboxed` for another kernel (such as the
`bash-sandboxed` that scripts/install-languages.sh writes), or any kernelspec a session names
whose metadata names the provisioner itself. `auto` boxes where it can and says so in the log
when it cannot; `always` refuses a session it cannot box, saying what is missing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from logging import Logger
from typing import Any

from jupyter_core.utils import ensure_async

from jupyter_ci.server.gateway import is_gateway
from jupyter_ci.server.sandbox.box import problem
from jupyter_ci.server.sandbox.environ import ENV_PASS, ENV_SESSION
from jupyter_ci.server.sandbox.provisioner import NAME as PROVISIONER

#: The kernelspec the package installs: the default Python kernel, boxed.
SANDBOXED_PYTHON = "python3-sandboxed"
PYTHONS = frozenset({"python3", "python"})


class CannotBox(Exception):
    """`session_sandbox = "always"` and this session's kernel cannot be boxed."""


@dataclass(frozen=True)
class Choice:
    """The kernelspec a session starts, and whether it runs in a box."""

    kernel_name: str
    sandboxed: bool


async def choose(mode: str, requested: str | None, default: str, km: Any, log: Logger
                 ) -> Choice:
    """Pick the kernelspec for a session asking for `requested` (None: the default)."""
    name = requested or default
    specs = await _specs(km)
    if _boxes(specs.get(name)):
        return Choice(name, True)  # a sandboxed kernelspec named by the client
    if mode == "never":
        return Choice(name, False)
    why = _why_not(name, specs, gateway=is_gateway(km))
    if why is None:
        return Choice(boxed_name(name), True)
    if mode == "always":
        raise CannotBox(f"This server boxes every session (c.JupyterCI.session_sandbox = "
                        f"'always'), and it cannot box this one: {why}.")
    log.warning("jupyter-ci: a REST session runs UNBOXED (c.JupyterCI.session_sandbox = "
                "'auto'): %s. Its code can read the server's files and reach the network.", why)
    return Choice(name, False)


def session_environ(env: dict[str, str] | None) -> dict[str, str]:
    """Return a session kernel's start env: the client's variables, then that it is one."""
    given = env or {}
    return {**os.environ, **given, ENV_SESSION: "1", ENV_PASS: ",".join(given)}


def boxed_name(name: str) -> str:
    """Return the name of a kernel's sandboxed kernelspec."""
    return SANDBOXED_PYTHON if name in PYTHONS else f"{name}-sandboxed"


def _why_not(name: str, specs: dict[str, Any], gateway: bool) -> str | None:
    """Say why the kernel `name` cannot be boxed here (None when it can)."""
    if name not in PYTHONS and not _boxes(specs.get(boxed_name(name))):
        # Deno's kernel speaks ZMQ over tcp only, and a box has no network to carry it.
        return (f"the kernel {name!r} has no sandboxed kernelspec ({boxed_name(name)!r}, "
                f"whose metadata names the {PROVISIONER!r} provisioner: "
                "scripts/install-languages.sh writes bash's; Deno's kernel cannot be boxed, "
                "as it speaks ZMQ over tcp only; see the README's sandbox section)")
    if name in PYTHONS and not _boxes(specs.get(SANDBOXED_PYTHON)):
        where = "the gateway" if gateway else "this server"
        return (f"{where} has no {SANDBOXED_PYTHON!r} kernelspec naming the {PROVISIONER!r} "
                "provisioner (pip install jupyter-ci installs it)")
    if gateway:
        return None  # the gateway's machine boxes it; this one need not be able to
    return problem()


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


async def _specs(km: Any) -> dict[str, Any]:
    """Return the kernelspecs the kernel manager can start, by name."""
    found = await ensure_async(km.kernel_spec_manager.get_all_specs())
    specs = found.get("kernelspecs", found) if isinstance(found, dict) else {}
    return dict(specs)
