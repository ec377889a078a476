"""The MCP tools of jupyter-ci: sessions, execute, ask, files, the session's notebook (and,
in notebooks.py, the user's own notebooks: read them, and run code in one as a new cell).

The tools reach the sessions through a `Backend`: over the REST sessions API
(rest.RestBackend: the stdio server with one client for its process, the server's loopback
door with one per request carrying that request's own credentials), or in the server itself
(inprocess.InProcessBackend, the HTTP door's: each operation authorized as its REST route).
`ask` and the file tools stay on REST in either (`Backend.client`).
A tool that names no session uses the connection's default one, started on first use.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol, TypeVar, cast

import httpx
from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import METHOD_NOT_FOUND, CallToolResult, ToolAnnotations
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from jupyter_ci._version import __version__
from jupyter_ci.client import AsyncClient, AsyncSession, CodeInterpreterError, Execution
from jupyter_ci.mcp import results
from jupyter_ci.mcp.approval import NEEDS_ELICITATION, Approver
from jupyter_ci.mcp.shapes import FileEntry, Notebook, SessionInfo

INSTRUCTIONS = (
    "jupyter-ci runs Python in stateful Jupyter kernels (sessions): variables, imports and "
    "files persist between `execute` calls of one session. Tools that take `session_id` use "
    "this connection's default session when it is omitted (started on first use). `ask` "
    "hands a whole task to jupyter-ci's own agent, which writes and runs the code itself; "
    "with `approve`, each step (or its plan) is shown to the user to run, edit, skip or stop "
    "first."
)

#: The approval modes, from least to most asking.
Mode = Literal["never", "first", "plan", "each"]
SessionId = Annotated[str | None, Field(
    description="The session to use (from start_session); omitted: this connection's "
    "default session, started on first use.")]


class Backend(Protocol):
    """Where the tools reach the sessions, and with whose credentials (rest.RestBackend over
    the REST API; inprocess.InProcessBackend in the server, authorized as REST would be)."""

    def client(self, ctx: Context[Any, Any]) -> AsyncClient:
        """Return the REST client for this tool call (the tools that stay on REST)."""
        ...

    def connection(self) -> Connection | None:
        """Return the state it keeps for all calls (stdio: its process), else None."""
        ...

    async def closed(self, connection: Connection) -> None:
        """Clean up after an MCP connection that ended."""
        ...

    async def start(self, ctx: Context[Any, Any], kernel_name: str | None) -> SessionInfo:
        """Start a session as POST /jupyter-ci/sessions does; return its info."""
        ...

    async def sessions(self, ctx: Context[Any, Any]) -> list[SessionInfo]:
        """List the sessions as GET /jupyter-ci/sessions does."""
        ...

    async def close(self, ctx: Context[Any, Any], sid: str) -> None:
        """End a session as DELETE /jupyter-ci/sessions/<sid> does."""
        ...

    async def files(self, ctx: Context[Any, Any], sid: str) -> list[FileEntry]:
        """List a session's files as GET .../files does."""
        ...

    async def notebook(self, ctx: Context[Any, Any], sid: str) -> Notebook:
        """Return a session's notebook as GET .../notebook does."""
        ...

    async def execute(self, ctx: Context[Any, Any], sid: str, code: str,
                      timeout: float | None, language: str | None) -> Execution:
        """Run code in session `sid` as POST .../execute does."""
        ...


@dataclass
class Connection:
    """What one MCP connection (a stdio process, an HTTP MCP session) keeps between calls."""

    default: str | None = None
    started: set[str] = field(default_factory=set)
    #: Held while the default session starts, so that calls at once start one, not several.
    starting: asyncio.Lock = field(default_factory=asyncio.Lock)


#: Where a connection's `Connection` is kept in the SDK's per-connection state.
STATE_KEY = "jupyter_ci"


def _connection(ctx: Context[Any, Any], backend: Backend) -> Connection:
    """Return this MCP connection's state, made (and its end hooked) on first use."""
    # The SDK keeps one state dict and one exit stack per connection (a stdio process, an
    # HTTP MCP session), the stack unwound when it ends (DELETE, idle, the server stopping).
    # Its lifespan is the server's, not the connection's, over HTTP; mcp 2.3 hands a tool
    # that per-connection object only through its session.
    kept = backend.connection()
    if kept is not None:
        return kept  # in either protocol era, as 2026-07-28 makes a connection per request
    link = ctx.request_context.session._connection
    state = link.state.get(STATE_KEY)
    if state is None:
        state = link.state[STATE_KEY] = Connection()
        link.exit_stack.push_async_callback(backend.closed, state)
    assert isinstance(state, Connection)
    return state


async def _sid(ctx: Context[Any, Any], backend: Backend, session_id: str | None) -> str:
    """Return the session named, or the connection's default one (started if need be)."""
    if session_id:
        return session_id
    connection = _connection(ctx, backend)
    async with connection.starting:
        if connection.default is None:
            started = await backend.start(ctx, None)
            connection.default = started["id"]
            connection.started.add(started["id"])
        return connection.default


