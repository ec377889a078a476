"""One REST session: its kernel, directory, client, executor and history."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_ci.server.sessions.approvals import Approvals
from jupyter_ci.server.sessions.executor import KernelExecutor
from jupyter_ci.server.sessions.results import History
from jupyter_ci.wire.rest import SessionInfo, SessionStatus


@dataclass
class Session:
    """One session: its kernel, directory, client, executor and history."""

    id: str
    kernel_id: str
    kernel_name: str
    directory: Path
    client: Any
    executor: KernelExecutor
    created: float = field(default_factory=time.time)
    last_activity: float = field(default_factory=time.time)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: The executes (and asks) so far, as the fields of their notebook cells, within caps.
    history: History = field(default_factory=History)
    busy: bool = False
    dead: bool = False
    #: Why its kernel in a gateway cannot be reached: ("unavailable" or "gone", message)
    #: (gateway_health.py).
    gateway_trouble: tuple[str, str] | None = None
    #: Deleted (or culled): a run still in flight ends as UnknownSession, not a crash.
    closed: bool = False
    #: Its kernel is being restarted: a delete meanwhile leaves the shutdown to the restart
    #: (a kernel manager shutting down a kernel it is restarting leaks the new one).
    restarting: bool = False
    #: What the ask route keeps between asks of this session (its Memory).
    memory: Any = None
    #: Directory entries the last look read (small directories are looked at inline).
    scanned: int = 0
    #: Its kernel runs in a bubblewrap box (c.JupyterCI.session_sandbox).
    sandboxed: bool = False
    #: Why it does not, if it does not (sandbox.py): said in its info.
    unboxed_reason: str = ""
    #: Which of its box's limits this server cannot enforce, if any (sandbox/guards.py).
    unenforced: str = ""
    #: Its kernelspec's language, lower-cased ("python", "bash", "typescript"; languages.py).
    language: str = "python"
    #: Its runs and asks in flight: deleting the session cancels them (and their model calls).
    tasks: set[asyncio.Future[Any]] = field(default_factory=set)
    #: Its asks' questions that wait for the user's answer (approvals.py).
    approvals: Approvals = field(default_factory=Approvals)

    def info(self) -> SessionInfo:
        """Describe the session as the API returns it."""
        trouble = self.gateway_trouble
        status: SessionStatus = "dead" if self.dead else "busy" if self.busy else "idle"
        if trouble is not None:
            status = "gone" if trouble[0] == "gone" else "unavailable"
        return SessionInfo(
            self.id, self.kernel_id, self.kernel_name, status, _iso(self.created),
            _iso(self.last_activity), len(self.history), self.sandboxed, self.language,
            str(self.directory), trouble[1] if trouble else None,
            None if self.sandboxed else self.unboxed_reason, self.unenforced)


def _iso(stamp: float) -> str:
    """Format a time as ISO 8601 UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))
