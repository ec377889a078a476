"""REST sessions: a kernel and a working directory each, through the server's own kernel manager.

Kernels are started by `serverapp.kernel_manager` (never spawned here), so a server whose
kernels live in a gateway serves sessions unchanged, and each kernel gets its broker token
from the hooks in kernels.py. Calls on one session are serialised by its lock; different
sessions run concurrently on the event loop, which only ever awaits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
import uuid
from concurrent import futures
from dataclasses import dataclass, field
from logging import Logger
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import NoSuchKernel
from jupyter_core.utils import ensure_async

from jupyter_ci.agent.outputs import OnOutput
from jupyter_ci.agent.types import CodeResult, ErrorInfo, FileInfo
from jupyter_ci.config import JupyterCI
from jupyter_ci.server import session_files
from jupyter_ci.server.executor import POLL_S, KernelControl, KernelExecutor
from jupyter_ci.server.gateway import is_gateway, kernel_client
from jupyter_ci.server.session_results import History, code_cell, execute_result
from jupyter_ci.server.session_sandbox import CannotBox, Choice, choose, session_environ

_READY_S = 60.0  # a kernel that is not ready by then is not going to be
_SETTLE_S = 3 * POLL_S  # how long a delete waits for a run in flight to see its kernel gone
_STOPPING_S = 10.0  # how long a stopping server lets a pool kernel's start finish


class SessionError(Exception):
    """A request about sessions that cannot be done; `status` and `reason` go to the client."""

    status = 400
    reason = "bad_request"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnknownSession(SessionError):
    """No session has this id (never created, deleted, or culled when idle)."""

    status, reason = 404, "unknown_session"


class TooManySessions(SessionError):
    """c.JupyterCI.max_sessions exist already."""

    status, reason = 429, "too_many_sessions"


class KernelUnavailable(SessionError):
    """The kernel could not be started or did not become ready."""

    status, reason = 503, "kernel_unavailable"


class CannotSandbox(SessionError):
    """c.JupyterCI.session_sandbox is "always" and this session cannot be boxed here."""

    status, reason = 503, "sandbox_unavailable"


class FilesElsewhere(SessionError):
    """The session's kernel runs where this server's disk is not (a remote gateway)."""

    status, reason = 409, "files_unavailable"


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
    #: Deleted (or culled): a run still in flight ends as UnknownSession, not a crash.
    closed: bool = False
    #: What the ask route keeps between asks of this session (its Memory).
    memory: Any = None
    #: Files in the directory at the last look (small directories are looked at inline).
    file_count: int = 0
    #: Its kernel runs in a bubblewrap box (c.JupyterCI.session_sandbox).
    sandboxed: bool = False
    #: Its runs and asks in flight: deleting the session cancels them (and their model calls).
    tasks: set[asyncio.Future[Any]] = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        """Describe the session as the API returns it."""
        return {"id": self.id, "kernel_id": self.kernel_id, "kernel_name": self.kernel_name,
                "status": "dead" if self.dead else "busy" if self.busy else "idle",
                "created": _iso(self.created), "last_activity": _iso(self.last_activity),
                "executions": len(self.history), "sandboxed": self.sandboxed}


def _iso(stamp: float) -> str:
    """Format a time as ISO 8601 UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


@dataclass
class _Pooled:
    """A kernel started in advance, in the directory of the session that will take it."""

    sid: str
    kernel_id: str
    directory: Path
    #: The kernelspec it was started from, and whether that boxes it.
    choice: Choice
    #: A client already connected and past wait_for_ready (pooled kernels come with one).
    client: Any = None


#: Seconds to let the server's restarter finish before a restart that collided with it.
RESTART_RETRY_S = 1.0


