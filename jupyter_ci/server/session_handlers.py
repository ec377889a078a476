"""HTTP handlers of the REST sessions (thin: the work is in sessions.py and session_files.py).

Every route is behind Jupyter's authentication and authorizer (resource `jupyter_ci`), answers
JSON, and reports errors as `{"message", "reason"}` with a 4xx status, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from jupyter_ci.agent.outputs import OutputEvent
from jupyter_ci.config import JupyterCI
from jupyter_ci.server import session_files
from jupyter_ci.server.sessions import (
    SessionError,
    SessionManager,
    notebook,
    validate_cwd_name,
    validate_env,
)

SID = r"(?P<sid>[A-Za-z0-9._-]+)"
_MAX_TIMEOUT_S = 24 * 3600.0


class Refused(SessionError):
    """A request that is malformed or too large, with its status."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason = status, reason


class SessionAPIHandler(APIHandler):
    """Shared set-up and the one mapping of errors to HTTP replies."""

    auth_resource = "jupyter_ci"

    def initialize(self, manager: SessionManager, ci: JupyterCI) -> None:
        """Keep the session manager and the settings."""
        self.manager = manager
        self.ci = ci

    def fail(self, error: SessionError) -> None:
        """Answer a domain error with its status and a JSON body."""
        self.set_status(error.status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": error.message, "reason": error.reason}))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Answer tornado's own errors (and any bug) in JSON, without a traceback."""
        error = kwargs.get("exc_info", (None, None, None))[1]
        message = error.log_message if isinstance(error, web.HTTPError) and \
            error.log_message else self._reason
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message, "reason": self._reason}))

    def body(self) -> dict[str, Any]:
        """Return the request's JSON object (an empty body is an empty object)."""
        if not self.request.body:
            return {}
        try:
            value = json.loads(self.request.body)
        except (ValueError, UnicodeDecodeError):
            raise Refused(400, "bad_json", "The body is not valid JSON.") from None
        if not isinstance(value, dict):
            raise Refused(400, "bad_json", "The body must be a JSON object.")
        return value


def _optional_str(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise Refused(400, "bad_field", f"'{name}' must be a string.")
    return value


def _timeout(body: dict[str, Any]) -> float | None:
    value = body.get("timeout")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            0 < value <= _MAX_TIMEOUT_S) or not math.isfinite(value):
        raise Refused(400, "bad_field", f"'timeout' must be a number of seconds in (0, "
                      f"{_MAX_TIMEOUT_S:g}].")
    return float(value)


class SessionsHandler(SessionAPIHandler):
    """POST a new session; GET the list."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Create a session: {"kernel_name"?, "cwd_name"?, "env"?}."""
        try:
            body = self.body()
            session = await self.manager.create(
                _optional_str(body, "kernel_name"), validate_env(body.get("env")),
                validate_cwd_name(body.get("cwd_name")))
        except SessionError as error:
            return self.fail(error)
        self.set_status(201)
        self.finish(json.dumps(session.to_json()))

    @web.authenticated
    @authorized
    def get(self) -> None:
        """List the sessions."""
        self.finish(json.dumps([s.to_json() for s in self.manager.sessions.values()]))


class SessionHandler(SessionAPIHandler):
    """GET or DELETE one session."""

    @web.authenticated
    @authorized
    def get(self, sid: str) -> None:
        """Describe the session."""
        try:
            self.finish(json.dumps(self.manager.get(sid).to_json()))
        except SessionError as error:
            self.fail(error)

    @web.authenticated
    @authorized
    async def delete(self, sid: str) -> None:
        """Shut the session down and remove its directory."""
        try:
            await self.manager.delete(sid)
        except SessionError as error:
            return self.fail(error)
        self.set_status(204)
        self.finish()


class RestartHandler(SessionAPIHandler):
    """POST to restart the session's kernel."""

    @web.authenticated
    @authorized
    async def post(self, sid: str) -> None:
        """Restart: state cleared, files kept."""
        try:
            session = await self.manager.restart(sid)
        except SessionError as error:
            return self.fail(error)
        self.finish(json.dumps(session.to_json()))


def sse(event: str, data: Any) -> bytes:
    """Encode one server-sent event."""
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def output_event(event: OutputEvent) -> bytes:
    """Encode one change of a run's outputs as a server-sent event."""
    if event.kind == "add":
        return sse("output", event.output)
    if event.kind == "clear":
        return sse("clear_output", {"wait": event.wait})
    return sse("set_outputs", {"outputs": list(event.outputs)})


class ExecuteHandler(SessionAPIHandler):
    """POST code to run; JSON, or server-sent events with `Accept: text/event-stream`."""

    _running: str | None = None

    @web.authenticated
    @authorized
    async def post(self, sid: str) -> None:
        """Run {"code", "timeout"?} in the session."""
        try:
            body = self.body()
            code = body.get("code")
            if not isinstance(code, str):
                raise Refused(400, "bad_field", "'code' (a string) is required.")
            if len(code.encode()) > self.ci.max_code_bytes:
                raise Refused(413, "code_too_large", f"The code is over "
                              f"{self.ci.max_code_bytes} bytes (c.JupyterCI.max_code_bytes).")
            timeout = _timeout(body)
            self.manager.get(sid)
        except SessionError as error:
            return self.fail(error)
        if "text/event-stream" in self.request.headers.get("Accept", ""):
            return await self._stream(sid, code, timeout)
        try:
            result = await self.manager.execute(sid, code, timeout)
        except SessionError as error:
            return self.fail(error)
        self.finish(json.dumps(result))

    async def _stream(self, sid: str, code: str, timeout: float | None) -> None:
        """Send each output as it happens, then the result, as server-sent events."""
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._running = sid
        task = asyncio.ensure_future(self.manager.execute(
            sid, code, timeout, lambda event: queue.put_nowait(output_event(event))))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        while (chunk := await queue.get()) is not None:
            await self._send(chunk)
        self._running = None
        try:
            await self._send(sse("result", task.result()))
        except SessionError as error:
            await self._send(sse("error", {"message": error.message, "reason": error.reason}))
        self.finish()

    async def _send(self, chunk: bytes) -> None:
        if self.request.connection is None or self._finished:
            return
        self.write(chunk)
        try:
            await self.flush()
        except Exception:  # the client hung up; on_connection_close interrupts the run
            return

    def on_connection_close(self) -> None:
        """A client that hangs up on a streaming execute interrupts that run."""
        super().on_connection_close()
        if self._running is not None:
            self._interrupting = asyncio.ensure_future(self.manager.interrupt(self._running))


class NotebookHandler(SessionAPIHandler):
    """GET the session's history as an nbformat v4 notebook."""

    @web.authenticated
    @authorized
    def get(self, sid: str) -> None:
        """Return the notebook."""
        try:
            self.finish(json.dumps(notebook(self.manager.get(sid))))
        except SessionError as error:
            self.fail(error)


class FilesHandler(SessionAPIHandler):
    """GET the listing of the session's files."""

    @web.authenticated
    @authorized
    async def get(self, sid: str) -> None:
        """List every file with its size and type."""
        try:
            directory = self.manager.get(sid).directory
        except SessionError as error:
            return self.fail(error)
        self.finish(json.dumps(await asyncio.to_thread(session_files.listing, directory)))


