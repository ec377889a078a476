"""REST sessions: a kernel and a working directory each, through the server's own kernel manager.

The kernels themselves (start, pool, connect, dispose) are in kernels.py. Calls on one
session are serialised by its lock; different sessions run concurrently on the event loop,
which only ever awaits, a few runs at a time into their kernels (fair.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from concurrent import futures
from logging import Logger
from pathlib import Path
from typing import Any

from jupyter_core.utils import ensure_async
from tornado import web

from jupyter_ci.agent.feedback import KERNEL_RESTARTED
from jupyter_ci.agent.outputs import OnOutput
from jupyter_ci.agent.types import CodeResult, ErrorInfo, FileInfo, Output
from jupyter_ci.config import ServerSettings
from jupyter_ci.server.gateway import is_gateway
from jupyter_ci.server.sandbox.box import Limits
from jupyter_ci.server.sandbox.guards import unenforced
from jupyter_ci.server.sessions import activity, files, languages
from jupyter_ci.server.sessions.disk import Caps, DiskCaps, Watch
from jupyter_ci.server.sessions.errors import (
    FilesElsewhere,
    KernelUnavailable,
    TooManySessions,
    UnknownSession,
)
from jupyter_ci.server.sessions.executor import STUCK
from jupyter_ci.server.sessions.fair import TURN_S, RunSlots
from jupyter_ci.server.sessions.gateway_health import GatewayWatch, translate
from jupyter_ci.server.sessions.kernels import SessionKernels, Started
from jupyter_ci.server.sessions.ports import ModelPort, ask_token_id
from jupyter_ci.server.sessions.results import History, code_cell, execute_result
from jupyter_ci.server.sessions.session import Session
from jupyter_ci.wire.rest import Execution, FileEntry

#: Seconds to let the server's restarter finish before a restart that collided with it.
RESTART_RETRY_S = 1.0
#: Ended sessions whose fate (deleted, culled) a request for them is told.
ENDED_KEPT = 1024


class SessionManager:
    """Create, find, run in, restart, cull and delete sessions; keep a pool of kernels."""

    def __init__(self, kernel_manager: Any, root_dir: Path, ci: ServerSettings, log: Logger,
                 service: ModelPort | None = None) -> None:
        self.km = kernel_manager
        #: The server's model service (asks stream their turns through it), if any.
        self.service = service
        self.root_dir = root_dir.resolve()
        self.root = Path(ci.session_root).resolve() if ci.session_root else (
            self.root_dir / ".jupyter-ci-sessions")
        self.ci = ci
        self.log = log
        self.sessions: dict[str, Session] = {}
        #: Why recently ended sessions ended, by id (the last ENDED_KEPT).
        self.ended: dict[str, str] = {}
        self.kernels = SessionKernels(kernel_manager, self.root_dir, self.root, ci, log,
                                      room=self._room)
        # What a killed server left: cleared now, its sessions' 404s say so (orphans.py).
        self.ended.update(self.kernels.orphans.recover())
        #: Sessions whose gateway went away (gateway_health.py); idle without a gateway.
        self.watch = GatewayWatch(self.kernels, is_gateway(kernel_manager), log)
        self._starting = 0  # sessions being created, counted against max_sessions
        #: Runs let into their kernels at once, in turn (c.JupyterCI.session_run_slots).
        self.run_slots = RunSlots(ci.session_run_slots, TURN_S)
        #: Boxed sessions' caps on their folder's bytes and files (disk.py).
        self.disk = DiskCaps(Caps(ci.sandbox_disk_bytes, ci.sandbox_disk_files))

    # -- lifecycle --------------------------------------------------------------------

    async def create(self, kernel_name: str | None = None, env: dict[str, str] | None = None,
                     cwd_name: str | None = None, language: str | None = None) -> Session:
        """Start a session (from the pool when it fits) and return it."""
        if len(self.sessions) + self._starting >= self.ci.max_sessions:
            raise TooManySessions(
                f"{self.ci.max_sessions} sessions exist already (c.JupyterCI.max_sessions): "
                "delete one first.")
        self._starting += 1
        try:
            kernel_name, language = await self.kernels.pick(kernel_name, language)
            choice = await self.kernels.choose(kernel_name)
            started = None if cwd_name else await self.kernels.acquire(choice, env)
            if started is None:
                started = await self.kernels.start(choice, env, cwd_name)
            session = await self._connect(started)
            session.language = language
            session.executor.late_s = languages.LATE_OUTPUTS_S.get(language, 0.0)
        except web.HTTPError as error:  # a gateway's kernelspecs or start
            raise translate(error) or error from None
        finally:
            self._starting -= 1
        self.sessions[session.id] = session
        self.kernels.fill()
        return session

    def _room(self) -> int:
        """Return how many more sessions max_sessions allows (the pool keeps no more)."""
        return self.ci.max_sessions - len(self.sessions) - self._starting

    def get(self, sid: str) -> Session:
        """Return the session with this id."""
        session = self.sessions.get(sid)
        if session is None:
            raise UnknownSession(self.ended.get(sid) or (
                f"No session {sid!r}: it never existed here, or it ended long ago (deleted, "
                "or culled after c.JupyterCI.session_idle_timeout)."))
        return session

    async def delete(self, sid: str, why: str = "was deleted") -> None:
        """Shut the session's kernel down and remove its directory; remember why it ended."""
        session = self.sessions.pop(sid, None)
        if session is None:
            raise UnknownSession(f"No session {sid!r}.")
        session.closed = True
        self.watch.forget(session)
        self.disk.forget(sid)
        # So a client that reconnects by id is told what became of it (a bounded memory).
        self.ended[sid] = f"The session {sid!r} {why}: its kernel and files are gone."
        while len(self.ended) > ENDED_KEPT:
            del self.ended[next(iter(self.ended))]
        for task in list(session.tasks):
            task.cancel()  # an ask's model call stops now, not when its reply would end
        if self.service is not None:
            self.service.close_budget(ask_token_id(sid))  # its asks' budget (ask.py)
        if not session.restarting:  # else the restart shuts it down as it ends (_renew)
            await self.kernels.dispose(session.client, session.kernel_id, session.directory,
                                       session.lock)
        self.kernels.fill()  # room for the pool again, if max_sessions held it back

    async def restart(self, sid: str) -> Session:
        """Restart the kernel (state cleared, files kept) and reconnect."""
        session = self.get(sid)
        if session.busy:
            # The run in flight holds the lock: stop it rather than wait out its timeout.
            await self.interrupt(sid)
        async with session.lock:
            if session.closed:
                raise UnknownSession(f"The session {sid!r} was deleted.")
            await self._renew(session)
            session.history.clear()
        return session

    async def _renew(self, session: Session) -> None:
        """Restart the kernel of a session whose lock the caller holds, and reconnect."""
        await self.watch.ensure(session)  # a gateway that is away: 503 or 410, as a run
        if session.closed:  # deleted meanwhile; no await from here to `restarting`
            raise UnknownSession(f"The session {session.id!r} was deleted.")
        session.restarting, failed = True, None
        session.client.stop_channels()
        try:
            await self._restart_kernel(session.kernel_id)
            session.client = await self.kernels.client(session.kernel_id, session.directory)
        except Exception as exc:
            session.dead, failed = True, exc
        finally:
            session.restarting = False
        if session.closed:  # deleted while it restarted: the delete left the kernel to us
            await self.kernels.dispose(session.client, session.kernel_id, session.directory)
            raise UnknownSession(f"The session {session.id!r} was deleted while it restarted.")
        if failed is not None:
            raise KernelUnavailable(f"The session's kernel could not be restarted "
                                    f"({type(failed).__name__}); delete the session.") from failed
        session.executor = self.kernels.executor(session.kernel_id, session.client)
        self.watch.watch(session)
        activity.unwatch(self.km, session.kernel_id)  # watched anew if its ports moved
        session.executor.late_s = languages.LATE_OUTPUTS_S.get(session.language, 0.0)
        session.dead = False
        session.last_activity = time.time()

    async def _unstick(self, session: Session, result: CodeResult) -> CodeResult:
        """Restart a kernel deaf to a timeout's interrupt (restart_on_stuck_interrupt)."""
        said = result.error.evalue if result.error is not None else "the code did not stop"
        if not self.ci.restart_on_stuck_interrupt:
            result.error = ErrorInfo("KernelDied", f"{said}, and runs on: restart the session "
                                     "(c.JupyterCI.restart_on_stuck_interrupt is off)")
            return result
        try:
            await self._renew(session)
        except KernelUnavailable as error:
            result.error = ErrorInfo("KernelDied", f"{said}; {error.message}")
            return result
        session.history.clear()  # as a restart does: the notebook starts with this run
        message = (f"{said}: {KERNEL_RESTARTED}. Run again what the next code needs "
                   "(imports, data, definitions), and make this code faster or stoppable.")
        said_so: Output = {"output_type": "error", "ename": "TimeoutError", "evalue": message,
                           "traceback": []}
        return CodeResult("timeout", [*result.outputs, said_so], result.duration_s,
                          result.execution_count, ErrorInfo("TimeoutError", message),
                          updated=result.updated)

    async def _restart_kernel(self, kernel_id: str) -> None:
        """Restart a kernel through the kernel manager, once more if its restarter was at it."""
        try:
            await ensure_async(self.km.restart_kernel(kernel_id))
        except (asyncio.InvalidStateError, futures.InvalidStateError):
            # The server's own restarter was reviving the dead kernel at the same
            # moment (jupyter_client sets its ready future twice): once more, after it.
            await asyncio.sleep(RESTART_RETRY_S)
            await ensure_async(self.km.restart_kernel(kernel_id))

    async def execute(self, sid: str, code: str, timeout: float | None,
                      on_output: OnOutput | None = None) -> Execution:
        """Run code in the session; return the API's execute result."""
        session = self.get(sid)
        async with session.lock:
            result, _ = await self.run_locked(session, code, timeout or self.ci.timeout,
                                              on_output)
        return execute_result(result)

    async def run_locked(self, session: Session, code: str, timeout: float,
                         on_output: OnOutput | None = None, env: dict[str, str] | None = None
                         ) -> tuple[CodeResult, list[FileEntry]]:
        """Run code in a session whose lock the caller holds; record it in the history.

        Return the result and the files it wrote, as the ask's `files` event lists them.
        """
        # `env` (this run's variables) is never recorded: not in the history, not logged.
        if session.closed:
            raise UnknownSession(f"The session {session.id!r} was deleted.")
        await self.watch.ensure(session)  # a gateway that went away: reconnect, or say why not
        if session.dead:
            # Its state is gone, even if the server restarted the kernel on its own: say so
            # rather than run in a blank kernel, until the client restarts the session.
            return CodeResult("died", error=ErrorInfo(
                "KernelDied", "the kernel died; restart the session to go on")), []
        session.busy, session.last_activity = True, time.time()
        here = session.kernel_id not in self.kernels.elsewhere
        before = await files.look(session.directory, session.scanned) if here else None
        async with (self.run_slots.turn(),  # sessions take turns into their kernels (fair.py)
                    self.disk.watching(session.id, session.directory, session.sandboxed)
                    as watch):
            result = await self._run(session, code, timeout, on_output, env, watch)
        if result.error is not None and result.error.ename == STUCK:
            result = await self._unstick(session, result)  # alive, deaf to the interrupt
        await self.disk.judge(session.id, watch, result)
        languages.name_error(result)  # bash's errors carry only an exit status
        session.dead = session.dead or result.status == "died"
        changed: list[FileInfo] = []
        if before is not None:
            after, changed = await files.look(session.directory, before[0].scanned,
                                              before[0].files)
            session.scanned = after.scanned
            result.files_cut = before[0].cut or after.cut
        # The ask's tool result lists them too (the execute API returns them beside).
        result.files = changed
        session.history.append(code_cell(code, result))
        return result, [files.entry(f) for f in changed]

    async def _run(self, session: Session, code: str, timeout: float,
                   on_output: OnOutput | None, env: dict[str, str] | None = None,
                   watch: Watch | None = None) -> CodeResult:
        """Run code with the session marked busy; a delete meanwhile is UnknownSession."""
        activity.record(self.km, session.kernel_id, "busy")
        stop = None if watch is None else watch.stop
        try:
            if env and session.language != "python":
                around = languages.env_prelude(session.language, env)
                result = await session.executor.run(code, timeout, on_output, around=around,
                                                    stop=stop)
            else:
                result = await session.executor.run(code, timeout, on_output, env, stop=stop)
        except Exception as exc:
            if not session.closed:
                await self.watch.explain(session, exc)  # the gateway went away: 503 or 410
                raise
            # Deleting shuts the kernel and closes the channels under a run in flight.
            raise UnknownSession(f"The session {session.id!r} was deleted while this "
                                 "ran.") from None
        finally:
            session.busy, session.last_activity = False, time.time()
            activity.record(self.km, session.kernel_id, "idle")
        if session.closed:
            raise UnknownSession(f"The session {session.id!r} was deleted while this ran.")
        return result

    async def check_disks(self) -> None:
        """Restart an idle boxed session whose folder grew past a cap: a process left writing."""
        for session in list(self.sessions.values()):
            if not session.sandboxed or session.closed or session.dead or session.lock.locked():
                continue
            over = await self.disk.idle_over(session.id, session.directory)
            if over is None or session.lock.locked() or session.closed:
                continue
            self.log.warning("jupyter-ci: session %s: %s between runs; restarting its kernel",
                             session.id, over)
            async with session.lock:  # its box ends, and every process in it
                with contextlib.suppress(UnknownSession, KernelUnavailable):
                    await self._renew(session)
                    session.history.clear()
            self.disk.restarted[session.id] = (
                f"jupyter-ci: {over}. A process an earlier run left kept writing after the run "
                f"ended, so the session's kernel was restarted between runs "
                f"({KERNEL_RESTARTED}).\n")

    async def interrupt(self, sid: str) -> None:
        """Interrupt whatever runs in the session (a streaming client hung up)."""
        session = self.sessions.get(sid)
        if session is not None and session.busy:
            await ensure_async(self.km.interrupt_kernel(session.kernel_id))

    async def cull(self) -> None:
        """Delete the sessions idle for longer than c.JupyterCI.session_idle_timeout."""
        limit = self.ci.session_idle_timeout
        await asyncio.to_thread(self.kernels.orphans.prune)  # lost sessions' files past time
        self.kernels.tidy()  # pooled kernels gone elsewhere, or more than an idle pool keeps
        if limit <= 0:
            return
        now = time.time()
        for sid, session in list(self.sessions.items()):
            # A held lock is an ask between model calls: in use, though not running code.
            if not session.lock.locked() and now - session.last_activity > limit:
                self.log.info("jupyter-ci: culling session %s, idle for %.0f s", sid,
                              now - session.last_activity)
                with contextlib.suppress(UnknownSession):  # deleted meanwhile by a request
                    await self.delete(sid, f"was culled after {limit:g} s idle "
                                      "(c.JupyterCI.session_idle_timeout)")

    def in_use(self) -> bool:
        """Say whether a session runs code or an ask now (activity for JupyterHub's culler)."""
        return any(session.lock.locked() for session in self.sessions.values())

    async def close(self) -> None:
        """Shut down every session and pooled kernel (the server is stopping)."""
        await self.kernels.stop_filling()
        for sid in list(self.sessions):
            await self.delete(sid)
        await self.kernels.empty()
        self.kernels.orphans.release()

    def directory(self, sid: str) -> Path:
        """Return the session's directory for the files routes, if its kernel uses it."""
        session = self.get(sid)
        if session.kernel_id in self.kernels.elsewhere:
            raise FilesElsewhere(
                "This session's kernel runs in a gateway on another machine, which cannot see "
                "this server's session directory: the files routes are not available. Read and "
                "write files with execute, or give the gateway the server's session_root (a "
                "shared volume at the same path).")
        return session.directory

    async def _connect(self, started: Started) -> Session:
        """Make the session of a started kernel, with a ready client."""
        client = await self.kernels.ready_client(started)
        session = Session(started.sid, started.kernel_id, started.choice.kernel_name,
                          started.directory, client,
                          self.kernels.executor(started.kernel_id, client),
                          history=History(self.ci.session_history_output_bytes,
                                          self.ci.session_history_bytes),
                          sandboxed=started.choice.sandboxed,
                          unboxed_reason=started.choice.unboxed_reason)
        if session.sandboxed and not is_gateway(self.km):  # a gateway's machine boxes it
            session.unenforced = unenforced(Limits(memory_bytes=self.ci.sandbox_memory_bytes,
                                                   processes=self.ci.sandbox_processes)) or ""
        self.watch.watch(session)
        activity.unwatch(self.km, started.kernel_id)  # its runs say busy and idle (activity.py)
        # The server's restarter revives a kernel that died while idle, blank: that is dead too.
        add_callback = getattr(self.km.get_kernel(started.kernel_id), "add_restart_callback",
                               None)  # none on a gateway's kernels
        if add_callback is not None:
            for event in ("restart", "dead"):
                add_callback(lambda: setattr(session, "dead", True), event)
        return session
