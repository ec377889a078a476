"""The MCP door on the server itself: Streamable HTTP at /jupyter-ci/mcp, behind Jupyter's auth.

The SDK's session manager is ASGI; `MCPHandler` (a tornado handler, see asgi.py) checks
Jupyter's authentication and authorizer first, then hands the request over. The manager's
task group runs from the first request until the extension stops.

The tools run in process (inprocess.py: each authorized as its REST route, with the user of
the request that carries it), and a call of `execute` that asks for nothing but its answer
skips the SDK's dispatch (fastpath.py). `ask` and the file tools call the REST sessions API
on the server's own address (loopback), forwarding the caller's own credentials (its
Authorization header, or its cookie and XSRF header): every such call is authenticated and
authorized again exactly as a REST call of that user would be, the limits and checks of the
REST handlers apply once, and no credential is minted or borrowed (the server's own token is
never used). The door itself lets in "read"; each tool's call is then authorized as its REST
route. An answer that is a lone response goes as JSON, not as an event stream (framing.py).
The SDK is imported at the first request, not when the server starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import json
from collections.abc import Awaitable, Callable
from logging import Logger
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import httpx
from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import ensure_async
from tornado import web

from jupyter_ci.client import AsyncClient
from jupyter_ci.mcp.asgi import ASGIHandler
from jupyter_ci.mcp.rest import RestBackend
from jupyter_ci.server.sessions.errors import UnknownSession
from jupyter_ci.server.sessions.handlers import no_token

if TYPE_CHECKING:
    from jupyter_server.serverapp import ServerApp
    from mcp.server.mcpserver import Context
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from jupyter_ci.mcp.fastpath import FastPath
    from jupyter_ci.mcp.tools import Connection
    from jupyter_ci.server.sessions.manager import SessionManager

ROUTE = "/jupyter-ci/mcp"
#: The request headers that carry who the caller is, passed on to the loopback calls.
FORWARDED = ("authorization", "cookie", "x-xsrftoken")
#: JSON-RPC's code for a request the server will not take (a refused one's error).
INVALID_REQUEST = -32600
#: Seconds the MCP sessions get to end when the server stops.
STOP_S = 5.0


def loopback_url(server: ServerApp) -> tuple[str, httpx.AsyncBaseTransport]:
    """Return the server's own base URL and a transport that reaches it from this process."""
    base = server.base_url.rstrip("/")
    if server.sock:
        return f"http://localhost{base}", httpx.AsyncHTTPTransport(uds=server.sock)
    ip = server.ip if server.ip not in ("", "0.0.0.0", "localhost") else "127.0.0.1"
    host = "[::1]" if ip == "::" else f"[{ip}]" if ":" in ip else ip
    scheme = "https" if server.certfile else "http"
    # Our own certificate is often self-signed, and this connection never leaves the host.
    return f"{scheme}://{host}:{server.port}{base}", httpx.AsyncHTTPTransport(
        verify=not server.certfile)


class _Forwarding(AsyncClient):
    """An AsyncClient over a shared connection pool, with one request's credentials."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http


class LoopbackBackend(RestBackend):
    """The tools' REST client in the server: loopback, as the caller of each request."""

    def __init__(self, server: ServerApp, timeout: float = 300.0) -> None:
        self.server = server
        self.url, self.transport = loopback_url(server)
        self.timeout = timeout

    def client(self, ctx: Context[Any, Any]) -> AsyncClient:
        """Return a client carrying the credentials of the HTTP request behind this call."""
        request = ctx.request_context.request
        headers = getattr(request, "headers", {})
        forwarded = {name: headers[name] for name in FORWARDED if name in headers}
        # trust_env off: a proxy set for the server's own downloads must not see these calls.
        return _Forwarding(httpx.AsyncClient(
            base_url=self.url + "/", headers=forwarded, transport=self.transport,
            timeout=self.timeout, trust_env=False))

    def connection(self) -> Connection | None:
        """None: each MCP session keeps its own (`closed` is told of its end)."""
        return None

    async def closed(self, connection: Connection) -> None:
        """End the sessions this MCP session started (its client's DELETE, or idle)."""
        # In the server itself: the caller's credentials went with its last request, and a
        # session its own MCP session started is its to end. Shielded: the SDK ends an idle
        # MCP session by cancelling it.
        sessions = self.server.web_app.settings.get("jupyter_ci_sessions")
        if sessions is None or not connection.started:
            return
        with anyio.CancelScope(shield=True):
            await asyncio.gather(*(_end(sessions, sid) for sid in sorted(connection.started)))


async def _end(sessions: SessionManager, sid: str) -> None:
    """Delete a session an MCP session started, unless something else ended it first."""
    with contextlib.suppress(UnknownSession):
        await sessions.delete(sid, "ended with the MCP session that started it")


