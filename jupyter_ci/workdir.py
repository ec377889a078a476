"""What a code run did to a working directory: cheap snapshots and the files they show changed.

Both executors use it: the kernel's (`%%ask` in the notebook's folder) and the server's
(REST sessions in their own directories). A walk never follows symlinks, skips hidden
folders and caches (`.git`, `.ipynb_checkpoints`, `__pycache__`, `node_modules`) and stops
after MAX_SCANNED entries, so a run in a home directory costs milliseconds, not a crawl.

Where the system allows (POSIX), the walk goes from folder descriptor to folder descriptor,
opening each with O_NOFOLLOW and stating each name without following it: code that swaps a
folder for a symlink while it runs cannot make the walk report files outside the directory.
"""

from __future__ import annotations

import mimetypes
import os
import stat
from pathlib import Path

from jupyter_ci.agent.types import FileInfo

#: Files a snapshot records at most.
MAX_ENTRIES = 2_000
#: Directory entries (files and folders) a snapshot looks at, at most.
MAX_SCANNED = 5_000
#: Folder levels walked into at most (each level holds an open descriptor while walked).
MAX_DEPTH = 64
#: Folders never walked into: caches and tool state, not the user's results.
SKIP_DIRS = frozenset({"__pycache__", "node_modules", ".ipynb_checkpoints"})

#: Relative path -> (size, mtime_ns) of each regular file.
Snapshot = dict[str, tuple[int, int]]

_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY: int = getattr(os, "O_DIRECTORY", 0)
#: Flags that open a folder, and only a folder that is not a symlink.
DIR_FLAGS = os.O_RDONLY | _NOFOLLOW | _DIRECTORY | getattr(os, "O_CLOEXEC", 0)
#: Whether folders can be walked by descriptor (POSIX); else by path, links still not followed.
FD_WALK = bool(_NOFOLLOW and _DIRECTORY) and os.scandir in os.supports_fd and {
    os.open, os.stat} <= os.supports_dir_fd


def info(path: str, size: int) -> FileInfo:
    """Describe one file as listed: its relative path, size and MIME type."""
    return FileInfo(path, size, mimetypes.guess_type(path)[0] or "application/octet-stream")


def snapshot(directory: Path) -> Snapshot:
    """Map each regular file under `directory` to (size, mtime_ns), within the caps."""
    found: Snapshot = {}
    if not FD_WALK:
        _walk_paths(directory, found)
        return found
    try:
        fd = os.open(directory, DIR_FLAGS)
    except OSError:  # gone (or a link): nothing to report, as os.walk would say
        return found
    try:
        _walk(fd, "", found, [0], 0)
    finally:
        os.close(fd)
    return found


def _walk(fd: int, prefix: str, found: Snapshot, scanned: list[int], depth: int) -> bool:
    """Record the regular files under the open folder `fd`; True once a cap is reached."""
    dirs, files = [], []
    with os.scandir(fd) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if not is_dir:
                files.append(entry.name)
            elif not entry.name.startswith(".") and entry.name not in SKIP_DIRS:
                dirs.append(entry.name)
    scanned[0] += len(dirs)
    for name in files:
        scanned[0] += 1
        try:
            stats = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:  # removed meanwhile
            continue
        if stat.S_ISREG(stats.st_mode):
            found[prefix + name] = (stats.st_size, stats.st_mtime_ns)
        if len(found) >= MAX_ENTRIES or scanned[0] >= MAX_SCANNED:
            return True
    if scanned[0] >= MAX_SCANNED:
        return True
    if depth >= MAX_DEPTH:
        return False
    for name in dirs:
        try:
            child = os.open(name, DIR_FLAGS, dir_fd=fd)
        except OSError:  # removed, or swapped for a symlink, since it was listed
            continue
        try:
            if _walk(child, f"{prefix}{name}/", found, scanned, depth + 1):
                return True
        finally:
            os.close(child)
    return False


def _walk_paths(directory: Path, found: Snapshot) -> None:
    """Fill `found` walking by path (systems without O_NOFOLLOW or dir_fd, e.g. Windows)."""
    scanned = 0
    for top, dirs, files in os.walk(directory):
        # Pruned in place: os.walk descends only into what is left, in sorted order, so two
        # snapshots cut by the caps cover the same files.
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
        scanned += len(dirs)
        for name in sorted(files):
            scanned += 1
            path = Path(top, name)
            try:
                stats = path.lstat()
            except OSError:  # removed or unreadable meanwhile
                continue
            if stat.S_ISREG(stats.st_mode):
                found[path.relative_to(directory).as_posix()] = (stats.st_size,
                                                                 stats.st_mtime_ns)
            if len(found) >= MAX_ENTRIES or scanned >= MAX_SCANNED:
                return
        if scanned >= MAX_SCANNED:
            return


def listing(directory: Path) -> list[FileInfo]:
    """List the regular files of the directory, recursively, within the caps."""
    return [info(rel, size) for rel, (size, _) in snapshot(directory).items()]


def changed(directory: Path, before: Snapshot) -> list[FileInfo]:
    """List the files created or changed since `before` was taken."""
    return [info(rel, stamp[0]) for rel, stamp in snapshot(directory).items()
            if before.get(rel) != stamp]
