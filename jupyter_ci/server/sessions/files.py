"""A session's files: paths that cannot leave its directory, listings, and what a run changed.

The session's own code may be hostile and may swap any folder for a symlink at any instant,
so a path is never checked and then opened by name. Each operation opens the session's
directory, then each folder on the way with O_NOFOLLOW relative to the one before (openat:
the portable form of openat2's RESOLVE_NO_SYMLINKS), and the file itself with O_NOFOLLOW;
what was opened is judged from its descriptor (fstat), never from the path again.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import stat
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from jupyter_ci import workdir
from jupyter_ci.agent.types import FileInfo
from jupyter_ci.wire.rest import FileEntry

_CHUNK = 64 * 1024
_NAME_MAX = 255  # bytes in one path component on Linux and macOS filesystems
_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
#: A FIFO opened for reading without O_NONBLOCK would wait for a writer, and so the server;
#: a terminal opened without O_NOCTTY could become the server's.
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0) | getattr(
    os, "O_NOCTTY", 0)
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
#: Whether this system opens paths relative to folder descriptors without following links.
SAFE_OPEN = workdir.FD_WALK and {os.open, os.stat, os.unlink, os.mkdir, os.rename} <= \
    os.supports_dir_fd


class PathRefused(ValueError):
    """A path that is not a file inside the session's directory."""


class NoSuchFile(LookupError):
    """No regular file at that path in the session's directory."""


class FilesUnsupported(RuntimeError):
    """This system cannot open files without following symlinks (no O_NOFOLLOW, dir_fd)."""


@dataclass(frozen=True)
class Target:
    """A path checked to be relative and plain, inside a session's directory."""

    directory: Path
    parts: tuple[str, ...]

    @property
    def path(self) -> str:
        """The path as the client gave it, normalised."""
        return "/".join(self.parts)


def resolve(directory: Path, path: str) -> Target:
    """Check `path` as a file path inside `directory`: no absolute path, `..`, or NUL."""
    if not path or "\x00" in path or path.endswith("/"):
        raise PathRefused("Give a file path relative to the session's directory.")
    parts = PurePosixPath(path).parts
    if PurePosixPath(path).is_absolute() or "\\" in path or any(p in ("..", ".") for p in parts):
        raise PathRefused(f"{path!r} is not a relative path inside the session's directory "
                          "(no leading /, no '..').")
    if any(len(p.encode()) > _NAME_MAX for p in parts):
        raise PathRefused(f"A name in {path[:80]!r}... is over {_NAME_MAX} bytes.")
    # Symlinks on the way are judged when the path is opened, one folder at a time.
    return Target(directory, parts)


def _through_link(target: Target, name: str) -> PathRefused:
    return PathRefused(f"{target.path!r} goes through the symbolic link {name!r}: the files "
                       "routes follow none (one could lead outside the session's directory). "
                       "Use the path the link points to.")


def _no_file(target: Target) -> NoSuchFile:
    return NoSuchFile(f"No file {target.path!r} in the session.")


