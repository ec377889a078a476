"""The routes of the REST sessions API, relative to the server's base_url."""

from __future__ import annotations

from typing import Any

from tornado import web

from jupyter_ci.config import ServerSettings
from jupyter_ci.server.sessions import handlers as s
from jupyter_ci.server.sessions import runs
from jupyter_ci.server.sessions.approval_handler import ApprovalsHandler
from jupyter_ci.server.sessions.file_handler import FileHandler
from jupyter_ci.server.sessions.manager import SessionManager
from jupyter_ci.server.sessions.notebook_handlers import notebook_routes


def routes(ci: ServerSettings, manager: SessionManager
           ) -> list[tuple[str, type[web.RequestHandler], dict[str, Any]]]:
    """Return the sessions' routes (and the OpenAPI document that describes them)."""
    session = {"manager": manager, "ci": ci}
    base, sid = "/jupyter-ci/sessions", s.SID
    return [
        (r"/jupyter-ci/openapi.json", s.OpenAPIHandler, session),
        (base, s.SessionsHandler, session),
        (rf"{base}/{sid}", s.SessionHandler, session),
        (rf"{base}/{sid}/restart", s.RestartHandler, session),
        (rf"{base}/{sid}/execute", runs.ExecuteHandler, session),
        (rf"{base}/{sid}/ask", runs.AskHandler, session),
        (rf"{base}/{sid}/approvals", ApprovalsHandler, session),
        (rf"{base}/{sid}/notebook", s.NotebookHandler, session),
        (rf"{base}/{sid}/files", s.FilesHandler, session),
        (rf"{base}/{sid}/files/(?P<path>.+)", FileHandler, session),
        *notebook_routes(session),
    ]
