"""The memory limit of a box without a cgroup: the whole box's, watched, not each process's.

Without a memory cgroup (any server that is not root and has no delegated cgroup), the
kernel's RLIMIT_DATA caps each process alone: five processes held 1,040 MiB in a 256 MiB
box. So a thread of the process that hosts the provisioner (the server, nbclient) looks at
every box it started, every WATCH_S seconds: the memory its processes hold (their PSS, what
each holds of the pages it shares counted once across them) against `sandbox_memory_bytes`;
a box past it is ended whole (SIGKILL to every process of it), and why is kept for the
kernel's death to be told (`death()`).

What it guarantees: a box holds at most its limit for longer than WATCH_S plus the time of a
look (about a millisecond a process), and each process at most the limit at any instant
(RLIMIT_DATA), so a burst can pass the limit by at most one process's worth for that long.
Memory the box holds outside its processes (its /tmp and /dev/shm, tmpfs) is capped by
their sizes (`sandbox_tmp_bytes` and 64 MiB), not counted here.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

#: Seconds between looks at the boxes.
WATCH_S = 0.2
_PAGE = resource.getpagesize()


@dataclass(frozen=True)
class Watched:
    """A box: its first process (bubblewrap's launcher) and its limit in bytes."""

    pid: int
    limit: int


_lock = threading.Lock()
_boxes: dict[str, Watched] = {}
_deaths: dict[str, str] = {}
_thread: threading.Thread | None = None


def watch(name: str, pid: int, limit: int) -> None:
    """Watch the box whose first process is `pid` (named by its kernel) against `limit`."""
    global _thread
    with _lock:
        _boxes[name] = Watched(pid, limit)
        _deaths.pop(name, None)
        if _thread is None:
            _thread = threading.Thread(target=_run, name="jupyter-ci-box-memory", daemon=True)
            _thread.start()


def forget(name: str) -> None:
    """Stop watching a box (its kernel ended for good)."""
    with _lock:
        _boxes.pop(name, None)
        _deaths.pop(name, None)


def death(name: str) -> str:
    """Return why this module ended the box `name` ("" if it did not)."""
    with _lock:
        return _deaths.get(name, "")


def held(pid: int) -> tuple[int, list[int]]:
    """Return the bytes the processes below `pid` hold (its own included), and their ids."""
    pids = descendants(pid)
    return sum(_pss(p) for p in pids), pids


def descendants(pid: int) -> list[int]:
    """Return `pid` and every process below it, parents first."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop(0)
        found.append(current)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{current}/task"):
                children = Path(f"/proc/{current}/task/{task}/children").read_text().split()
                queue.extend(int(child) for child in children)
    return list(dict.fromkeys(found))


def _pss(pid: int) -> int:
    """Return the proportional memory a process holds (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:  # before Linux 4.14: the resident set, shared pages counted in each
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _run() -> None:
    """Look at every box in turn, for ever (a daemon thread)."""
    stop = threading.Event()
    while not stop.wait(WATCH_S):
        with _lock:
            boxes = list(_boxes.items())
        for name, box in boxes:
            _look(name, box)


def _look(name: str, box: Watched) -> None:
    """End the box if its processes hold more than its limit."""
    total, pids = held(box.pid)
    if total <= box.limit:
        return
    # The deepest first: none is left to start another while the others end.
    for pid in reversed(pids):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    why = (f"out of memory in its box: its processes held {total >> 20} MiB, over "
           f"c.JupyterCI.sandbox_memory_bytes ({box.limit >> 20} MiB)")
    with _lock:
        if name in _boxes:
            _deaths[name] = why
            del _boxes[name]
