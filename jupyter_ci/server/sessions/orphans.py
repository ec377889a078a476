"""What a server killed without shutting its sessions down leaves, found and cleared at start.

Each session kernel has a small record in `<session_root>/.kernels/<kernel id>.json` while it
runs (its session id, directory and connection file), and the server that started it holds
an exclusive lock on `<session_root>/.servers/<server id>.lock` as long as it lives. A record
whose server's lock is free is an orphan: the kernel's leftover processes are killed (found by
their connection file on their command line, so never another server's kernel), its connection
file removed, and its directory moved to `<session_root>/.lost/<session id>` for
c.JupyterCI.session_orphans_kept seconds (or removed). `.lost/<session id>.json` remembers the
session, so a client asking for it is told the server restarted. Linux and macOS (flock);
process clean-up reads /proc (Linux).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
import uuid
from dataclasses import dataclass, replace
from logging import Logger
from pathlib import Path
from typing import TypeVar

from jupyter_ci.wire.codec import WireError, decode, encode

try:
    import fcntl
except ImportError:  # Windows: no orphan handling
    fcntl = None  # type: ignore[assignment]

KERNELS, SERVERS, LOST = ".kernels", ".servers", ".lost"
#: Lost sessions remembered (for their 404) at most; the oldest are forgotten first.
LOST_KEPT = 1024
R = TypeVar("R", "KernelRecord", "LostRecord")


@dataclass(frozen=True)
class KernelRecord:
    """A running session kernel, as `.kernels/<kernel id>.json` records it."""

    server: str = ""
    session: str = ""
    directory: str = ""
    connection_file: str = ""
    started: float | None = None


@dataclass(frozen=True)
class LostRecord:
    """A session lost to a server restart, as `.lost/<session id>.json` remembers it."""

    session: str = ""
    lost: float | None = None
    #: Where its files are kept (None: removed, or their time is up).
    kept: str | None = None
    until: float | None = None
    started: float | None = None


class Orphans:
    """Record this server's session kernels; clear what dead servers left in the root."""

    def __init__(self, root: Path, keep_s: float, log: Logger) -> None:
        self.root = root
        self.keep_s = keep_s
        self.log = log
        self.server = uuid.uuid4().hex
        self._lock_fd = -1

    # -- this server's kernels ----------------------------------------------------------

    def record(self, kernel_id: str, sid: str, directory: Path,
               connection_file: str | None) -> None:
        """Note a kernel this server started (removed by `forget` when it is shut down)."""
        if fcntl is None:
            return
        try:
            self._claim()
            entry = KernelRecord(self.server, sid, str(directory), connection_file or "",
                                 time.time())
            _write(self.root / KERNELS / f"{kernel_id}.json", entry)
        except OSError as error:  # a record is a courtesy to the next start, not a need
            self.log.warning("jupyter-ci: cannot record session kernel %s: %s", kernel_id,
                             error)

    def forget(self, kernel_id: str) -> None:
        """Drop the record of a kernel shut down."""
        with contextlib.suppress(OSError):
            (self.root / KERNELS / f"{kernel_id}.json").unlink()

    def _claim(self) -> None:
        """Hold this server's lock (its kernels' records are live while it is held)."""
        if self._lock_fd >= 0:
            return
        folder = self.root / SERVERS
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        (self.root / KERNELS).mkdir(exist_ok=True, mode=0o700)
        fd = os.open(folder / f"{self.server}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                     0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._lock_fd = fd

    def release(self) -> None:
        """Let go of the lock (the server stops, its sessions shut down)."""
        if self._lock_fd >= 0:
            with contextlib.suppress(OSError):
                (self.root / SERVERS / f"{self.server}.lock").unlink()
            os.close(self._lock_fd)
            self._lock_fd = -1

    # -- what dead servers left -----------------------------------------------------------

    def recover(self) -> dict[str, str]:
        """Clear the kernels of dead servers; return why each lost session ended, by id."""
        if fcntl is None or not (self.root / KERNELS).is_dir():
            return self.lost()
        dead: dict[str, bool] = {}
        for path in sorted((self.root / KERNELS).glob("*.json")):
            entry = _read(path, KernelRecord)
            server = entry.server
            if server == self.server:
                continue
            if server not in dead:
                dead[server] = _is_dead(self.root / SERVERS / f"{server}.lock")
            if dead[server]:
                self._clear(path.stem, entry)
                path.unlink(missing_ok=True)
        for server, gone in dead.items():
            if gone:
                (self.root / SERVERS / f"{server}.lock").unlink(missing_ok=True)
        self.prune()
        return self.lost()

    def _clear(self, kernel_id: str, entry: KernelRecord) -> None:
        """Kill a dead server's kernel, remove its connection file, keep or drop its files."""
        connection = entry.connection_file
        sid = entry.session or kernel_id
        if connection:
            _kill_users(_private_folder(connection) or connection)
            with contextlib.suppress(OSError):
                os.unlink(connection)
            private = _private_folder(connection)
            if private:
                shutil.rmtree(private, ignore_errors=True)
        directory = Path(entry.directory)
        kept: Path | None = None
        if directory.is_dir() and directory.parent == self.root:
            if self.keep_s > 0:
                (self.root / LOST).mkdir(exist_ok=True, mode=0o700)
                try:
                    kept = directory.rename(self.root / LOST / sid)
                except OSError:  # taken (another server clears the same root): removed
                    kept = None
            shutil.rmtree(directory, ignore_errors=True)
        now = time.time()
        _write(self.root / LOST / f"{sid}.json", LostRecord(
            sid, now, str(kept) if kept else None, now + self.keep_s if kept else None,
            entry.started))
        self.log.warning("jupyter-ci: session %s was left by a server that did not stop "
                         "(killed?): its kernel is cleared, its files %s", sid,
                         f"kept in {kept}" if kept else "removed")

    def prune(self) -> None:
        """Remove kept directories past their time, and the oldest records past LOST_KEPT."""
        folder = self.root / LOST
        if not folder.is_dir():
            return
        records = sorted(folder.glob("*.json"), key=lambda p: _read(p, LostRecord).lost or 0)
        now = time.time()
        for index, path in enumerate(records):
            entry = _read(path, LostRecord)
            if entry.kept and entry.until is not None and entry.until <= now:
                shutil.rmtree(folder / path.stem, ignore_errors=True)
                _write(path, replace(entry, kept=None))
            if index < len(records) - LOST_KEPT:
                shutil.rmtree(folder / path.stem, ignore_errors=True)
                path.unlink(missing_ok=True)

    def lost(self) -> dict[str, str]:
        """Say, by session id, what became of each session lost to a server restart."""
        folder = self.root / LOST
        found = {}
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            found[path.stem] = _message(path.stem, _read(path, LostRecord))
        return found


def _message(sid: str, entry: LostRecord) -> str:
    """Tell a client what became of a session lost to a restart."""
    when = _iso(entry.lost)
    files = (f"its files were kept in {entry.kept} until {_iso(entry.until)} "
             "(c.JupyterCI.session_orphans_kept)" if entry.kept else
             "its files are gone")
    return (f"The session {sid!r} was lost when the server restarted (at {when}; the server "
            "before was stopped without shutting its sessions down: killed or crashed): its "
            f"kernel and variables are gone, {files}. Start a new session.")


def _iso(stamp: float | None) -> str:
    if stamp is None:
        return "an unknown time"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def _is_dead(lock: Path) -> bool:
    """Tell whether the server of this lock file is gone (nobody holds its lock)."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # held: a server using this root runs
    finally:
        os.close(fd)
    return True


def _private_folder(connection: str) -> str | None:
    """Return a boxed kernel's private folder (sockets and connection file), if it is one."""
    path = Path(connection)
    return str(path.parent) if path.name == "kernel.json" and \
        path.parent.parent.name.startswith("jupyter-ci-") else None


def _kill_users(needle: str) -> None:
    """Kill the live processes whose command line names `needle` (a dead server's kernel)."""
    wanted = needle.encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if wanted in cmdline.read_bytes() and int(cmdline.parent.name) != os.getpid():
                os.kill(int(cmdline.parent.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def _read(path: Path, kind: type[R]) -> R:
    """Read a record (an unreadable or damaged one reads as empty: another server's crash)."""
    try:
        return decode(kind, json.loads(path.read_text()), lenient=True)
    except (OSError, ValueError, WireError):
        return kind()


def _write(path: Path, entry: KernelRecord | LostRecord) -> None:
    """Write a record whole (a reader never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(f".{path.name}.{os.getpid()}")
    temp.write_text(json.dumps(encode(entry)))
    os.replace(temp, path)
