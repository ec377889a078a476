"""The HTTP door's fast path: a call of `execute` answered in process, in one JSON body.

Through the SDK a tool call goes from the transport to a dispatcher, a runner, middleware and
the tool manager, each a task hop, and back as a server-sent event: about 2 ms of a ~10 ms
execute (bench/bench_mcp.py). Streamable HTTP lets a server answer a request with one JSON
body instead, so a call that asks for nothing but its answer need none of that.

Where it sits: in each MCP session's own transport, where the SDK hands it a POST. By then the
SDK's session manager has found the session by its Mcp-Session-Id (else 400 or 404), checked
that the credential that opened it comes again, and the transport has checked the request's
Host and Origin, that the session is not terminated, and counts the request in flight
against its idle timeout. There a `tools/call` of `execute`:

- on a connection whose initialize succeeded (the door refuses 2026-07-28's, see tools.py),
- with no `_meta` (no progress token) and nothing but the tool's name and arguments,
- from a client that accepts the SDK's answer (JSON and event streams) and sent JSON,
- with arguments the tool's own model takes, in a session this connection names or started,
- that InProcessBackend.prepare accepts (authorized as REST's execute, REST's body reader and
  limits, the session found, its language),

is run under the session's lock and answered as the SDK would: the same CallToolResult, the
same error texts. Anything else goes to the SDK unchanged, so each refusal is the SDK's own
(or the tool's, on the SDK's path). A `notifications/cancelled` naming a call cancels it (its
run interrupted) and it is answered "Request cancelled", as the SDK's transport answers; the
MCP session's end cancels its calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http import (
    MCP_SESSION_ID_HEADER,
    REQUEST_CANCELLED,
    check_accept_headers,
)
from mcp.types import CallToolResult, TextContent
from mcp_types import (
    CONNECTION_CLOSED,
    ErrorData,
    JSONRPCError,
    JSONRPCResponse,
    RequestId,
)
from mcp_types import methods as spec
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from jupyter_ci.mcp import results
from jupyter_ci.mcp.asgi import HANDLER
from jupyter_ci.mcp.inprocess import InProcessBackend, Prepared
from jupyter_ci.mcp.tools import STATE_KEY, Connection

if TYPE_CHECKING:
    from mcp.server.connection import Connection as Link
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.tools.base import Tool
    from mcp.server.streamable_http import StreamableHTTPServerTransport
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

log = logging.getLogger(__name__)
TOOL = "execute"
METHOD = "tools/call"
#: The only keys of a call's params the fast path takes (`_meta` only when empty).
PARAMS = frozenset({"name", "arguments", "_meta"})
Post = Callable[[Scope, Request, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Call:
    """A call of `execute` the fast path answers: its id, protocol version and run."""

    ident: RequestId
    version: str
    prepared: Prepared


@dataclass
class FastPath:
    """Answer eligible `execute` calls in process (see the module's docstring)."""

    backend: InProcessBackend
    tool: Tool
    #: Each live MCP session's SDK connection, by its Mcp-Session-Id (see `__call__`).
    links: dict[str, Link] = field(default_factory=dict)
    #: The fast calls running in each MCP session, by request id.
    running: dict[str, dict[RequestId, asyncio.Task[Any]]] = field(default_factory=dict)
    #: Calls answered here (the tests tell the two paths apart by it).
    answered: int = 0

    @classmethod
    def of(cls, server: MCPServer[Any], backend: InProcessBackend) -> FastPath:
        """Return the fast path of `server`'s `execute`, its middleware added to the server."""
        tool = server._tool_manager.get_tool(TOOL)  # the SDK's own tool: its argument model
        assert tool is not None
        fast = cls(backend, tool)
        server.middleware.append(fast)
        return fast

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
                       ) -> HandlerResult:
        """Note each MCP session's connection (a middleware: it sees every request)."""
        link = ctx.session._connection  # mcp 2.3 hands it out only here (tools._connection)
        sid = link.session_id
        if sid is not None and sid not in self.links:
            self.links[sid] = link
            link.exit_stack.callback(self._ended, sid)
        return await call_next(ctx)

    def install(self, manager: StreamableHTTPSessionManager) -> None:
        """Hook the fast path into the transport of each MCP session the manager opens."""
        admit = manager._admit_session

        def admitted(requestor: Any) -> StreamableHTTPServerTransport | None:
            transport = admit(requestor)
            if transport is not None:
                # The SDK's own checks of the session ran before it reaches this method.
                transport._handle_post_request = partial(  # type: ignore[method-assign]
                    self._post, transport, transport._handle_post_request)
            return transport

        manager._admit_session = admitted  # type: ignore[method-assign]

    async def _post(self, transport: StreamableHTTPServerTransport, sdk: Post, scope: Scope,
                    request: Request, receive: Receive, send: Send) -> None:
        """Answer an eligible call here; hand anything else to the SDK's transport."""
        message = _message(await request.body())
        try:
            call = await self._eligible(transport, request, message)
        except Exception:  # a bug here must not cost the call: the SDK answers it
            log.exception("jupyter-ci: the MCP fast path failed; the SDK answers the call")
            call = None
        if call is None:
            self._cancel(transport, message)
            await sdk(scope, request, receive, send)
            return
        answer = await self._answer(transport, call)
        await Response(answer, headers={"Content-Type": "application/json",
                                        MCP_SESSION_ID_HEADER: str(transport.mcp_session_id)}
                       )(scope, receive, send)

    async def _eligible(self, transport: StreamableHTTPServerTransport, request: Request,
                        message: dict[str, Any] | None) -> Call | None:
        """Return the call if the fast path answers it as the SDK would, else None."""
        sid = transport.mcp_session_id
        link = self.links.get(sid or "")
        # The SDK's manager found this transport by the request's Mcp-Session-Id (and its
        # connection speaks a handshake version); its runner refuses a connection whose
        # initialize failed, its transport an Accept or Content-Type it does not serve.
        if message is None or message.get("method") != METHOD or link is None or \
                not _is_request(message) or not _accepted(request) or \
                not link.initialize_accepted:
            return None
        params = message.get("params")
        if not isinstance(params, dict) or set(params) - PARAMS or params.get("_meta") or \
                params.get("name") != TOOL:
            return None
        try:
            spec.validate_client_request(METHOD, link.protocol_version, params)
            args = self.tool.fn_metadata.validate_arguments(params.get("arguments") or {})
        except (ValueError, KeyError, ValidationError):
            return None  # the SDK says what is wrong, in its words
        target = args.get("session_id") or _default(link)
        if not target:
            return None  # the SDK's path starts the connection's default session
        try:
            prepared = await self.backend.prepare(request.scope.get(HANDLER), target,
                                                  args["code"], args.get("timeout"),
                                                  args.get("language"))
        except ToolError:
            return None  # refused: the SDK's path refuses it the same way, as the tool
        return Call(message["id"], link.protocol_version, prepared)

    async def _answer(self, transport: StreamableHTTPServerTransport, call: Call) -> bytes:
        """Run the call as a task its cancellation can reach; return its JSON-RPC answer."""
        sid = str(transport.mcp_session_id)
        calls = self.running.setdefault(sid, {}) if sid in self.links else None
        if calls is None:  # the MCP session ended while the call was checked
            return _error(call, CONNECTION_CLOSED, "Connection closed")
        task = asyncio.ensure_future(self.backend.run(call.prepared))
        calls[call.ident] = task
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:  # the server stops: so does the run
            task.cancel()
            raise
        finally:
            if calls.get(call.ident) is task:  # a reused id may have a newer call there
                del calls[call.ident]
        self.answered += 1
        if task.cancelled():  # by a notifications/cancelled, or by the MCP session's end
            return _error(call, REQUEST_CANCELLED, "Request cancelled") \
                if self.running.get(sid) is calls else \
                _error(call, CONNECTION_CLOSED, "Connection closed")
        dumped = spec.serialize_server_result(METHOD, call.version, _outcome(task).model_dump(
            by_alias=True, mode="json", exclude_none=True))
        return _dump(JSONRPCResponse(jsonrpc="2.0", id=call.ident, result=dumped))

    def _cancel(self, transport: StreamableHTTPServerTransport,
                message: dict[str, Any] | None) -> None:
        """Cancel the fast call a `notifications/cancelled` names (the SDK ignores it then)."""
        if message is None or message.get("method") != "notifications/cancelled":
            return
        params = message.get("params")
        ident = params.get("requestId") if isinstance(params, dict) else None
        task = self.running.get(str(transport.mcp_session_id), {}).get(ident) \
            if isinstance(ident, str | int) else None
        if task is not None:
            task.cancel()  # InProcessBackend._run interrupts the run

    def _ended(self, sid: str) -> None:
        """Forget an MCP session that ended; cancel its calls."""
        self.links.pop(sid, None)
        for task in self.running.pop(sid, {}).values():
            task.cancel()


