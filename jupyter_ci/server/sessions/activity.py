"""Jupyter Server's bookkeeping of a session's kernel, kept once per run, not once per message.

Jupyter Server subscribes to the IOPub channel of every kernel it starts to keep its
`execution_state` and `last_activity` (what /api/kernels shows, and what its kernel culler
and `shutdown_no_activity_timeout` read): every message of every run is received a second
time on the server's event loop and decoded again, its dates parsed, after the session's own
client read it. A REST execute is a handful of such messages: about a tenth of a small
execute's round trip (issue 24). For a session's kernel that subscription is closed, and the
session manager records the same at each run's start (busy) and end (idle) instead: the
kernel reads busy while it runs code, idle with the time of its last run's end otherwise.
"""

from __future__ import annotations

from typing import Any

from jupyter_server._tz import utcnow

#: Marks a kernel whose activity the sessions record themselves.
_MARK = "_jupyter_ci_runs_recorded"


def unwatch(km: Any, kernel_id: str) -> None:
    """Close Jupyter Server's own watch of a session kernel's messages (local kernels only)."""
    if kernel_id not in km:
        return
    kernel = km.get_kernel(kernel_id)
    stop = getattr(km, "stop_watching_activity", None)
    if stop is None or getattr(kernel, "_activity_stream", None) is None:
        return  # a gateway's kernel (the gateway keeps its own), or not watched at all
    stop(kernel_id)
    setattr(kernel, _MARK, True)
    # Unwatched when no run is in flight (a new session, a reconnect): its last word may be
    # the busy of its start-up kernel_info, whose idle the closed watch would never hear.
    kernel.execution_state = "idle"


def record(km: Any, kernel_id: str, state: str) -> None:
    """Say that a session kernel's run started ("busy") or ended ("idle"), as the watch did."""
    kernel = km.get_kernel(kernel_id) if kernel_id in km else None
    if kernel is None or not getattr(kernel, _MARK, False):
        return
    if getattr(kernel, "_activity_stream", None) is not None:
        return  # watched again (a restart that moved its ports): Jupyter keeps it then
    km.last_kernel_activity = kernel.last_activity = utcnow()
    kernel.execution_state = state
