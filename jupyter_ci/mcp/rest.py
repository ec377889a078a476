"""The MCP tools' session operations over the REST sessions API (stdio, and the loopback door).

Each operation is one REST call made with `client(ctx)`, whose credentials are those of the
MCP caller: the REST route authenticates and authorizes it. InProcessBackend (inprocess.py)
does the same operations in the server itself, authorized as these routes are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from jupyter_ci.client import AsyncClient, AsyncSession, Execution
from jupyter_ci.client.formats import raise_for
from jupyter_ci.mcp.shapes import FileEntry, Notebook, SessionInfo

if TYPE_CHECKING:  # the server imports this module at start, the SDK at the first request
    from mcp.server.mcpserver import Context


async def rest_execute(client: AsyncClient, sid: str, code: str, timeout: float | None,
                       language: str | None) -> Execution:
    """Run code in session `sid` over the REST API (timeout omitted: the server's default)."""
    # Omitted, not None, when not given: the client reads None as "no deadline".
    options: dict[str, Any] = {"timeout": timeout} if timeout else {}
    return await AsyncSession(client.http, {"id": sid}).execute(code, language=language,
                                                                 **options)


class RestBackend:
    """The session operations of a Backend (tools.py), each a REST call of the caller."""

    def client(self, ctx: Context[Any, Any]) -> AsyncClient:
        """Return the REST client of this tool call (a subclass's)."""
        raise NotImplementedError

    async def start(self, ctx: Context[Any, Any], kernel_name: str | None) -> SessionInfo:
        """Start a session (POST /jupyter-ci/sessions); return its info."""
        session = await self.client(ctx).session(
            **({"kernel_name": kernel_name} if kernel_name else {}))
        return cast(SessionInfo, session.info)  # the server's JSON (shapes.py)

    async def sessions(self, ctx: Context[Any, Any]) -> list[SessionInfo]:
        """List the sessions (GET /jupyter-ci/sessions)."""
        response = await self.client(ctx).http.get("jupyter-ci/sessions")
        raise_for(response)
        listed: list[SessionInfo] = response.json()
        return listed

    async def close(self, ctx: Context[Any, Any], sid: str) -> None:
        """End a session (DELETE /jupyter-ci/sessions/<sid>)."""
        await AsyncSession(self.client(ctx).http, {"id": sid}).delete()

    async def files(self, ctx: Context[Any, Any], sid: str) -> list[FileEntry]:
        """List a session's files (GET .../files)."""
        response = await self.client(ctx).http.get(f"jupyter-ci/sessions/{sid}/files")
        raise_for(response)
        listed: list[FileEntry] = response.json()
        return listed

    async def notebook(self, ctx: Context[Any, Any], sid: str) -> Notebook:
        """Return a session's history as a notebook (GET .../notebook)."""
        response = await self.client(ctx).http.get(f"jupyter-ci/sessions/{sid}/notebook")
        raise_for(response)
        notebook: Notebook = response.json()
        return notebook

    async def execute(self, ctx: Context[Any, Any], sid: str, code: str,
                      timeout: float | None, language: str | None) -> Execution:
        """Run code as POST .../execute does."""
        return await rest_execute(self.client(ctx), sid, code, timeout, language)