def _open_folder(target: Target, create: bool) -> int:
    """Open the folder holding the target, never through a link; the caller closes it."""
    if not SAFE_OPEN:
        raise FilesUnsupported(
            "This system cannot open files without following symbolic links (no O_NOFOLLOW "
            "or dir_fd), so the files routes are off: read and write files with execute.")
    try:
        fd = os.open(target.directory, workdir.DIR_FLAGS)
    except FileNotFoundError:  # the kernel removed its own directory
        raise _no_file(target) from None
    except NotADirectoryError:  # or put a link (or a file) in its place
        raise PathRefused("The session's directory is no longer a directory: restart or "
                          "delete the session.") from None
    try:
        for name in target.parts[:-1]:
            child = _enter(fd, name, target, create)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _enter(fd: int, name: str, target: Target, create: bool) -> int:
    """Open the folder `name` in the folder `fd` (making it when `create`)."""
    try:
        return os.open(name, workdir.DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise _no_file(target) from None
    except NotADirectoryError:  # a file, or a symlink (O_DIRECTORY|O_NOFOLLOW says ENOTDIR)
        with contextlib.suppress(OSError):
            if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                raise _through_link(target, name) from None
        if create:
            raise PathRefused("A file stands where the path needs a directory.") from None
        raise _no_file(target) from None
    except OSError as error:
        if _is_link_error(error):  # macOS and the BSDs say ELOOP (or EMLINK) for a link
            raise _through_link(target, name) from None
        raise
    with contextlib.suppress(FileExistsError):  # the kernel made it meanwhile
        os.mkdir(name, dir_fd=fd)
    return _enter(fd, name, target, create=False)


@contextlib.contextmanager
def _folder(target: Target) -> Iterator[int]:
    """Give a descriptor of the folder holding the target, closed afterwards."""
    fd = _open_folder(target, create=False)
    try:
        yield fd
    finally:
        os.close(fd)


def _is_link_error(error: OSError) -> bool:
    # O_NOFOLLOW on a symlink: ELOOP on Linux and macOS, EMLINK on FreeBSD.
    return error.errno in (errno.ELOOP, errno.EMLINK)


def open_file(target: Target) -> BinaryIO:
    """Open an existing regular file of the session for reading."""
    with _folder(target) as folder:
        try:
            fd = os.open(target.parts[-1], _READ_FLAGS, dir_fd=folder)
        except FileNotFoundError:
            raise _no_file(target) from None
        except OSError as error:
            if _is_link_error(error):
                raise _through_link(target, target.parts[-1]) from None
            raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a folder, a FIFO, a device
            raise _no_file(target)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def remove(target: Target) -> None:
    """Delete a regular file of the session (never what a link points to)."""
    name = target.parts[-1]
    with _folder(target) as folder:
        try:
            mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
        except FileNotFoundError:
            raise _no_file(target) from None
        if stat.S_ISLNK(mode):
            raise _through_link(target, name)
        if not stat.S_ISREG(mode):
            raise _no_file(target)
        # Swapped since the stat? unlink never follows a link, and fails on a folder.
        os.unlink(name, dir_fd=folder)


def entry(info: FileInfo) -> FileEntry:
    """Return a file as the API lists it: relative path, size and MIME type."""
    return FileEntry(info.path, info.size, info.mime)


def file_info(target: Target, size: int) -> FileEntry:
    """Return one file as the API lists it."""
    return entry(workdir.info(target.path, size))


def listing(directory: Path) -> list[FileEntry]:
    """List the regular files of the directory, recursively (see jupyter_ci.workdir)."""
    return [entry(info) for info in workdir.listing(directory)]


def snapshot(directory: Path) -> workdir.Snapshot:
    """Map each regular file (relative path) to (size, mtime_ns), never following symlinks."""
    return workdir.snapshot(directory)


def changed(directory: Path, before: workdir.Snapshot) -> list[FileInfo]:
    """List the files created or changed since `before` was taken."""
    return workdir.changed(directory, before)


@dataclass
class Upload:
    """A file being written: into a temporary file beside it, renamed when complete."""

    target: Target
    limit: int
    size: int = 0
    #: The folder that will hold the file, opened once: wherever the kernel moves it, the
    #: file lands in that folder (one the session could write to), never through a link.
    _folder: int = field(default=-1, init=False, repr=False)

    def __post_init__(self) -> None:
        self._folder = _open_folder(self.target, create=True)
        self._temp = f".upload-{secrets.token_hex(8)}"
        try:
            self._check_name()
            fd = os.open(self._temp, _CREATE_FLAGS, 0o600, dir_fd=self._folder)
        except BaseException:
            os.close(self._folder)
            self._folder = -1
            raise
        self._file = os.fdopen(fd, "wb")

    def _check_name(self) -> None:
        """Refuse a name that is a folder or a symlink now (as a download would refuse it)."""
        # Only for the message: if the kernel swaps it later, the rename still never
        # writes through a link (it replaces the link) and fails on a folder.
        name = self.target.parts[-1]
        try:
            mode = os.stat(name, dir_fd=self._folder, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISDIR(mode):
            raise PathRefused(f"{name!r} is a directory in the session.")
        if stat.S_ISLNK(mode):
            raise _through_link(self.target, name)

    def write(self, chunk: bytes) -> bool:
        """Append a chunk; False (and nothing kept) once the total passes the limit."""
        self.size += len(chunk)
        if self.size > self.limit:
            self.abort()
            return False
        self._file.write(chunk)
        return True

    def commit(self) -> FileEntry:
        """Put the complete file in place (an atomic rename: readers never see half)."""
        name = self.target.parts[-1]
        try:
            self._file.flush()
            size = os.fstat(self._file.fileno()).st_size
            self._file.close()
            # rename never follows a link at either name: a symlink there is replaced.
            os.replace(self._temp, name, src_dir_fd=self._folder, dst_dir_fd=self._folder)
        except IsADirectoryError:  # the kernel made a directory there meanwhile
            self.abort()
            raise PathRefused(f"{name!r} is a directory in the session.") from None
        except BaseException:
            self.abort()
            raise
        self._close_folder()
        return file_info(self.target, size)

    def abort(self) -> None:
        """Drop the partial file (also when closing it fails: a full disk fails its flush)."""
        try:
            if not self._file.closed:
                self._file.close()  # closes the descriptor even when the flush fails
        except OSError:
            pass
        finally:
            if self._folder >= 0:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._temp, dir_fd=self._folder)
            self._close_folder()

    def _close_folder(self) -> None:
        if self._folder >= 0:
            os.close(self._folder)
            self._folder = -1


#: Entries a walk may read on the event loop (well under a millisecond); a directory with
#: more, at this look or the last, is walked in a worker thread, whose hop costs more than
#: such a small walk. Counted as read: a folder of 500k symlinks never stalls the loop.
INLINE_ENTRIES = 200
#: What one look at a session's directory gives: the walk, and the files changed since
#: the snapshot it was compared with (API form).
Look = tuple[workdir.Scan, list[FileInfo]]


def _look(directory: Path, max_scanned: int | None, before: workdir.Snapshot | None) -> Look:
    """Walk the directory and compare it with `before` (if given)."""
    found = workdir.scan(directory, max_scanned)
    if before is None:
        return found, []
    return found, workdir.compare(before, found.files)


async def look(directory: Path, last_scanned: int,
               before: workdir.Snapshot | None = None) -> Look:
    """Walk a session's directory: inline while it holds few entries, else in a thread."""
    if last_scanned < INLINE_ENTRIES:
        found = _look(directory, INLINE_ENTRIES, before)
        if not found[0].cut:
            return found
    return await asyncio.to_thread(_look, directory, None, before)


async def chunks(file: BinaryIO) -> AsyncIterator[bytes]:
    """Read an open file in chunks (downloads stream rather than load whole files)."""
    while chunk := file.read(_CHUNK):
        yield chunk