async def _session(ctx: Context[Any, Any], backend: Backend,
                   session_id: str | None) -> AsyncSession:
    """Return the REST client of the session named, or of the connection's default one."""
    sid = await _sid(ctx, backend, session_id)
    return AsyncSession(backend.client(ctx).http, {"id": sid})


#: The failures a tool reports in words (the server's refusals, an unreachable server, bad
#: arguments): mcp 2.x shows a client only "Error executing tool <name>" for any other.
ANTICIPATED = (CodeInterpreterError, httpx.HTTPError, ValueError)
ToolFunction = TypeVar("ToolFunction", bound=Callable[..., Awaitable[Any]])


def anticipated(tool: ToolFunction) -> ToolFunction:
    """Wrap a tool so that an anticipated failure reaches the client with its message."""

    @functools.wraps(tool)
    async def reported(*args: Any, **kwargs: Any) -> Any:
        try:
            return await tool(*args, **kwargs)
        except ANTICIPATED as error:
            raise ToolError(str(error) or type(error).__name__) from error

    return cast(ToolFunction, reported)


class Server(MCPServer[Any]):
    """The SDK's MCPServer, its tools' anticipated failures told to the client."""

    def tool(self, *args: Any, **kwargs: Any) -> Callable[[ToolFunction], ToolFunction]:
        """Register a tool as MCPServer.tool does, wrapped by `anticipated`."""
        register = super().tool(*args, **kwargs)

        def decorator(tool: ToolFunction) -> ToolFunction:
            register(anticipated(tool))
            return tool

        return decorator


#: Why a request of a connectionless protocol version is refused (see `handshake_only`).
CONNECTIONLESS = (
    "jupyter-ci's MCP tools keep state per connection (its default session, the sessions it "
    "started), which MCP 2026-07-28 has none of: connect with the initialize handshake "
    "(protocol 2025-11-25 or before; the SDK's Client does when server/discover is refused).")


async def handshake_only(ctx: ServerRequestContext[Any, Any], call_next: CallNext
                         ) -> HandlerResult:
    """Refuse server/discover and every 2026-07-28 request, so clients fall back to initialize."""
    # The HTTP door's (stdio's process is its connection): such a request has no connection,
    # its exit stack ends with it, and the sessions it started would end at once.
    if ctx.method == "server/discover" or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        raise MCPError(METHOD_NOT_FOUND, CONNECTIONLESS)
    return await call_next(ctx)


def build_server(backend: Backend) -> MCPServer[Any]:
    """Return the MCP server whose tools call the REST API through `backend`."""

    # WARNING: MCPServer calls logging.basicConfig with it, so INFO would make every library
    # (httpx: each loopback request) log to the stderr of the server or of the stdio client.
    server = Server("jupyter-ci", version=__version__, instructions=INSTRUCTIONS,
                    log_level="WARNING")
    _session_tools(server, backend)
    _run_tools(server, backend)
    _ask_tool(server, backend)
    _file_tools(server, backend)
    _read_tools(server, backend)
    from jupyter_ci.mcp.notebooks import notebook_tools  # it builds on this module's types

    notebook_tools(server, backend)
    return server


def _session_tools(server: MCPServer[Any], backend: Backend) -> None:
    @server.tool(annotations=ToolAnnotations(open_world_hint=False))
    async def start_session(ctx: Context[Any, Any], kernel_name: Annotated[
            str | None, Field(description="A kernelspec name; omitted: the server's "
                              "default. Where the sandbox works every session is boxed: a "
                              "kernel without a sandboxed kernelspec is refused.")] = None,
    ) -> SessionInfo:
        """Start a new Python session (a kernel with a working directory of its own) and
        make it this connection's default; return its info (id, sandboxed, ...)."""
        info = await backend.start(ctx, kernel_name)
        _connection(ctx, backend).default = info["id"]
        _connection(ctx, backend).started.add(info["id"])
        return info

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def list_sessions(ctx: Context[Any, Any]) -> list[SessionInfo]:
        """List the server's sessions (id, kernel, status, sandboxed, ...)."""
        return await backend.sessions(ctx)

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def close_session(ctx: Context[Any, Any],
                            session_id: SessionId = None) -> str:
        """Close a session: its kernel is shut down and its directory removed."""
        sid = await _sid(ctx, backend, session_id)
        await backend.close(ctx, sid)
        connection = _connection(ctx, backend)
        connection.started.discard(sid)
        if connection.default == sid:
            connection.default = None
        return f"Session {sid} closed."


