"""The HTTP door's tools in process: the sessions service called directly, not over loopback.

A loopback call cost an MCP execute 1.3-1.9x a REST one (a second HTTP request, its client,
its parsing). In process, each call is checked as its REST route would check it: the user of
the MCP request that carries the call must be signed in, and the server's authorizer must
allow them the route's action on `jupyter_ci` ("write" to execute, start or close a session),
asked with the door's own handler (its XSRF, host and origin checks ran when tornado took the
request). Reading (list sessions, files, a notebook) needs "read" on `jupyter_ci`, which the
door itself asked before it let the request in (http.py), with the same handler. A body is
read by REST's own reader (its size limits, its timeout rules), a run takes the session's
lock as a REST run does, and a cancelled call interrupts its run as a client hanging up does.
`ask` and the file tools stay on loopback REST (LoopbackBackend): their routes' checks live in
their handlers (the ask's stream and its approvals, an upload judged on its headers).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from jupyter_server.auth.utils import HTTP_METHOD_TO_AUTH_ACTION
from jupyter_server.utils import ensure_async
from mcp.server.mcpserver.exceptions import ToolError

from jupyter_ci.client import Execution
from jupyter_ci.client.formats import executions_of
from jupyter_ci.mcp.asgi import HANDLER
from jupyter_ci.mcp.http import LoopbackBackend
from jupyter_ci.mcp.shapes import FileEntry, Notebook, SessionInfo
from jupyter_ci.server.sessions import files, languages
from jupyter_ci.server.sessions.errors import SessionError
from jupyter_ci.server.sessions.fields import execute, new_session
from jupyter_ci.server.sessions.results import notebook_pieces
from jupyter_ci.server.sessions.runs import Run
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.requests import SERVER_TIMEOUT

if TYPE_CHECKING:
    from jupyter_server.base.handlers import JupyterHandler
    from mcp.server.mcpserver import Context

    from jupyter_ci.server.sessions.manager import SessionManager
    from jupyter_ci.server.sessions.session import Session

#: The resource every REST sessions route is authorized on (SessionAPIHandler.auth_resource).
RESOURCE = "jupyter_ci"


def handler_of(ctx: Context[Any, Any]) -> JupyterHandler | None:
    """Return the door's tornado handler of the HTTP request that carries this call."""
    request = ctx.request_context.request
    handler: JupyterHandler | None = getattr(request, "scope", {}).get(HANDLER)
    return handler


async def authorize(handler: JupyterHandler | None, method: str) -> None:
    """Refuse the call unless its caller may do what REST's route of `method` needs."""
    action = HTTP_METHOD_TO_AUTH_ACTION[method]
    refused = ToolError(f"Forbidden: this user is not authorized to {action} on resource "
                        f"{RESOURCE} (as the REST API would answer with a 403); ask the "
                        "server's administrator for that permission.")
    if handler is None:
        raise refused  # no request of the door behind it: nobody to authorize
    user = handler.current_user
    if not user or not await ensure_async(
            handler.authorizer.is_authorized(handler, user, action, RESOURCE)):
        raise refused


@contextlib.contextmanager
def refused() -> Iterator[None]:
    """Turn what the sessions service refuses into the tool's error, in its words."""
    try:
        yield
    except SessionError as error:
        # As the REST path says it (client.formats.CodeInterpreterError): the reason too, which
        # a client may act on (sandbox_required, too_many_sessions, ...).
        raise ToolError(f"{error.message} (HTTP {error.status}, {error.reason})") from None


def info(session: Session) -> SessionInfo:
    """Describe a session as the REST API does."""
    return cast(SessionInfo, encode(session.info()))


@dataclass(frozen=True)
class Prepared:
    """An execute that REST would take: authorized, its body read, its session found."""

    session: Session
    code: str
    timeout: float


