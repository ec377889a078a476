"""Make the server's memory and initial environment unreadable by other processes of its user.

`os.environ.pop` removes a key from the environment kernels inherit, but the bytes the
process was started with stay in `/proc/<pid>/environ`, and `/proc/<pid>/mem` shows the
heap: a kernel knows the server's pid (its parent) and runs as the same user. A process
that is not dumpable has its `/proc/<pid>/` files owned by root and refuses ptrace-style
access to other processes of the same user. Root can still read them. Kernels are exec'd,
and exec makes a process dumpable again, so kernels are unaffected.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Callable

#: From <linux/prctl.h>.
PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def make_non_dumpable(log: logging.Logger) -> bool:
    """Make this process non-dumpable on Linux; return whether it is now (False elsewhere)."""
    if not sys.platform.startswith("linux"):
        log.debug("jupyter-ci: no PR_SET_DUMPABLE on %s; the server stays dumpable", sys.platform)
        return False
    prctl = _prctl()
    if prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        # Never raise: a failing extension would leave the keys in the kernels' environment.
        log.warning("jupyter-ci: prctl(PR_SET_DUMPABLE, 0) failed (%s); other processes of "
                    "this user can read the server's memory", os.strerror(ctypes.get_errno()))
        return False
    log.debug("jupyter-ci: server process is non-dumpable (its /proc files are root's)")
    return True


def is_dumpable() -> bool | None:
    """Return whether this process is dumpable, or None where that cannot be asked."""
    if not sys.platform.startswith("linux"):
        return None
    return bool(_prctl()(PR_GET_DUMPABLE, 0, 0, 0, 0))


def _prctl() -> Callable[..., int]:
    """Return libc's prctl with errno kept."""
    # dlopen(NULL): the symbols already loaded (libc's), without find_library's subprocess.
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl
