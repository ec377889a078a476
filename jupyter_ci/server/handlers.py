"""The route table: the broker, sessions, boxes and MCP door routes, joined."""

from __future__ import annotations

from collections.abc import Callable
from logging import Logger
from typing import TYPE_CHECKING

from tornado import web

from jupyter_ci.config import ServerSettings
from jupyter_ci.mcp.http import MCPDoor
from jupyter_ci.mcp.http import routes as mcp_routes
from jupyter_ci.server.broker.model_service import ModelService
from jupyter_ci.server.broker.routes import routes as broker_routes
from jupyter_ci.server.sandbox.handlers import box_routes
from jupyter_ci.server.sandbox.notebooks import NotebookBoxes
from jupyter_ci.server.sessions.manager import SessionManager
from jupyter_ci.server.sessions.routes import routes as session_routes

if TYPE_CHECKING:
    import httpx


def routes(
    ci: ServerSettings, service: ModelService, client: httpx.AsyncClient, log: Logger,
    sessions: SessionManager, publish: Callable[[], None], mcp: MCPDoor | None = None,
    boxes: NotebookBoxes | None = None,
) -> list[tuple[str, type[web.RequestHandler], dict[str, object]]]:
    """Return the extension's routes, relative to the server's base_url."""
    return [*broker_routes(ci, service, client, log, publish), *session_routes(ci, sessions),
            *(mcp_routes(mcp) if mcp is not None else []),
            *(box_routes(boxes) if boxes is not None else [])]