def _run_tools(server: MCPServer[Any], backend: Backend) -> None:
    @server.tool(annotations=ToolAnnotations(open_world_hint=False))
    async def execute(ctx: Context[Any, Any], code: Annotated[
            str, Field(description="The Python code to run.")],
            session_id: SessionId = None, timeout: Annotated[float | None, Field(
                description="Seconds before the run is interrupted (the session stays "
                "usable); omitted: the server's default.", gt=0)] = None,
            language: Annotated[str | None, Field(
                description="The language the code is in (python, r, bash, javascript, "
                "...); a session of another language refuses it, running nothing. "
                "Omitted: the session's own.")] = None,
    ) -> CallToolResult:
        """Run Python code in a stateful Jupyter session: print output, the last
        expression's value, errors (with traceback) come back as text, plots as images."""
        sid = await _sid(ctx, backend, session_id)
        return results.run_result(await backend.execute(ctx, sid, code, timeout, language))


def _ask_tool(server: MCPServer[Any], backend: Backend) -> None:
    @server.tool(annotations=ToolAnnotations(open_world_hint=True))
    async def ask(ctx: Context[Any, Any], prompt: Annotated[
            str, Field(description="The task, in plain words.")],
            session_id: SessionId = None, model: Annotated[str | None, Field(
                description="provider:model, e.g. openai:gpt-4.1; omitted: the server's "
                "default.")] = None,
            approve: Annotated[Mode | None, Field(
                description="Which steps wait for the user's approval, asked through this "
                "client (MCP elicitation): never, first (the first step), plan (a plan "
                "first), each (every step); omitted: the server's setting. The server's "
                "minimum may be stricter.")] = None,
    ) -> CallToolResult:
        """Hand a task to jupyter-ci's own agent (the %%ask loop) in a session: it writes
        and runs code until done, with the server's model keys; progress is reported as
        each step runs; steps that need approval are shown to the user to run, edit, skip
        or stop; the answer comes back."""
        approver = Approver(ctx)
        if approve not in (None, "never") and not approver.elicits:
            return results.text(NEEDS_ELICITATION.format(mode=f"approve={approve!r}"),
                                error=True)
        session = await _session(ctx, backend, session_id)
        options = {k: v for k, v in (("model", model), ("approve", approve)) if v}
        return await _asked(ctx, session.ask(prompt, on_approval=approver, **options),
                            approver)


async def _asked(ctx: Context[Any, Any],
                 stream: AsyncIterator[tuple[str, Mapping[str, object]]], approver: Approver
                 ) -> CallToolResult:
    """Report an ask's events as progress; return its result (or why it has none)."""
    narrator, sent = results.Narrator(), 0
    async for event, data in stream:
        if event == "error":
            return results.text(str(data.get("message")), error=True)
        for message in narrator.messages(event, data):
            sent += 1
            await ctx.report_progress(sent, None, message)
        if event == "ask_end":  # the ask's result (`result` follows: its deprecated alias)
            return results.text(NEEDS_ELICITATION.format(
                mode="the server's approval setting"), error=True) if approver.refused \
                else results.ask_result(data)
    return results.text("The ask's stream ended without a result.", error=True)


def _file_tools(server: MCPServer[Any], backend: Backend) -> None:
    @server.tool(annotations=ToolAnnotations(open_world_hint=False))
    async def upload_file(ctx: Context[Any, Any], path: Annotated[
            str, Field(description="Where in the session's directory, e.g. data/sales.csv.")],
            content: Annotated[str, Field(description="The file's content: text, or base64 "
                                          "when `is_base64` is true.")],
            is_base64: Annotated[bool, Field(
                description="Whether `content` is base64 (for binary files).")] = False,
            session_id: SessionId = None) -> FileEntry:
        """Write a file into the session's working directory; return its entry."""
        try:
            data = base64.b64decode(content, validate=True) if is_base64 \
                else content.encode()
        except binascii.Error as error:
            raise ValueError(f"`content` is not valid base64: {error}") from None
        entry = await (await _session(ctx, backend, session_id)).upload(path, data)
        return entry  # FileEntryJSON: the same keys and types as shapes.FileEntry

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def download_file(ctx: Context[Any, Any], path: Annotated[
            str, Field(description="A path in the session's directory.")],
            session_id: SessionId = None) -> CallToolResult:
        """Read a file of the session: text as text, images as images, else base64."""
        session = await _session(ctx, backend, session_id)
        return results.file_result(path, await session.download(path))



def _read_tools(server: MCPServer[Any], backend: Backend) -> None:
    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def list_files(ctx: Context[Any, Any],
                         session_id: SessionId = None) -> list[FileEntry]:
        """List the files of the session's directory (path, size, mime)."""
        return await backend.files(ctx, await _sid(ctx, backend, session_id))

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def get_notebook(ctx: Context[Any, Any],
                           session_id: SessionId = None) -> str:
        """Return the session's executes and asks as an nbformat v4 notebook (JSON)."""
        sid = await _sid(ctx, backend, session_id)
        return results.notebook_text(await backend.notebook(ctx, sid))


__all__ = ["Backend", "CodeInterpreterError", "Connection", "build_server"]