def _outcome(task: asyncio.Task[Any]) -> CallToolResult:
    """Return the tool's result for a finished run, as MCPServer makes it of the tool's."""
    try:
        return results.run_result(task.result())
    except ToolError as error:  # the tool's words, under the SDK's prefix (Tool.run)
        said = f"Error executing tool {TOOL}: {error}"
    except Exception:
        log.exception("Tool %r raised an unexpected exception", TOOL)
        said = f"Error executing tool {TOOL}"
    return CallToolResult(content=[TextContent(type="text", text=said)], is_error=True)


def _error(call: Call, code: int, message: str) -> bytes:
    """Return a JSON-RPC error answering `call`."""
    return _dump(JSONRPCError(jsonrpc="2.0", id=call.ident,
                              error=ErrorData(code=code, message=message)))


def _dump(message: JSONRPCResponse | JSONRPCError) -> bytes:
    """Return a JSON-RPC message as the SDK's transport writes it."""
    return message.model_dump_json(by_alias=True, exclude_unset=True).encode()


def _message(body: bytes) -> dict[str, Any] | None:
    """Return a POST's JSON-RPC message, or None when it is not one JSON object."""
    with contextlib.suppress(ValueError, RecursionError):
        message = json.loads(body)
        return message if isinstance(message, dict) and message.get("jsonrpc") == "2.0" \
            else None
    return None


def _is_request(message: dict[str, Any]) -> bool:
    """Tell whether a message is a request with an id JSON-RPC allows."""
    ident = message.get("id")
    return isinstance(ident, str | int) and not isinstance(ident, bool)


def _accepted(request: Request) -> bool:
    """Tell whether the SDK's transport would take this POST (its Accept, its Content-Type)."""
    has_json, has_sse = check_accept_headers(request)
    media = request.headers.get("content-type", "").split(";")[0]
    return has_json and has_sse and "application/json" in (p.strip() for p in media.split(","))


def _default(link: Link) -> str | None:
    """Return the default session of an MCP connection, if it has one yet."""
    state = link.state.get(STATE_KEY)
    return state.default if isinstance(state, Connection) else None