class InProcessBackend(LoopbackBackend):
    """The door's tools in process (ask and files over loopback, as the caller)."""

    @property
    def manager(self) -> SessionManager:
        """Return the server's session manager."""
        manager: SessionManager = self.server.web_app.settings["jupyter_ci_sessions"]
        return manager

    async def start(self, ctx: Context[Any, Any], kernel_name: str | None) -> SessionInfo:
        """Start a session as POST /jupyter-ci/sessions would."""
        await authorize(handler_of(ctx), "POST")
        with refused():
            request = new_session({"kernel_name": kernel_name} if kernel_name else {})
            return info(await self.manager.create(request.kernel_name, request.env or {},
                                                  request.cwd_name, request.language))

    async def sessions(self, ctx: Context[Any, Any]) -> list[SessionInfo]:
        """List the sessions as GET /jupyter-ci/sessions would (the door asked "read")."""
        return [info(session) for session in self.manager.sessions.values()]

    async def close(self, ctx: Context[Any, Any], sid: str) -> None:
        """End a session as DELETE /jupyter-ci/sessions/<sid> would."""
        await authorize(handler_of(ctx), "DELETE")
        with refused():
            await self.manager.delete(sid)

    async def files(self, ctx: Context[Any, Any], sid: str) -> list[FileEntry]:
        """List a session's files as GET .../files would (the door asked "read")."""
        with refused():
            directory = self.manager.directory(sid)
        return cast(list[FileEntry], encode(await asyncio.to_thread(files.listing, directory)))

    async def notebook(self, ctx: Context[Any, Any], sid: str) -> Notebook:
        """Return a session's notebook as GET .../notebook would (the door asked "read")."""
        with refused():
            session = self.manager.get(sid)
        # Off the event loop, as REST's route encodes it: a history can be tens of MB.
        pieces = await asyncio.to_thread(notebook_pieces, session.history, session.kernel_name,
                                         session.id, session.language)
        return cast(Notebook, await asyncio.to_thread(json.loads, b"".join(pieces)))

    async def execute(self, ctx: Context[Any, Any], sid: str, code: str,
                      timeout: float | None, language: str | None) -> Execution:
        """Run `code` as POST .../execute would, for the caller of this MCP request."""
        return await self.run(await self.prepare(handler_of(ctx), sid, code, timeout,
                                                 language))

    async def prepare(self, handler: JupyterHandler | None, sid: str, code: str,
                      timeout: float | None, language: str | None) -> Prepared:
        """Check an execute as REST's route would; raise ToolError with what it refuses."""
        await authorize(handler, "POST")
        ci = self.server.web_app.settings["jupyter_ci"]
        body: dict[str, object] = {"code": code}
        body.update({k: v for k, v in (("timeout", timeout), ("language", language)) if v})
        with refused():
            request = execute(body, ci.max_code_bytes)
            target = self.manager.get(sid)
            languages.check_run(request.language, target.language)
        seconds = ci.timeout if request.timeout == SERVER_TIMEOUT else \
            request.timeout or math.inf
        return Prepared(target, code, seconds)

    async def run(self, prepared: Prepared) -> Execution:
        """Run a prepared execute; raise ToolError with what stopped it."""
        with refused():
            reply = await self._run(prepared.session, prepared.code, prepared.timeout)
        return executions_of(encode(reply))[0]

    async def _run(self, session: Session, code: str, timeout: float) -> object:
        """Run under the session's lock, as a task of the session (its deletion cancels it)."""
        holding = False

        async def locked() -> object:
            nonlocal holding
            async with session.lock:
                holding = True
                return await Run(self.manager, session, timeout, {}, None).one(code)

        task = asyncio.ensure_future(locked())
        session.tasks.add(task)
        task.add_done_callback(session.tasks.discard)
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            # The MCP call was cancelled: stop its run as REST stops a hung-up client's.
            if holding and not task.done():
                await asyncio.shield(self.manager.interrupt(session.id))
            else:
                task.cancel()
            raise
        if task.cancelled():  # deleted (or culled) while it ran
            raise ToolError(f"The session {session.id!r} was deleted while this ran; its "
                            "kernel is gone.")
        return task.result()
