"""Give a kernel the server is starting its activity fields before anyone can read them.

jupyter_client's `MultiKernelManager._async_start_kernel` registers the new kernel's
manager (`_kernels[kernel_id] = km`, in the task `_add_kernel_when_ready`) and resumes
only at a later turn of the event loop; jupyter_server sets `last_activity` and
`execution_state` when it resumes. A request handled in between (`GET /api/kernels`,
`/api/status`, which JupyterLab and JupyterHub poll) reads `last_activity` unset: a
`TraitError` and a 500, a few times per burst of kernel starts (docs/upstream/
kernel_model_race.md). `pre_start_kernel` makes each kernel's manager before it is
registered, whichever door starts it: set the fields there, as jupyter_server would.
"""

from __future__ import annotations

from typing import Any

from jupyter_server._tz import utcnow

_HOOKED = "_jupyter_ci_fills_starting_kernels"


def fill_starting_kernels(manager: Any) -> bool:
    """Set `last_activity` and `execution_state` on each kernel `manager` makes; False if none."""
    if getattr(manager, _HOOKED, False):
        return True
    pre_start = getattr(manager, "pre_start_kernel", None)
    if not callable(pre_start):
        return False  # not a jupyter_client MultiKernelManager: nothing to fill

    def pre_start_kernel(kernel_name: str | None, kwargs: Any) -> Any:
        made = pre_start(kernel_name, kwargs)
        # As jupyter_server sets them on every kernel once its start resumes.
        made[0].last_activity, made[0].execution_state = utcnow(), "starting"
        return made

    manager.pre_start_kernel = pre_start_kernel
    setattr(manager, _HOOKED, True)
    return True

