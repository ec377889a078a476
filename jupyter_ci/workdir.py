"""What a code run did to a working directory: cheap snapshots and the files they show changed.

Both executors use it: the kernel's (`%%ask` in the notebook's folder) and the server's
(REST sessions in their own directories). A walk never follows symlinks, skips hidden
folders and caches (`.git`, `.ipynb_checkpoints`, `__pycache__`, `node_modules`) and stops
after MAX_SCANNED entries, so a run in a home directory costs milliseconds, not a crawl.
"""

from __future__ import annotations

import mimetypes
import os
from pathlib import Path

from jupyter_ci.agent.types import FileInfo

#: Files a snapshot records at most.
MAX_ENTRIES = 2_000
#: Directory entries (files and folders) a snapshot looks at, at most.
MAX_SCANNED = 5_000
#: Folders never walked into: caches and tool state, not the user's results.
SKIP_DIRS = frozenset({"__pycache__", "node_modules", ".ipynb_checkpoints"})

#: Relative path -> (size, mtime_ns) of each regular file.
Snapshot = dict[str, tuple[int, int]]


def describe(directory: Path, file: Path) -> FileInfo:
    """Describe one file: its path relative to `directory`, size and MIME type."""
    mime = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
    return FileInfo(file.relative_to(directory).as_posix(), file.stat().st_size, mime)


def snapshot(directory: Path) -> Snapshot:
    """Map each regular file under `directory` to (size, mtime_ns), within the caps."""
    found: Snapshot = {}
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
                if path.is_symlink() or not path.is_file():
                    continue
                info = path.stat()
            except OSError:  # removed or unreadable meanwhile
                continue
            found[path.relative_to(directory).as_posix()] = (info.st_size, info.st_mtime_ns)
            if len(found) >= MAX_ENTRIES or scanned >= MAX_SCANNED:
                return found
        if scanned >= MAX_SCANNED:
            return found
    return found


def listing(directory: Path) -> list[FileInfo]:
    """List the regular files of the directory, recursively, within the caps."""
    return [describe(directory, directory / rel) for rel in snapshot(directory)]


def changed(directory: Path, before: Snapshot) -> list[FileInfo]:
    """List the files created or changed since `before` was taken."""
    found = []
    for rel, stamp in snapshot(directory).items():
        if before.get(rel) != stamp:
            try:
                found.append(describe(directory, directory / rel))
            except OSError:
                continue
    return found