class SessionManager:
    """Create, find, run in, restart, cull and delete sessions; keep a pool of kernels."""

    def __init__(self, kernel_manager: Any, root_dir: Path, ci: JupyterCI, log: Logger,
                 service: Any = None) -> None:
        self.km = kernel_manager
        #: The server's model service (asks stream their turns through it), if any.
        self.service = service
        self.root_dir = root_dir.resolve()
        self.root = Path(ci.session_root).resolve() if ci.session_root else (
            self.root_dir / ".jupyter-ci-sessions")
        self.ci = ci
        self.log = log
        self.sessions: dict[str, Session] = {}
        self._pool: list[_Pooled] = []
        #: Kernels (of a gateway) that could not enter their session directory.
        self._elsewhere: set[str] = set()
        self._filling: asyncio.Task[None] | None = None
        self._closing = False
        self._starting = 0  # sessions being created, counted against max_sessions

    # -- lifecycle --------------------------------------------------------------------

    async def create(self, kernel_name: str | None = None, env: dict[str, str] | None = None,
                     cwd_name: str | None = None) -> Session:
        """Start a session (from the pool when it fits) and return it."""
        if len(self.sessions) + self._starting >= self.ci.max_sessions:
            raise TooManySessions(
                f"{self.ci.max_sessions} sessions exist already (c.JupyterCI.max_sessions): "
                "delete one first.")
        self._starting += 1
        try:
            choice = await self._choose(kernel_name)
            pooled = None if cwd_name else self._take(choice, env)
            if pooled is None:
                pooled = await self._start(choice, env, cwd_name)
            session = await self._connect(pooled)
        finally:
            self._starting -= 1
        self.sessions[session.id] = session
        self.fill_pool()
        return session

    def get(self, sid: str) -> Session:
        """Return the session with this id."""
        session = self.sessions.get(sid)
        if session is None:
            raise UnknownSession(f"No session {sid!r}: it was deleted, culled after "
                                 "c.JupyterCI.session_idle_timeout, or never existed.")
        return session

    async def delete(self, sid: str) -> None:
        """Shut the session's kernel down and remove its directory."""
        session = self.sessions.pop(sid, None)
        if session is None:
            raise UnknownSession(f"No session {sid!r}.")
        session.closed = True
        for task in list(session.tasks):
            task.cancel()  # an ask's model call stops now, not when its reply would end
        if self.service is not None:
            self.service.broker.budget.close(f"ask:{sid}")  # its asks' budget (session_ask.py)
        await self._dispose(session.client, session.kernel_id, session.directory,
                            session.lock)

    async def restart(self, sid: str) -> Session:
        """Restart the kernel (state cleared, files kept) and reconnect."""
        session = self.get(sid)
        if session.busy:
            # The run in flight holds the lock: stop it rather than wait out its timeout.
            await self.interrupt(sid)
        async with session.lock:
            if session.closed:
                raise UnknownSession(f"The session {sid!r} was deleted.")
            session.client.stop_channels()
            try:
                try:
                    await ensure_async(self.km.restart_kernel(session.kernel_id))
                except (asyncio.InvalidStateError, futures.InvalidStateError):
                    # The server's own restarter was reviving the dead kernel at the same
                    # moment (jupyter_client sets its ready future twice): once more, after it.
                    await asyncio.sleep(RESTART_RETRY_S)
                    await ensure_async(self.km.restart_kernel(session.kernel_id))
                session.client = await self._client(session.kernel_id, session.directory)
            except Exception as exc:
                session.dead = True
                raise KernelUnavailable(f"The session's kernel could not be restarted "
                                        f"({type(exc).__name__}); delete the session.") from exc
            session.executor = self._executor(session.kernel_id, session.client)
            session.dead = False
            session.history.clear()
            session.last_activity = time.time()
        return session

    async def execute(self, sid: str, code: str, timeout: float | None,
                      on_output: OnOutput | None = None) -> dict[str, Any]:
        """Run code in the session; return the API's execute result."""
        session = self.get(sid)
        async with session.lock:
            result, files = await self.run_locked(session, code, timeout or self.ci.timeout,
                                                  on_output)
        return execute_result(result, files)

    async def run_locked(self, session: Session, code: str, timeout: float,
                         on_output: OnOutput | None = None
                         ) -> tuple[CodeResult, list[dict[str, Any]]]:
        """Run code in a session whose lock the caller holds; record it in the history."""
        if session.closed:
            raise UnknownSession(f"The session {session.id!r} was deleted.")
        if session.dead:
            # Its state is gone, even if the server restarted the kernel on its own: say so
            # rather than run in a blank kernel, until the client restarts the session.
            return CodeResult("died", error=ErrorInfo(
                "KernelDied", "the kernel died; restart the session to go on")), []
        session.busy, session.last_activity = True, time.time()
        here = session.kernel_id not in self._elsewhere
        before = await session_files.walk(session.file_count, session_files.snapshot,
                                          session.directory) if here else {}
        try:
            result = await session.executor.run(code, timeout, on_output)
        except Exception:
            if not session.closed:
                raise
            # Deleting shuts the kernel and closes the channels under a run in flight.
            raise UnknownSession(f"The session {session.id!r} was deleted while this "
                                 "ran.") from None
        finally:
            session.busy, session.last_activity = False, time.time()
        if session.closed:
            raise UnknownSession(f"The session {session.id!r} was deleted while this ran.")
        session.dead = session.dead or result.status == "died"
        files = await session_files.walk(len(before), session_files.changed, session.directory,
                                         before) if here else []
        session.file_count = len(before)
        # The ask's tool result lists them too (the execute API returns them beside).
        result.files = [FileInfo(**f) for f in files]
        session.history.append(code_cell(code, result))
        return result, files

    async def interrupt(self, sid: str) -> None:
        """Interrupt whatever runs in the session (a streaming client hung up)."""
        session = self.sessions.get(sid)
        if session is not None and session.busy:
            await ensure_async(self.km.interrupt_kernel(session.kernel_id))

    async def cull(self) -> None:
        """Delete the sessions idle for longer than c.JupyterCI.session_idle_timeout."""
        limit = self.ci.session_idle_timeout
        if limit <= 0:
            return
        now = time.time()
        for sid, session in list(self.sessions.items()):
            # A held lock is an ask between model calls: in use, though not running code.
            if not session.lock.locked() and now - session.last_activity > limit:
                self.log.info("jupyter-ci: culling session %s, idle for %.0f s", sid,
                              now - session.last_activity)
                with contextlib.suppress(UnknownSession):  # deleted meanwhile by a request
                    await self.delete(sid)

    async def close(self) -> None:
        """Shut down every session and pooled kernel (the server is stopping)."""
        self._closing = True
        if self._filling is not None:
            # Not cancelled at once: a kernel start cut halfway is one the kernel manager can
            # neither finish nor shut down, and the server's own cleanup then stops short.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._filling), _STOPPING_S)
            self._filling.cancel()
        for sid in list(self.sessions):
            await self.delete(sid)
        for pooled in self._pool:
            await self._dispose(pooled.client, pooled.kernel_id, pooled.directory)
        self._pool.clear()

    # -- the pool ---------------------------------------------------------------------

    def fill_pool(self) -> None:
        """Start pooled kernels in the background up to c.JupyterCI.session_pool."""
        if not self._closing and (self._filling is None or self._filling.done()):
            self._filling = asyncio.ensure_future(self._fill())

    async def _fill(self) -> None:
        while len(self._pool) < self.ci.session_pool and not self._closing:
            try:
                pooled = await self._start(await self._choose(None), None)
            except Exception as exc:  # logged; sessions then start cold
                self.log.warning("jupyter-ci: could not pre-start a session kernel (%s)", exc)
                return
            if self._closing:  # the server stopped while it started: it needs no pool
                await self._dispose(None, pooled.kernel_id, pooled.directory)
                return
            try:
                # Connecting costs a few hundred ms of kernel_info polling: do it now too.
                pooled.client = await self._client(pooled.kernel_id, pooled.directory)
            except Exception as exc:
                await self._dispose(None, pooled.kernel_id, pooled.directory)
                self.log.warning("jupyter-ci: a pre-started kernel never became ready (%s)", exc)
                return
            self._pool.append(pooled)

    def _take(self, choice: Choice, env: dict[str, str] | None) -> _Pooled | None:
        """Take a pooled kernel when the request asks for nothing it lacks."""
        # The pool holds kernels of the default choice; a different one starts cold.
        if env or any(pooled.choice != choice for pooled in self._pool):
            return None
        while self._pool:
            pooled = self._pool.pop(0)
            if pooled.kernel_id in self.km:
                return pooled
            # Shut down from elsewhere: JupyterLab's Running panel lists every kernel.
            pooled.client.stop_channels()
            shutil.rmtree(pooled.directory, ignore_errors=True)
        return None

    # -- kernels ----------------------------------------------------------------------

    def _default_kernel(self) -> str:
        return str(getattr(self.km, "default_kernel_name", "python3") or "python3")

    async def _choose(self, kernel_name: str | None) -> Choice:
        """Pick the kernelspec of a session: boxed where c.JupyterCI.session_sandbox says."""
        try:
            return await choose(self.ci.session_sandbox, kernel_name, self._default_kernel(),
                                self.km, self.log)
        except CannotBox as error:
            raise CannotSandbox(str(error)) from None

    async def _start(self, choice: Choice, env: dict[str, str] | None,
                     cwd_name: str | None = None) -> _Pooled:
        """Start a kernel through the server's kernel manager, in a new session directory."""
        sid = uuid.uuid4().hex
        directory = self.root / (cwd_name or sid)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            raise SessionError(f"A session directory named {cwd_name!r} exists already: "
                               "choose another cwd_name.") from None
        kwargs: dict[str, Any] = {"kernel_name": choice.kernel_name}
        if directory.is_relative_to(self.root_dir):
            kwargs["path"] = directory.relative_to(self.root_dir).as_posix()
        else:
            kwargs["cwd"] = str(directory)
        if choice.sandboxed:
            kwargs["env"] = session_environ(env)  # the box keeps only what it is told to
        elif env:
            kwargs["env"] = {**os.environ, **env}
        try:
            kernel_id = await ensure_async(self.km.start_kernel(**kwargs))
        except NoSuchKernel:
            shutil.rmtree(directory, ignore_errors=True)
            names = ", ".join(sorted(self.km.kernel_spec_manager.find_kernel_specs()))
            raise SessionError(f"There is no kernel named {kwargs['kernel_name']!r}; this "
                               f"server has: {names}.") from None
        except Exception as exc:
            shutil.rmtree(directory, ignore_errors=True)
            raise KernelUnavailable(f"The kernel {kwargs['kernel_name']!r} could not be "
                                    f"started ({type(exc).__name__}: {exc}).") from exc
        except BaseException:  # cancelled: the server is stopping
            shutil.rmtree(directory, ignore_errors=True)
            raise
        return _Pooled(sid, str(kernel_id), directory, choice)

    async def _connect(self, pooled: _Pooled) -> Session:
        """Connect a client to a started kernel; on failure leave nothing behind."""
        try:
            client = pooled.client or await self._client(pooled.kernel_id, pooled.directory)
        except Exception as exc:
            await self._dispose(None, pooled.kernel_id, pooled.directory)
            raise KernelUnavailable(f"The kernel did not become ready within {_READY_S:g} s "
                                    f"({type(exc).__name__}).") from exc
        session = Session(pooled.sid, pooled.kernel_id, pooled.choice.kernel_name,
                          pooled.directory, client, self._executor(pooled.kernel_id, client),
                          history=History(self.ci.session_history_output_bytes,
                                          self.ci.session_history_bytes),
                          sandboxed=pooled.choice.sandboxed)
        # The server's restarter revives a kernel that died while idle, blank: that is dead too.
        add_callback = getattr(self.km.get_kernel(pooled.kernel_id), "add_restart_callback",
                               None)  # none on a gateway's kernels
        if add_callback is not None:
            for event in ("restart", "dead"):
                add_callback(lambda: setattr(session, "dead", True), event)
        return session

    async def _client(self, kernel_id: str, directory: Path) -> Any:
        client = kernel_client(self.km.get_kernel(kernel_id))
        await ensure_async(client.start_channels())
        await client.wait_for_ready(timeout=_READY_S)
        if is_gateway(self.km):
            await self._enter(kernel_id, client, directory)
        return client

    async def _enter(self, kernel_id: str, client: Any, directory: Path) -> None:
        """Move a gateway's kernel into the session directory, if its machine has it."""
        # A gateway starts kernels in its own directory. One that shares this server's disk
        # (same host, shared volume) can enter the session's; one that cannot has no files
        # here, and the files routes say so rather than show a directory it never sees.
        msg_id = client.execute(f"__import__('os').chdir({str(directory)!r})", silent=True,
                                store_history=False)
        deadline = time.monotonic() + _READY_S
        while True:
            reply = await client.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        if reply["content"]["status"] == "ok":
            self._elsewhere.discard(kernel_id)
        else:
            self._elsewhere.add(kernel_id)

    def directory(self, sid: str) -> Path:
        """Return the session's directory for the files routes, if its kernel uses it."""
        session = self.get(sid)
        if session.kernel_id in self._elsewhere:
            raise FilesElsewhere(
                "This session's kernel runs in a gateway on another machine, which cannot see "
                "this server's session directory: the files routes are not available. Read and "
                "write files with execute, or give the gateway the server's session_root (a "
                "shared volume at the same path).")
        return session.directory

    def _executor(self, kernel_id: str, client: Any) -> KernelExecutor:
        async def interrupt() -> None:
            await ensure_async(self.km.interrupt_kernel(kernel_id))

        async def is_alive() -> bool:
            if kernel_id not in self.km:
                return False
            return bool(await ensure_async(self.km.get_kernel(kernel_id).is_alive()))

        return KernelExecutor(client, KernelControl(interrupt, is_alive),
                              output_limit=self.ci.session_run_output_bytes)

    async def _dispose(self, client: Any, kernel_id: str, directory: Path,
                       lock: asyncio.Lock | None = None) -> None:
        """Shut the kernel down, stop the client and remove the directory, whatever fails."""
        self._elsewhere.discard(kernel_id)
        try:
            if kernel_id in self.km:
                await ensure_async(self.km.shutdown_kernel(kernel_id, now=True))
        except Exception as exc:  # a kernel that is already gone
            self.log.warning("jupyter-ci: shutting down kernel %s: %s", kernel_id, exc)
        if lock is not None and lock.locked():
            # A run in flight sees its kernel gone within a poll and ends as "died"; closing
            # its channels under it would cancel its read instead.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_SETTLE_S), lock:
                    pass
        if client is not None:
            client.stop_channels()
        await asyncio.to_thread(shutil.rmtree, directory, True)

