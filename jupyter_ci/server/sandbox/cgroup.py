"""A pids and memory cgroup per box, where this process may make one (root, or delegated).

Linux exempts uid 0 from RLIMIT_NPROC even in a user namespace, and RLIMIT_DATA counts no
shared memory; a cgroup counts both: every process of the box, and every page it is charged
for (shared mappings and memfds included). Each box gets its own, below this process's
cgroup (so the server's own limits still hold): cgroup v1's `pids` and `memory` hierarchies,
or cgroup v2 where it is mounted and its controllers can be enabled here. The box's first
process joins it before bubblewrap starts (box.py's launcher), so nothing in the box runs
outside it; it is removed when the kernel ends for good.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

CONTROLLERS = ("pids", "memory")
#: The folder, below this process's cgroup, of the boxes' cgroups.
PARENT = "jupyter-ci"
#: Seconds after which an empty box cgroup is a leftover (a server killed before its
#: kernels ended): removed when a server starts. A box being started is younger.
STALE_S = 600.0


@dataclass(frozen=True)
class Cgroup:
    """A box's cgroup: its folders (one per v1 hierarchy, one for v2)."""

    folders: tuple[Path, ...]

    @property
    def procs(self) -> tuple[Path, ...]:
        """Return the files the box's first process writes its pid to."""
        return tuple(folder / "cgroup.procs" for folder in self.folders)


@dataclass(frozen=True)
class _Layout:
    """Where this process's cgroups are: the folders boxes' cgroups go under, and the kind."""

    parents: tuple[Path, ...]
    v2: bool


def make(name: str, processes: int, memory_bytes: int) -> Cgroup:
    """Make (or reuse, on a restart) the cgroup `name` with these limits; OSError if not."""
    layout = _layout()
    if isinstance(layout, str):
        raise OSError(layout)
    folders = tuple(parent / name for parent in layout.parents)
    for folder in folders:
        folder.mkdir(exist_ok=True)
    if layout.v2:
        _write(folders[0] / "pids.max", processes or "max")
        _write(folders[0] / "memory.max", memory_bytes or "max")
        _write(folders[0] / "memory.swap.max", 0, optional=True)
    else:
        pids, memory = folders
        _write(pids / "pids.max", processes or "max")
        _write(memory / "memory.limit_in_bytes", memory_bytes or -1)
        # Swap would hold what the limit pushes out: the same cap, memory and swap together.
        _write(memory / "memory.memsw.limit_in_bytes", memory_bytes or -1, optional=True)
    return Cgroup(folders)


def remove(cgroup: Cgroup) -> None:
    """End what is left in the cgroup and remove it (a few tries: exits take a moment)."""
    for _ in range(50):
        left = [folder for folder in cgroup.folders if folder.exists()]
        if not left:
            return
        for folder in left:
            _kill_all(folder)
            with contextlib.suppress(OSError):
                folder.rmdir()
        time.sleep(0.02)


def problem() -> str | None:
    """Say why boxes cannot get a cgroup here (None when they can): checked once."""
    layout = _layout()
    return layout if isinstance(layout, str) else None


@functools.lru_cache(maxsize=1)
def _layout() -> _Layout | str:
    """Find where this process may make cgroups with both controllers, or say why not."""
    own = _own_cgroups()
    mounts = _mounts()
    v1 = [mounts.get(name) for name in CONTROLLERS]
    try:
        if all(v1) and all(name in own for name in CONTROLLERS):
            parents = tuple(_parent(mount, own[name])
                            for mount, name in zip(v1, CONTROLLERS, strict=True) if mount)
            return _Layout(parents, v2=False)
        if "cgroup2" in mounts and "" in own:
            return _Layout((_parent_v2(mounts["cgroup2"], own[""]),), v2=True)
    except OSError as err:
        return f"no cgroup can be made here ({err})"
    return "neither cgroup v1's pids and memory hierarchies nor cgroup v2 is mounted"


def _parent(mount: Path, own: str) -> Path:
    """Make (or find) the boxes' folder below this process's cgroup of a v1 hierarchy."""
    parent = mount / own.lstrip("/") / PARENT
    parent.mkdir(exist_ok=True)
    _sweep(parent)
    return parent


def _sweep(parent: Path) -> None:
    """Remove the boxes' cgroups left empty long ago (rmdir fails on one still in use)."""
    now = time.time()
    with contextlib.suppress(OSError):
        for child in parent.iterdir():
            with contextlib.suppress(OSError):
                if child.name.startswith("k-") and now - child.stat().st_mtime > STALE_S:
                    child.rmdir()


def _parent_v2(mount: Path, own: str) -> Path:
    """Make the boxes' folder below this process's v2 cgroup, with both controllers on."""
    here = mount / own.lstrip("/")
    enabled = (here / "cgroup.subtree_control").read_text().split()
    if not all(name in enabled for name in CONTROLLERS):
        # Fails (EBUSY) where this cgroup holds processes itself, as v2 wants of a parent.
        _write(here / "cgroup.subtree_control", " ".join(f"+{name}" for name in CONTROLLERS))
    parent = here / PARENT
    parent.mkdir(exist_ok=True)
    _write(parent / "cgroup.subtree_control", " ".join(f"+{name}" for name in CONTROLLERS))
    _sweep(parent)
    return parent


def _own_cgroups() -> dict[str, str]:
    """Return this process's cgroup path by controller ("" for v2), from /proc/self/cgroup."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            for name in names.split(",") if names else [""]:
                found[name] = path
    return found


def _mounts() -> dict[str, Path]:
    """Return the writable mount of each v1 controller we use, and of v2 ("cgroup2")."""
    found: dict[str, Path] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            _, where, kind, options, *_ = line.split()
            flags = options.split(",")
            if "rw" not in flags:
                continue
            if kind == "cgroup2":
                found.setdefault("cgroup2", Path(where))
            elif kind == "cgroup":
                for name in CONTROLLERS:
                    if name in flags:
                        found.setdefault(name, Path(where))
    return found


def _write(path: Path, value: object, optional: bool = False) -> None:
    """Write one cgroup file (a missing optional one is skipped)."""
    if optional and not path.exists():
        return
    path.write_text(f"{value}\n")


def _kill_all(folder: Path) -> None:
    """Kill every process still in a cgroup (its kernel ended; these are its leftovers)."""
    kill = folder / "cgroup.kill"
    with contextlib.suppress(OSError):
        if kill.exists():
            kill.write_text("1\n")
            return
        for pid in (folder / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)
