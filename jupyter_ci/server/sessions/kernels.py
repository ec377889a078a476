"""The kernels of REST sessions: started by the server's kernel manager, some in advance.

Kernels are started by `serverapp.kernel_manager` (never spawned here), so a server whose
kernels live in a gateway serves sessions unchanged, and each kernel gets its broker token
from the hooks the app put on that kernel manager (server/broker/kernels.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from logging import Logger
from pathlib import Path
from typing import Any, TypedDict

from jupyter_client.kernelspec import NoSuchKernel
from jupyter_core.utils import ensure_async

from jupyter_ci.config import ServerSettings
from jupyter_ci.server.gateway import connected, is_gateway, kernel_client
from jupyter_ci.server.sessions import languages
from jupyter_ci.server.sessions.errors import KernelUnavailable, SessionError
from jupyter_ci.server.sessions.executor import POLL_S, KernelControl, KernelExecutor
from jupyter_ci.server.sessions.orphans import Orphans
from jupyter_ci.server.sessions.pool import Hooks, Pool, Sizes
from jupyter_ci.server.sessions.sandbox import Choice, choose, session_environ
from jupyter_ci.wire.messages import ShellReply

READY_S = 60.0  # a kernel that is not ready by then is not going to be
_SETTLE_S = 3 * POLL_S  # how long a delete waits for a run in flight to see its kernel gone
#: Run quietly in a Python session kernel. IPython's history is written every 1000 cells, not
#: each: its commit (an fsync) holds the lock the next cell's input waits for (the session
#: keeps its own history). ipykernel's 0.5 ms sleep before each reply goes (a workaround for
#: outputs that reach a client after the reply: the executor reads IOPub up to idle, so
#: none is lost). Together ~1 ms of a 3-4 ms small cell. Then charts and tables as data
#: beside their pictures (kernel/structured). Nothing binds a name the user or the model
#: would see; a kernel without jupyter_ci (a gateway's, another environment's) goes without
#: the last.
_PYTHON_SETUP = ("try:\n    get_ipython().history_manager.db_cache_size = 1000\n"
               "    get_ipython().kernel._execute_sleep = 0\nexcept Exception:\n    pass\n"
               "try:\n    __import__('jupyter_ci.kernel.structured.install', fromlist=['_'])"
               ".install(get_ipython())\nexcept Exception:\n    pass\n")


class StartArguments(TypedDict, total=False):
    """What a session's kernel is started with: the kernel manager's start_kernel keywords."""

    kernel_name: str
    #: The kernel's directory relative to the server's root (jupyter_server's MappingKernel-
    #: Manager), or `cwd`, absolute, when the session's directory is outside it.
    path: str
    cwd: str
    env: dict[str, str]


@dataclass
class Started:
    """A kernel started (cold, or in advance) in the directory of the session that takes it."""

    sid: str
    kernel_id: str
    directory: Path
    #: The kernelspec it was started from, and whether that boxes it.
    choice: Choice
    #: A client already connected and past wait_for_ready (pooled kernels come with one).
    client: Any = None


class SessionKernels:
    """Start, connect and dispose of session kernels; keep a pool of them (pool.py)."""

    def __init__(self, kernel_manager: Any, root_dir: Path, root: Path, ci: ServerSettings,
                 log: Logger, room: Callable[[], int] | None = None) -> None:
        self.km = kernel_manager
        self.root_dir = root_dir
        self.root = root
        self.ci = ci
        self.log = log
        #: Kernels (of a gateway) that could not enter their session directory.
        self.elsewhere: set[str] = set()
        #: The kernelspec the pool starts: the default session's (known from the first ask).
        self.pool_choice: Choice | None = None
        sizes = Sizes(max(0, ci.session_pool), max(ci.session_pool, ci.session_pool_max),
                      ci.session_pool_idle_timeout)
        self._pool = Pool(Hooks(self._pooled, self._dispose_started, self._usable), sizes,
                          room or (lambda: ci.max_sessions), log)
        #: Records of the kernels while they run, for the next start after a kill (orphans.py).
        self.orphans = Orphans(root, ci.session_orphans_kept, log)

    # -- the pool (pool.py) -----------------------------------------------------------

    @property
    def pool(self) -> list[Started]:
        """Return the pooled kernels ready now."""
        return list(self._pool.ready)

    def fill(self) -> None:
        """Start pooled kernels in the background, up to the pool's size now."""
        self._pool.refill(retry=True)

    def tidy(self) -> None:
        """Shut down pooled kernels that went away, or that an idle pool no longer needs."""
        self._pool.prune()

    async def acquire(self, choice: Choice, env: dict[str, str] | None) -> Started | None:
        """Take a pooled kernel (or wait for the pool's next) when the request fits one."""
        if env or not self._pool.enabled:
            return None
        if self.pool_choice is None:
            try:
                self.pool_choice = await self.choose(None)
            except SessionError:
                return None  # the default kernel cannot be pooled; this session's can start
        # The pool holds kernels of the default choice; a different one starts cold.
        if choice != self.pool_choice:
            return None
        return await self._pool.get()

    async def _pooled(self) -> Started:
        """Start a kernel of the default choice for the pool, and connect to it."""
        if self.pool_choice is None:
            self.pool_choice = await self.choose(None)
        started = await self.start(self.pool_choice, None)
        # Connecting costs a few hundred ms of kernel_info polling: do it now too.
        started.client = await self.ready_client(started)
        return started

    def _usable(self, pooled: Started) -> bool:
        """Tell a pooled kernel still there (JupyterLab's Running panel lists every kernel)."""
        return pooled.kernel_id in self.km and connected(pooled.client)

    async def _dispose_started(self, pooled: Started) -> None:
        await self.dispose(pooled.client, pooled.kernel_id, pooled.directory)

    async def stop_filling(self) -> None:
        """Let the pool's kernel starts in flight finish (briefly), then fill no more."""
        await self._pool.stop()

    async def empty(self) -> None:
        """Shut down every pooled kernel (the server is stopping)."""
        await self._pool.empty()

    # -- kernels ----------------------------------------------------------------------

    def _default_kernel(self) -> str:
        return str(getattr(self.km, "default_kernel_name", "python3") or "python3")

    async def pick(self, kernel_name: str | None, language: str | None) -> tuple[str, str]:
        """Return (kernelspec, language) of a session asking for either (languages.py)."""
        return await languages.pick(self.km, language, kernel_name, self._default_kernel())

    async def choose(self, kernel_name: str | None) -> Choice:
        """Pick the kernelspec of a session: boxed where c.JupyterCI.session_sandbox says."""
        return await choose(self.ci.session_sandbox, kernel_name, self._default_kernel(),
                            self.km, self.log)

    async def start(self, choice: Choice, env: dict[str, str] | None,
                    cwd_name: str | None = None) -> Started:
        """Start a kernel through the server's kernel manager, in a new session directory."""
        sid = uuid.uuid4().hex
        directory = self.root / (cwd_name or sid)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            raise SessionError(f"A session directory named {cwd_name!r} exists already: "
                               "choose another cwd_name.") from None
        kwargs = self._start_arguments(choice, env, directory)
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
        self.orphans.record(str(kernel_id), sid, directory, None if is_gateway(self.km) else
                            getattr(self.km.get_kernel(kernel_id), "connection_file", None))
        return Started(sid, str(kernel_id), directory, choice)

    def _start_arguments(self, choice: Choice, env: dict[str, str] | None, directory: Path
                         ) -> StartArguments:
        """Return the kernel manager's start_kernel arguments for a session's kernel."""
        kwargs: StartArguments = {"kernel_name": choice.kernel_name}
        if directory.is_relative_to(self.root_dir):
            kwargs["path"] = directory.relative_to(self.root_dir).as_posix()
        else:
            kwargs["cwd"] = str(directory)
        # Marked a session's, boxed or not, after the client's own variables: the server's
        # hooks give it no model credential (its asks run in the server), and a box keeps
        # only what it is told to.
        kwargs["env"] = session_environ(env)
        return kwargs

    async def ready_client(self, started: Started) -> Any:
        """Return a client of a started kernel, ready; on failure leave nothing behind."""
        try:
            return started.client or await self.client(started.kernel_id, started.directory)
        except Exception as exc:
            await self.dispose(None, started.kernel_id, started.directory)
            raise KernelUnavailable(not_ready(exc)) from exc

    async def client(self, kernel_id: str, directory: Path) -> Any:
        """Connect a client to the kernel and wait until it answers."""
        client = kernel_client(self.km.get_kernel(kernel_id))
        await ensure_async(client.start_channels())
        await client.wait_for_ready(timeout=READY_S)
        if is_gateway(self.km):
            await self._enter(kernel_id, client, directory)
        await self._python_setup(client)
        return client

    async def _enter(self, kernel_id: str, client: Any, directory: Path) -> None:
        """Move a gateway's kernel into the session directory, if its machine has it."""
        # A gateway starts kernels in its own directory. One that shares this server's disk
        # (same host, shared volume) can enter the session's; one that cannot has no files
        # here, and the files routes say so rather than show a directory it never sees.
        msg_id = client.execute(f"__import__('os').chdir({str(directory)!r})", silent=True,
                                store_history=False)
        deadline = time.monotonic() + READY_S
        while True:
            reply: ShellReply = await client.get_shell_msg(
                timeout=max(0.1, deadline - time.monotonic()))
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        if reply["content"]["status"] == "ok":
            self.elsewhere.discard(kernel_id)
        else:
            self.elsewhere.add(kernel_id)

    async def _python_setup(self, client: Any) -> None:
        """Set a Python kernel up for sessions (_PYTHON_SETUP); other languages as they are."""
        info = await self._reply(client, client.kernel_info())
        if info["content"].get("language_info", {}).get("name") == "python":
            await self._reply(client, client.execute(_PYTHON_SETUP, silent=True,
                                                     store_history=False))

    async def _reply(self, client: Any, msg_id: str) -> ShellReply:
        """Return the shell reply to one request (earlier replies are no one's any more)."""
        deadline = time.monotonic() + READY_S
        while True:
            reply: ShellReply = await client.get_shell_msg(
                timeout=max(0.1, deadline - time.monotonic()))
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply

    def executor(self, kernel_id: str, client: Any) -> KernelExecutor:
        """Return the executor that runs code in the kernel through `client`."""
        async def interrupt() -> None:
            await ensure_async(self.km.interrupt_kernel(kernel_id))

        async def is_alive() -> bool:
            if kernel_id not in self.km:
                return False
            if not connected(client):
                # Its websocket to the gateway ended: no message of this run can come any
                # more, though the kernel may live (the manager says why: gateway_health.py).
                raise ConnectionError("the websocket to the kernel's gateway ended")
            return bool(await ensure_async(self.km.get_kernel(kernel_id).is_alive()))

        return KernelExecutor(client, KernelControl(interrupt, is_alive),
                              output_limit=self.ci.session_run_output_bytes)

    async def dispose(self, client: Any, kernel_id: str, directory: Path,
                      lock: asyncio.Lock | None = None) -> None:
        """Shut the kernel down, stop the client and remove the directory, whatever fails."""
        self.elsewhere.discard(kernel_id)
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
        self.orphans.forget(kernel_id)


def not_ready(exc: Exception) -> str:
    """Say why a started kernel never answered: it took too long, or it exited."""
    if isinstance(exc, TimeoutError):
        return f"The kernel did not become ready within {READY_S:g} s."
    # jupyter_client's wait_for_ready says "Kernel died before replying to kernel_info".
    return (f"The kernel exited as it started, before it answered ({type(exc).__name__}: "
            f"{exc}); check its kernelspec and the server's log for its error.")
