"""A session's files: paths that cannot leave its directory, listings, and what a run changed."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, TypeVar

from jupyter_ci import workdir

_CHUNK = 64 * 1024
_NAME_MAX = 255  # bytes in one path component on Linux and macOS filesystems
T = TypeVar("T")


class PathRefused(ValueError):
    """A path that is not a file inside the session's directory."""


def resolve(directory: Path, path: str) -> Path:
    """Return `path` inside `directory`, refusing absolute paths, `..` and symlinks out."""
    if not path or "\x00" in path or path.endswith("/"):
        raise PathRefused("Give a file path relative to the session's directory.")
    parts = PurePosixPath(path).parts
    if PurePosixPath(path).is_absolute() or "\\" in path or any(p in ("..", ".") for p in parts):
        raise PathRefused(f"{path!r} is not a relative path inside the session's directory "
                          "(no leading /, no '..').")
    if any(len(p.encode()) > _NAME_MAX for p in parts):
        raise PathRefused(f"A name in {path[:80]!r}... is over {_NAME_MAX} bytes.")
    root = directory.resolve()
    target = root.joinpath(*parts)
    # A symlink anywhere on the way may point outside: judge where it really leads.
    if not target.resolve().is_relative_to(root):
        raise PathRefused(f"{path!r} leads outside the session's directory.")
    return target


def describe(directory: Path, file: Path) -> dict[str, Any]:
    """Describe one file as the API lists it: relative path, size and MIME type."""
    return asdict(workdir.describe(directory, file))


def listing(directory: Path) -> list[dict[str, Any]]:
    """List the regular files of the directory, recursively (see jupyter_ci.workdir)."""
    return [asdict(info) for info in workdir.listing(directory)]


def snapshot(directory: Path) -> workdir.Snapshot:
    """Map each regular file (relative path) to (size, mtime_ns), never following symlinks."""
    return workdir.snapshot(directory)


def changed(directory: Path, before: workdir.Snapshot) -> list[dict[str, Any]]:
    """List the files created or changed since `before` was taken."""
    return [asdict(info) for info in workdir.changed(directory, before)]


@dataclass
class Upload:
    """A file being written: into a temporary file beside it, renamed when complete."""

    target: Path
    limit: int
    size: int = 0

    def __post_init__(self) -> None:
        if self.target.is_dir():
            raise PathRefused(f"{self.target.name!r} is a directory in the session.")
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise PathRefused("A file stands where the path needs a directory.") from None
        fd, name = tempfile.mkstemp(dir=self.target.parent, prefix=".upload-")
        self._file = os.fdopen(fd, "wb")
        self._temp = Path(name)

    def write(self, chunk: bytes) -> bool:
        """Append a chunk; False (and nothing kept) once the total passes the limit."""
        self.size += len(chunk)
        if self.size > self.limit:
            self.abort()
            return False
        self._file.write(chunk)
        return True

    def commit(self) -> None:
        """Put the complete file in place (an atomic rename: readers never see half)."""
        self._file.close()
        try:
            os.replace(self._temp, self.target)
        except IsADirectoryError:  # the kernel made a directory there meanwhile
            self.abort()
            raise PathRefused(f"{self.target.name!r} is a directory in the session.") from None

    def abort(self) -> None:
        """Drop the partial file."""
        if not self._file.closed:
            self._file.close()
        self._temp.unlink(missing_ok=True)


#: Directories with fewer files are walked on the event loop (well under a millisecond);
#: bigger ones in a worker thread, whose hop costs more than such a small walk.
INLINE_FILES = 200


async def walk(known_files: int, fn: Callable[..., T], *args: Any) -> T:
    """Call a directory walk inline when the directory had few files at the last look."""
    if known_files < INLINE_FILES:
        return fn(*args)
    return await asyncio.to_thread(fn, *args)


async def chunks(file: BinaryIO) -> AsyncIterator[bytes]:
    """Read an open file in chunks (downloads stream rather than load whole files)."""
    while chunk := file.read(_CHUNK):
        yield chunk
