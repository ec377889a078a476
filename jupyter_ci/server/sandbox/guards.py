"""What holds a box's limits beyond `prlimit`: its cgroup, its seccomp filter, no user namespaces.

- Processes and memory: a pids and memory cgroup per box where one can be made (cgroup.py):
  it counts every process, root's too, and shared memory. Without one, RLIMIT_NPROC counts
  processes (not for root: Linux exempts uid 0) and the seccomp filter refuses the memory
  RLIMIT_DATA does not count (shared anonymous maps, memfds, SysV shared memory).
- Nested namespaces: bubblewrap's --disable-userns where it has it, and the filter's
  refusal of unshare/clone with CLONE_NEW* and of clone3, everywhere.

What cannot be enforced here is said once in the log, and by `unenforced()`.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from logging import Logger
from pathlib import Path

from jupyter_ci.server.sandbox import cgroup, seccomp
from jupyter_ci.server.sandbox.box import Limits, disables_userns


@dataclass(frozen=True)
class Guards:
    """A box's cgroup (None: none could be made), filter, and bubblewrap's userns refusal."""

    cgroup: cgroup.Cgroup | None
    seccomp: Path | None
    disable_userns: bool


def guards(name: str, limits: Limits, folder: Path, log: Logger) -> Guards:
    """Make the cgroup `name` (where possible) and the filter of a box with `limits`."""
    made: cgroup.Cgroup | None = None
    if cgroup.problem() is None:
        try:
            made = cgroup.make(name, limits.processes, limits.memory_bytes)
        except OSError as err:
            _warn_once(log, f"a box's cgroup could not be made ({err})")
    why = unenforced(limits, made is not None)
    if why is not None:
        _warn_once(log, why)
    # Without a memory cgroup, refuse the memory that RLIMIT_DATA does not count.
    memory = made is None and limits.memory_bytes > 0
    return Guards(made, seccomp.filter_file(folder, memory), disables_userns())


def unenforced(limits: Limits, with_cgroup: bool | None = None) -> str | None:
    """Say which of the box's limits this server cannot enforce (None: all hold)."""
    if with_cgroup is None:
        with_cgroup = cgroup.problem() is None
    missing = []
    if os.geteuid() == 0 and limits.processes > 0 and not with_cgroup:
        missing.append(f"sandbox_processes ({cgroup.problem() or 'no cgroup'}; Linux exempts "
                       "root from the process limit): run Jupyter as another user, or give "
                       "it a writable pids and memory cgroup")
    if seccomp.ABIS.get(os.uname().machine) is None:
        missing.append(f"the seccomp filter ({os.uname().machine} is not x86_64 or aarch64): "
                       "shared memory escapes sandbox_memory_bytes and nested namespaces "
                       "are refused only where bubblewrap has --disable-userns")
    if not missing:
        return None
    return "a sandboxed kernel's box does not enforce " + "; nor ".join(missing)


@functools.lru_cache(maxsize=16)
def _warn_once(log: Logger, message: str) -> None:
    """Log a warning the first time it is met."""
    log.warning("jupyter-ci: %s", message)
