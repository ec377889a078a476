"""What a code run did to a working directory: cheap snapshots and the files they show changed.

Both executors use it: the kernel's (`%%ask` in the notebook's folder) and the server's
(REST sessions in their own directories). A walk never follows symlinks, skips hidden
folders and caches (`.git`, `.ipynb_checkpoints`, `__pycache__`, `node_modules`) and stops
after MAX_SCANNED entries, counted as each is read (a folder of 500k symlinks costs what
5,000 do), MAX_ENTRIES files or MAX_DEPTH levels, so a run in a home directory costs
milliseconds, not a crawl; a walk a cap stopped says so (`Scan.cut`).

Where the system allows (POSIX), the walk goes from folder descriptor to folder descriptor,
opening each with O_NOFOLLOW and stating each name without following it: code that swaps a
folder for a symlink while it runs cannot make the walk report files outside the directory.
"""

from __future__ import annotations

import mimetypes
import os
import stat
from dataclasses import dataclass, field
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


@dataclass
class Scan:
    """What one walk found: the files, how many entries it read, and whether a cap cut it."""

    files: Snapshot = field(default_factory=dict)
    #: Directory entries read (every name a folder listed, hidden and skipped ones too).
    scanned: int = 0
    #: A cap stopped the walk (entries, files or depth): `files` is not the whole folder.
    cut: bool = False


def scan(directory: Path, max_scanned: int | None = None) -> Scan:
    """Walk `directory` for its regular files, reading at most `max_scanned` entries."""
    found = Scan()
    if max_scanned is None:  # read now: the cap is the module's (tests lower it)
        max_scanned = MAX_SCANNED
    if not FD_WALK:
        _walk_paths(directory, found, max_scanned)
        return found
    try:
        fd = os.open(directory, DIR_FLAGS)
    except OSError:  # gone (or a link): nothing to report, as os.walk would say
        return found
    try:
        _walk(fd, "", found, max_scanned, 0)
    finally:
        os.close(fd)
    return found


def snapshot(directory: Path) -> Snapshot:
    """Map each regular file under `directory` to (size, mtime_ns), within the caps."""
    return scan(directory).files


def _entries(fd: int, found: Scan, max_scanned: int) -> tuple[list[str], list[str]]:
    """Read a folder's names (folders to enter, other names), counting each as it is read."""
    dirs, files = [], []
    with os.scandir(fd) as entries:
        # Counted as read, never after: sorting first would read a folder of 500k names
        # whole (a second or so) before any cap could apply.
        for entry in entries:
            if found.scanned >= max_scanned:
                found.cut = True
                break
            found.scanned += 1
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if not is_dir:
                files.append(entry.name)
            elif not entry.name.startswith(".") and entry.name not in SKIP_DIRS:
                dirs.append(entry.name)
    # Sorted, so two walks of an unchanged folder cut by the caps cover the same files.
    return sorted(dirs), sorted(files)


def _walk(fd: int, prefix: str, found: Scan, max_scanned: int, depth: int) -> None:
    """Record the regular files under the open folder `fd`, setting `found.cut` at a cap."""
    dirs, files = _entries(fd, found, max_scanned)
    for name in files:
        try:
            stats = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:  # removed meanwhile
            continue
        if stat.S_ISREG(stats.st_mode):
            if len(found.files) >= MAX_ENTRIES:
                found.cut = True
                return
            found.files[prefix + name] = (stats.st_size, stats.st_mtime_ns)
    if dirs and depth >= MAX_DEPTH:
        found.cut = True
        return
    for name in dirs:
        if found.cut:
            return
        try:
            child = os.open(name, DIR_FLAGS, dir_fd=fd)
        except OSError:  # removed, or swapped for a symlink, since it was listed
            continue
        try:
            _walk(child, f"{prefix}{name}/", found, max_scanned, depth + 1)
        finally:
            os.close(child)


def _walk_paths(directory: Path, found: Scan, max_scanned: int) -> None:
    """Fill `found` walking by path (systems without O_NOFOLLOW or dir_fd, e.g. Windows)."""
    top_depth = len(directory.parts)
    for top, dirs, files in os.walk(directory):
        # os.walk lists each folder whole before it yields: the entry cap is counted after
        # the fact here, where no walk by descriptor is possible.
        found.scanned += len(dirs) + len(files)
        if found.scanned > max_scanned:
            found.cut = True
            return
        # Pruned in place: os.walk descends only into what is left, in sorted order, so two
        # snapshots cut by the caps cover the same files.
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
        if dirs and len(Path(top).parts) - top_depth >= MAX_DEPTH:
            found.cut, dirs[:] = True, []
        for name in sorted(files):
            path = Path(top, name)
            try:
                stats = path.lstat()
            except OSError:  # removed or unreadable meanwhile
                continue
            if stat.S_ISREG(stats.st_mode):
                if len(found.files) >= MAX_ENTRIES:
                    found.cut = True
                    return
                found.files[path.relative_to(directory).as_posix()] = (stats.st_size,
                                                                       stats.st_mtime_ns)


def listing(directory: Path) -> list[FileInfo]:
    """List the regular files of the directory, recursively, within the caps."""
    return [info(rel, size) for rel, (size, _) in snapshot(directory).items()]


def changed(directory: Path, before: Snapshot) -> list[FileInfo]:
    """List the files created or changed since `before` was taken."""
    return compare(before, snapshot(directory))


def compare(before: Snapshot, after: Snapshot) -> list[FileInfo]:
    """List the files of `after` that are new or changed since `before`."""
    return [info(rel, stamp[0]) for rel, stamp in after.items() if before.get(rel) != stamp]
