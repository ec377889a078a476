"""A boxed session's caps on disk and files: its folder counted off the loop, runs stopped.

Linux has no hard quota an unprivileged server can set on a folder, so the session's folder
is counted instead: bytes on disk (st_blocks: a sparse file counts what it holds) and
entries, never following links, reading at most a bounded number of entries (a folder of
500k entries costs a bounded walk, in a thread, never a stall of the server's loop).
It is counted at the end of each run and about every second while one is in flight; a run
that makes the folder grow past a cap is interrupted (the executor restarts a kernel that
ignores the interrupt), and every run that ends with the folder over a cap says so, with
what to do: delete files, or raise the setting. A run that only deletes goes on. Between
runs it is counted about every second too: a process an earlier run left behind that writes
past a cap has its session's kernel (its whole box) restarted, and the next run says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from jupyter_ci.agent.types import CodeResult, ErrorInfo

#: Seconds between two counts of the folder while a run is in flight.
INTERVAL_S = 1.0
#: A folder whose last count read fewer entries than this is counted on the loop (faster
#: than a thread's round trip; its time is bounded by this many entries).
INLINE_ENTRIES = 200
#: The ename of a run stopped, or ended, with its session's folder over a cap.
OVER = "DiskLimitExceeded"
#: Entries a count reads when no file cap bounds it.
MOST_ENTRIES = 1_000_000


@dataclass(frozen=True)
class Usage:
    """What a folder holds: bytes on disk and entries (`complete`: every entry was read)."""

    bytes: int = 0
    files: int = 0
    complete: bool = True


def count(folder: Path, most: int) -> Usage:
    """Count a folder's bytes on disk and entries, reading `most` entries at most."""
    total = entries = 0
    pending = [str(folder)]
    while pending:
        try:
            listing = os.scandir(pending.pop())
        except OSError:
            continue  # removed meanwhile, or not readable: nothing the box can fill
        with listing:
            for entry in listing:
                entries += 1
                if entries > most:
                    return Usage(total, entries, complete=False)
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += info.st_blocks * 512
                if stat.S_ISDIR(info.st_mode):
                    pending.append(entry.path)
    return Usage(total, entries)


@dataclass(frozen=True)
class Caps:
    """The caps of a session's folder (0: none), and how to say it is over them."""

    bytes: int
    files: int

    @property
    def most(self) -> int:
        """Return how many entries a count reads: enough to see growth past the file cap."""
        return 2 * self.files + 1000 if self.files else MOST_ENTRIES

    def over(self, usage: Usage) -> str | None:
        """Say how the folder is over its caps (None when it is not)."""
        what = []
        more = "" if usage.complete else " or more"
        if self.bytes and usage.bytes > self.bytes:
            what.append(f"{_size(usage.bytes)}{more} on disk, over its cap of "
                        f"{_size(self.bytes)} (c.JupyterCI.sandbox_disk_bytes)")
        if self.files and usage.files > self.files:
            what.append(f"{usage.files:,}{more} files and folders, over its cap of "
                        f"{self.files:,} (c.JupyterCI.sandbox_disk_files)")
        if not what:
            return None
        return ("the session's folder holds " + " and ".join(what) + ": delete files (in "
                "code, or DELETE .../files/<path>) or ask the server's admin to raise the "
                "setting")


def _size(count: int) -> str:
    """Show a size in MiB (or GiB)."""
    return f"{count / (1 << 30):.1f} GiB" if count >= 1 << 30 else f"{count / (1 << 20):.1f} MiB"


def grew(base: Usage, now: Usage) -> bool:
    """Tell whether a folder grew from `base` to `now` (unknown counts as grown)."""
    if not (now.complete and base.complete):
        return True
    return now.bytes > base.bytes or now.files > base.files


class Watch:
    """One run's watch over its session's folder: `reason` says why to stop it, if so."""

    def __init__(self, folder: Path, caps: Caps, base: Usage) -> None:
        self.folder, self.caps, self.base = folder, caps, base
        self.reason: str | None = None

    def stop(self) -> str | None:
        """Return why the run must stop now (None: it goes on); the executor asks."""
        return self.reason

    async def follow(self) -> None:
        """Count the folder about every second; stop the run once it grows past a cap."""
        while self.reason is None:
            await asyncio.sleep(INTERVAL_S)
            now = await asyncio.to_thread(count, self.folder, self.caps.most)
            over = self.caps.over(now)
            if over is not None and self._grew(now):
                self.reason = f"{over}; the run was stopped"
            self.base = now if over is None else self.base

    def _grew(self, now: Usage) -> bool:
        """Tell whether the folder grew since the run started (unknown counts as grown)."""
        return grew(self.base, now)

    async def end(self, result: CodeResult, inline: bool) -> Usage:
        """Count the folder once more; make a result over a cap say so. Return the count."""
        now = (count(self.folder, self.caps.most) if inline
               else await asyncio.to_thread(count, self.folder, self.caps.most))
        said = self.reason or self.caps.over(now)
        if said is not None and result.status != "died":
            if result.status in ("ok", "interrupted") or self.reason is not None:
                result.status = "error"  # also a "timeout": this stop, not the deadline
            said = said[0].upper() + said[1:]
            result.error = ErrorInfo(OVER, said)
            result.outputs = [*result.outputs, {"output_type": "error", "ename": OVER,
                                                "evalue": said, "traceback": []}]
        return now


class DiskCaps:
    """The caps of a manager's boxed sessions, and each session's last count."""

    def __init__(self, caps: Caps) -> None:
        self.caps = caps
        self._last: dict[str, Usage] = {}
        #: Why a session's kernel was restarted between runs, for its next run to say.
        self.restarted: dict[str, str] = {}

    async def idle_over(self, sid: str, folder: Path) -> str | None:
        """Count an idle session's folder; say how it is over a cap, if it grew past one."""
        last = self._last.get(sid)
        if last is None or not (self.caps.bytes or self.caps.files):
            return None  # no run yet (so nothing left running), or no caps
        now = await asyncio.to_thread(count, folder, self.caps.most)
        self._last[sid] = now
        over = self.caps.over(now)
        return over if over is not None and grew(last, now) else None

    @contextlib.asynccontextmanager
    async def watching(self, sid: str, folder: Path, boxed: bool
                       ) -> AsyncIterator[Watch | None]:
        """Watch one run of a session while it runs (None: not boxed, or no caps)."""
        if not boxed or not (self.caps.bytes or self.caps.files):
            yield None
            return
        last = self._last.get(sid)
        if last is None:
            last = await asyncio.to_thread(count, folder, self.caps.most)
        watch = Watch(folder, self.caps, last)
        following = asyncio.ensure_future(watch.follow())
        try:
            yield watch
        finally:
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await following

    async def judge(self, sid: str, watch: Watch | None, result: CodeResult) -> None:
        """Count the folder after a run; its result says if over a cap, or restarted since."""
        if watch is not None:
            inline = self._last.get(sid, Usage()).files < INLINE_ENTRIES
            self._last[sid] = await watch.end(result, inline)
        restarted = self.restarted.pop(sid, None)
        if restarted is not None:  # between runs (check_disks): said before this run's outputs
            result.outputs = [{"output_type": "stream", "name": "stderr", "text": restarted},
                              *result.outputs]

    def forget(self, sid: str) -> None:
        """Drop a session's count (it ended, or its folder changed outside a run)."""
        self._last.pop(sid, None)
        self.restarted.pop(sid, None)