class MCPDoor:
    """The SDK's session manager, started at the first request and stopped with the server."""

    def __init__(self, server: ServerApp, log: Logger, in_process: bool = True,
                 fast: bool = True) -> None:
        # in_process=False: every tool over loopback REST; fast=False: every answer from the
        # SDK's transport as an event stream (bench/bench_mcp.py and the tests compare them).
        self.server, self.log, self.in_process = server, log, in_process
        self.json_replies = fast
        self.fast: FastPath | None = None
        self.manager: StreamableHTTPSessionManager | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._starting = asyncio.Lock()
        self.backend: LoopbackBackend | None = None

    async def start(self) -> StreamableHTTPSessionManager:
        """Return the running session manager, starting it on first use."""
        async with self._starting:
            if self._task is None:
                # The SDK takes ~0.3 s to import: not on the event loop.
                await asyncio.to_thread(importlib.import_module, "jupyter_ci.mcp.tools")
                from mcp.server.transport_security import TransportSecuritySettings

                from jupyter_ci.mcp.inprocess import InProcessBackend
                from jupyter_ci.mcp.tools import build_server, handshake_only

                self.backend = (InProcessBackend if self.in_process else LoopbackBackend)(
                    self.server)
                mcp = build_server(self.backend)
                mcp.middleware.append(handshake_only)
                # Makes the server's session manager (its app unused). Jupyter's own host
                # check (allow_remote_access, local_hostnames) guards this handler against DNS
                # rebinding, as every route of the server; the SDK's own would refuse every
                # host but localhost with a 421, even those Jupyter serves (a Hub, Binder).
                mcp.streamable_http_app(transport_security=TransportSecuritySettings(
                    enable_dns_rebinding_protection=False))
                self.manager = mcp.session_manager
                if self.json_replies and isinstance(self.backend, InProcessBackend):
                    from jupyter_ci.mcp.fastpath import FastPath

                    self.fast = FastPath.of(mcp, self.backend)
                    self.fast.install(self.manager)
                self._task = asyncio.ensure_future(self._run(self.manager))
        await self._ready.wait()
        if self.manager is None or self._task is None or self._task.done():
            raise web.HTTPError(503, "The MCP server is not running (stopped, or it failed "
                                "to start: see the server's log).")
        return self.manager

    async def _run(self, manager: StreamableHTTPSessionManager) -> None:
        # The manager's task group must be entered and left in one task: this one.
        try:
            async with manager.run():
                self._ready.set()
                await self._stop.wait()
        except Exception:
            self.log.exception("jupyter-ci: the MCP server stopped")
        finally:
            self._ready.set()  # requests waiting for it are told it is not running

    async def stop(self) -> None:
        """End the MCP sessions and the manager's task group."""
        if self._task is None:
            return
        self._stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._task, STOP_S)
        if self.backend is not None:
            await self.backend.transport.aclose()


Method = TypeVar("Method", bound=Callable[..., Awaitable[None]])


def reading(method: Method) -> Method:
    """Authorize a handler's method as jupyter_server's `authorized` does, for "read"."""
    wrap: Callable[[Method], Method] = authorized("read")
    return wrap(method)


class MCPHandler(ASGIHandler):
    """POST (messages), GET (the server's stream), DELETE (end an MCP session)."""

    auth_resource = "jupyter_ci"

    def initialize(self, door: MCPDoor) -> None:
        """Keep the door."""
        self.door = door
        self.json_replies = door.json_replies

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Say what a refused request lacks (tornado's own words name an XSRF cookie)."""
        if status_code == 403 and not self._signed_in():
            # Also a JSON-RPC error: the SDK's 2.x client shows its message (else only
            # "Server returned an error response", the status dropped).
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"jsonrpc": "2.0", "id": None, "error": {
                "code": INVALID_REQUEST, "message": no_token()},
                "message": no_token(), "reason": "invalid_token"}))
            return
        super().write_error(status_code, **kwargs)

    def _signed_in(self) -> bool:
        try:
            return self.current_user is not None
        except RuntimeError:  # refused before Jupyter authenticated it
            return False

    def asgi_extra(self) -> dict[str, Any]:
        """Say who calls, as the SDK reads it: an MCP session answers only whoever opened it."""
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from mcp.server.auth.provider import AccessToken

        # The SDK binds each session to the principal of the request that created it and
        # answers any other "Session not found" (its session manager). The principal: the
        # token a request signed in with (a digest: Jupyter names a token's user anew at each
        # request of a client that keeps no cookie), else the user (a Hub's, a login's).
        provider = self.identity_provider
        token = provider.get_token(self) if provider.is_token_authenticated(self) else None
        subject = (f"token:{hashlib.sha256(token.encode()).hexdigest()}" if token else
                   f"user:{getattr(self.current_user, 'username', '')}")
        who = AccessToken(token="", client_id="jupyter", scopes=[], subject=subject)
        return {"user": AuthenticatedUser(who)}

    async def _serve(self) -> None:
        manager = await self.door.start()
        self.app = manager.handle_request
        await self.serve()

    # "read" lets in what REST would let in: each tool's call is authorized as its REST route
    # would be (over loopback, by the route itself; in process, inprocess.authorize), so a
    # read-only user may list sessions but not execute. A client's reply to the server (an
    # elicitation's answer: an ask's approval) needs "write", as REST's approvals route does.
    @web.authenticated
    @reading
    async def post(self) -> None:
        """Serve one MCP message (a reply or a stream of server-sent events)."""
        if answers(self.request.body) and not await ensure_async(self.authorizer.is_authorized(
                self, self.current_user, "write", self.auth_resource)):
            raise web.HTTPError(403, f"User is not authorized to write on resource: "
                                f"{self.auth_resource} (to answer the server's requests).")
        await self._serve()

    @web.authenticated
    @reading
    async def get(self) -> None:
        """Serve the MCP session's stream of server-initiated messages."""
        await self._serve()

    @web.authenticated
    @authorized
    async def delete(self) -> None:
        """End an MCP session."""
        await self._serve()


def answers(body: bytes) -> bool:
    """Tell whether an MCP message holds anything but requests and notifications (a reply)."""
    try:
        message = json.loads(body or b"{}")
    except RecursionError:
        return True  # too deep to tell: judged as a reply, whatever the SDK's parser makes of it
    except ValueError:
        return False  # the SDK refuses it, answering nothing to anyone
    messages = message if isinstance(message, list) else [message]
    return any(not isinstance(one, dict) or "method" not in one for one in messages)


def routes(door: MCPDoor) -> list[tuple[str, type[web.RequestHandler], dict[str, MCPDoor]]]:
    """Return the MCP door's route, relative to the server's base_url."""
    return [(ROUTE, MCPHandler, {"door": door})]