@web.stream_request_body
class FileHandler(SessionAPIHandler):
    """GET (download), PUT (upload, raw body) or DELETE one file of a session."""

    _upload: session_files.Upload | None = None
    _too_large = False

    async def prepare(self) -> None:  # type: ignore[override]
        """Judge an upload on its headers, before a byte of its body is read."""
        await super().prepare()
        if self.request.method != "PUT" or self._finished:
            return
        user = self.current_user
        if not user or not await ensure_async(self.authorizer.is_authorized(
                self, user, "write", self.auth_resource)):
            raise web.HTTPError(403, "Not allowed to upload to jupyter-ci sessions.")
        limit = self.ci.max_upload_bytes
        try:
            if int(self.request.headers.get("Content-Length") or 0) > limit:
                raise Refused(413, "upload_too_large", _too_large(limit))
            target = self._target()
        except (SessionError, ValueError) as error:
            return self.fail(error if isinstance(error, SessionError) else Refused(
                400, "bad_request", "The Content-Length header is not a number."))
        self.request.connection.set_max_body_size(limit + 1)  # type: ignore[union-attr]
        self._upload = session_files.Upload(target, limit)

    def data_received(self, chunk: bytes) -> None:
        """Write the upload as it arrives; past the limit, drop it."""
        if self._upload is not None and not self._too_large:
            self._too_large = not self._upload.write(chunk)

    def _target(self) -> Any:
        directory = self.manager.get(self.path_kwargs["sid"]).directory
        try:
            return session_files.resolve(directory, self.path_kwargs["path"])
        except session_files.PathRefused as error:
            raise Refused(400, "bad_path", str(error)) from None

    @web.authenticated
    @authorized
    async def put(self, sid: str, path: str) -> None:
        """Put the uploaded file in place and describe it."""
        upload, self._upload = self._upload, None
        if upload is None:
            return self.fail(Refused(400, "bad_request", "Nothing was uploaded."))
        if self._too_large:
            return self.fail(Refused(413, "upload_too_large",
                                     _too_large(self.ci.max_upload_bytes)))
        upload.commit()
        directory = self.manager.get(sid).directory
        self.set_status(201)
        self.finish(json.dumps(session_files.describe(directory, upload.target)))

    @web.authenticated
    @authorized
    async def get(self, sid: str, path: str) -> None:
        """Send the file's bytes (as an attachment: never rendered on Jupyter's origin)."""
        try:
            target = self._target()
        except SessionError as error:
            return self.fail(error)
        if not target.is_file():
            return self.fail(Refused(404, "no_such_file", f"No file {path!r} in the session."))
        self.set_header("Content-Type", "application/octet-stream")
        self.set_header("Content-Disposition", "attachment")
        self.set_header("X-Content-Type-Options", "nosniff")
        async for chunk in session_files.chunks(target):
            self.write(chunk)
            await self.flush()
        self.finish()

    @web.authenticated
    @authorized
    async def delete(self, sid: str, path: str) -> None:
        """Remove the file."""
        try:
            target = self._target()
        except SessionError as error:
            return self.fail(error)
        if not target.is_file():
            return self.fail(Refused(404, "no_such_file", f"No file {path!r} in the session."))
        target.unlink()
        self.set_status(204)
        self.finish()

    def on_finish(self) -> None:
        """Drop an upload that never completed (refused, or the client hung up)."""
        if self._upload is not None:
            self._upload.abort()
            self._upload = None


def _too_large(limit: int) -> str:
    return f"The upload is over {limit} bytes (c.JupyterCI.max_upload_bytes)."


def session_routes(manager: SessionManager, ci: JupyterCI) -> list[tuple[str, Any, Any]]:
    """Return the sessions' routes, relative to the server's base_url."""
    args = {"manager": manager, "ci": ci}
    base = "/jupyter-ci/sessions"
    return [
        (base, SessionsHandler, args),
        (rf"{base}/{SID}", SessionHandler, args),
        (rf"{base}/{SID}/restart", RestartHandler, args),
        (rf"{base}/{SID}/execute", ExecuteHandler, args),
        (rf"{base}/{SID}/notebook", NotebookHandler, args),
        (rf"{base}/{SID}/files", FilesHandler, args),
        (rf"{base}/{SID}/files/(?P<path>.+)", FileHandler, args),
    ]
