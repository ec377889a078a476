"""The extension's route table: the broker's routes and the sessions' routes, joined."""

from __future__ import annotations

from collections.abc import Callable
from logging import Logger
from typing import TYPE_CHECKING, Any

from tornado import web

from jupyter_ci.config import JupyterCI
from jupyter_ci.server.broker.model_service import ModelService
from jupyter_ci.server.broker.routes import routes as broker_routes
from jupyter_ci.server.sessions.manager import SessionManager
from jupyter_ci.server.sessions.routes import routes as session_routes

if TYPE_CHECKING:
    import httpx


def routes(
    ci: JupyterCI, service: ModelService, client: httpx.AsyncClient, log: Logger,
    sessions: SessionManager, publish: Callable[[], None],
) -> list[tuple[str, type[web.RequestHandler], dict[str, Any]]]:
    """Return the extension's routes, relative to the server's base_url."""
    return [*broker_routes(ci, service, client, log, publish), *session_routes(ci, sessions)]
