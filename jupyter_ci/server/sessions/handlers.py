"""HTTP handlers of the REST sessions (thin: the work is in manager.py, ask.py and files.py).

Every route is behind Jupyter's authentication and authorizer (resource `jupyter_ci`), answers
JSON, and reports errors as `{"message", "reason"}` with a 4xx status, never a traceback.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import iostream, web

from jupyter_ci.config import ServerSettings
from jupyter_ci.server.jsonbody import BadJSON, parse_json
from jupyter_ci.server.sessions import files
from jupyter_ci.server.sessions.errors import SessionError
from jupyter_ci.server.sessions.fields import Refused as Refused
from jupyter_ci.server.sessions.fields import names_of, new_session
from jupyter_ci.server.sessions.manager import SessionManager
from jupyter_ci.server.sessions.replies import NO_TOKEN as NO_TOKEN
from jupyter_ci.server.sessions.replies import allowed_methods
from jupyter_ci.server.sessions.replies import no_token as no_token
from jupyter_ci.server.sessions.results import notebook_pieces
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.requests import NewSession
from jupyter_ci.wire.rest import ErrorReply

SID = r"(?P<sid>[^/]+)"  # any id: an unknown one gets our JSON 404
#: The document of the sessions API, beside the route table in server/.
OPENAPI = Path(__file__).parent.parent / "openapi.json"
#: The fields each body may hold: any other (a typo such as `tiemout`) is a 400.


class SessionAPIHandler(APIHandler):
    """Shared set-up and the one mapping of errors to HTTP replies."""

    auth_resource = "jupyter_ci"

    def initialize(self, manager: SessionManager, ci: ServerSettings) -> None:
        """Keep the session manager and the settings."""
        self.manager = manager
        self.ci = ci

    def fail(self, error: SessionError) -> None:
        """Answer a domain error with its status and a JSON body."""
        self.set_status(error.status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(encode(ErrorReply(error.message, error.reason))))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Answer a domain error with its own status, and tornado's own errors (and any bug)
        in JSON, without a traceback: handlers raise, this is the one mapping."""
        error = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(error, SessionError):
            self.fail(error)
            return
        message = error.log_message if isinstance(error, web.HTTPError) and \
            error.log_message else self._reason
        reason = self._reason
        if status_code == 403 and not self._signed_in():
            message, reason = no_token(), "invalid_token"
        if status_code == 405:  # the methods this route has (RFC 9110 requires it)
            self.set_header("Allow", allowed_methods(type(self)))
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(encode(ErrorReply(str(message), str(reason)))))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        """Log bugs; a domain error is the client's to read, not the server log's."""
        if not isinstance(value, SessionError):
            super().log_exception(typ, value, tb)

    def _signed_in(self) -> bool:
        """Tell whether the request came with a valid token or login (a cookie)."""
        try:
            return self.current_user is not None
        except RuntimeError:  # refused before Jupyter authenticated it
            return False

    def user(self) -> str:
        """Return who asks (an ask's approvals are theirs to answer): the user's name, or,
        for the server's own shared token, its holder (Jupyter names each such request
        anew: an anonymous user per cookie-less connection)."""
        token = getattr(self.identity_provider, "token", "")
        if token and hmac.compare_digest(self.identity_provider.get_token(self) or "", token):
            return "\0the server's token"
        return str(getattr(self.current_user, "username", self.current_user))

    def body(self) -> dict[str, object]:
        """Return the request's JSON object (an empty body is an empty object)."""
        if not self.request.body:
            return {}
        try:
            value = parse_json(self.request.body)
        except BadJSON as err:
            raise Refused(400, "bad_json", f"The body is {err}; send a JSON object in UTF-8."
                          ) from None
        if not isinstance(value, dict):
            raise Refused(400, "bad_json", "The body must be a JSON object.")
        return value

    def fields(self, known: Iterable[str]) -> dict[str, object]:
        """Return the body, refusing fields this route does not know (a typo must not pass)."""
        body = self.body()
        unknown = sorted(set(body) - set(known))
        if unknown:
            raise Refused(400, "unknown_field", f"Unknown field(s): {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(known))}.")
        return body


class SessionsHandler(SessionAPIHandler):
    """POST a new session; GET the list."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Create a session: {"kernel_name"?, "cwd_name"?, "env"?, "language"?}."""
        request = new_session(self.fields(names_of(NewSession)))
        session = await self.manager.create(request.kernel_name, request.env or {},
                                            request.cwd_name, request.language)
        self.set_status(201)
        self.finish(json.dumps(encode(session.info())))

    @web.authenticated
    @authorized
    def get(self) -> None:
        """List the sessions."""
        self.finish(json.dumps(encode([s.info() for s in self.manager.sessions.values()])))


class SessionHandler(SessionAPIHandler):
    """GET or DELETE one session."""

    @web.authenticated
    @authorized
    def get(self, sid: str) -> None:
        """Describe the session."""
        self.finish(json.dumps(encode(self.manager.get(sid).info())))

    @web.authenticated
    @authorized
    async def delete(self, sid: str) -> None:
        """Shut the session down and remove its directory."""
        await self.manager.delete(sid)
        self.set_status(204)
        self.finish()


class RestartHandler(SessionAPIHandler):
    """POST to restart the session's kernel."""

    @web.authenticated
    @authorized
    async def post(self, sid: str) -> None:
        """Restart: state cleared, files kept."""
        session = await self.manager.restart(sid)
        self.finish(json.dumps(encode(session.info())))


class NotebookHandler(SessionAPIHandler):
    """GET the session's history as an nbformat v4 notebook."""

    @web.authenticated
    @authorized
    async def get(self, sid: str) -> None:
        """Return the notebook."""
        session = self.manager.get(sid)
        # nbformat validates every cell it makes, and a history of tens of MB takes a while
        # to encode: all off the event loop, which sends the bytes in slices between others.
        pieces = await asyncio.to_thread(notebook_pieces, session.history, session.kernel_name,
                                         session.id, session.language)
        self.set_header("Content-Type", "application/json")
        try:
            for piece in pieces:
                self.write(piece)
                await self.flush()
        except iostream.StreamClosedError:
            return  # the client hung up: nothing to answer
        self.finish()


class FilesHandler(SessionAPIHandler):
    """GET the listing of the session's files."""

    @web.authenticated
    @authorized
    async def get(self, sid: str) -> None:
        """List every file with its size and type."""
        directory = self.manager.directory(sid)
        self.finish(json.dumps(encode(await asyncio.to_thread(files.listing, directory))))


class OpenAPIHandler(SessionAPIHandler):
    """GET the OpenAPI 3.1 document of the sessions API (a file in the package)."""

    @web.authenticated
    @authorized
    def get(self) -> None:
        """Send the document."""
        self.set_header("Content-Type", "application/json")
        self.finish(OPENAPI.read_bytes())
