"""HTTP handlers of the REST sessions (thin: the work is in manager.py, ask.py and files.py).

Every route is behind Jupyter's authentication and authorizer (resource `jupyter_ci`), answers
JSON, and reports errors as `{"message", "reason"}` with a 4xx status, never a traceback.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import iostream, web

from jupyter_ci.agent.outputs import OutputEvent
from jupyter_ci.config import JupyterCI
from jupyter_ci.server.jsonbody import BadJSON, parse_json
from jupyter_ci.server.sessions import ask, files, languages
from jupyter_ci.server.sessions.errors import SessionError, UnknownSession
from jupyter_ci.server.sessions.fields import Refused as Refused
from jupyter_ci.server.sessions.fields import optional_str as _optional_str
from jupyter_ci.server.sessions.fields import timeout_of as _timeout
from jupyter_ci.server.sessions.fields import validate_cwd_name, validate_env
from jupyter_ci.server.sessions.manager import SessionManager
from jupyter_ci.server.sessions.replies import NO_TOKEN as NO_TOKEN
from jupyter_ci.server.sessions.replies import allowed_methods
from jupyter_ci.server.sessions.results import execute_result, notebook_pieces
from jupyter_ci.server.sessions.session import Session

SID = r"(?P<sid>[^/]+)"  # any id: an unknown one gets our JSON 404
#: The document of the sessions API, beside the route table in server/.
OPENAPI = Path(__file__).parent.parent / "openapi.json"
#: Seconds of silence after which a stream sends an SSE comment, so that proxies and clients'
#: read timeouts (httpx, nginx: 60 s) do not cut a long quiet run, which would interrupt it.
KEEPALIVE_S = 15.0
#: The fields each body may hold: any other (a typo such as `tiemout`) is a 400.
NEW_SESSION_FIELDS = ("kernel_name", "cwd_name", "env", "language")
EXECUTE_FIELDS = ("code", "timeout", "env")


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
            message, reason = NO_TOKEN, "invalid_token"
        if status_code == 405:  # the methods this route has (RFC 9110 requires it)
            self.set_header("Allow", allowed_methods(type(self)))
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message, "reason": reason}))

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

    def body(self) -> dict[str, Any]:
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

    def fields(self, known: Iterable[str]) -> dict[str, Any]:
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
        body = self.fields(NEW_SESSION_FIELDS)
        session = await self.manager.create(
            _optional_str(body, "kernel_name"), validate_env(body.get("env")),
            validate_cwd_name(body.get("cwd_name")), _optional_str(body, "language"))
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
        self.finish(json.dumps(self.manager.get(sid).to_json()))

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


Work = Callable[[Callable[[bytes], None]], Awaitable[dict[str, Any]]]


class StreamingHandler(SessionAPIHandler):
    """A run or an ask, as server-sent events or one JSON reply; a client's hang-up stops it."""

    _session: Session | None = None
    _task: asyncio.Future[dict[str, Any]] | None = None
    #: Whether this request holds the session's lock (its work runs, not waits its turn).
    _holding = False
    #: Whether hanging up cancels the work too (an ask), not only interrupts the kernel.
    cancel_on_close = False

    async def stream(self, session: Session, work: Work) -> None:
        """Run `work` under the session's lock; send what it emits, then its `result`."""
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        if (stream := getattr(self.request.connection, "stream", None)) is not None:
            # Else (Nagle) an event written before the last one's ACK waits for a delayed ACK.
            stream.set_nodelay(True)
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        task = self._begin(session, work, queue.put_nowait)
        task.add_done_callback(lambda _: queue.put_nowait(None))
        while (chunk := await self._next_chunks(queue)) is not None:
            await self._send(chunk)
        if task.cancelled():
            if session.closed:  # deleted (or culled) while it ran: say so, if anyone listens
                self._end(sse("error", {"message": "The session was deleted while this ran; "
                                        "its kernel is gone.", "reason": "unknown_session"}))
            return
        try:
            self._end(sse("result", task.result()))
        except SessionError as error:
            self._end(sse("error", {"message": error.message, "reason": error.reason}))

    @staticmethod
    async def _next_chunks(queue: asyncio.Queue[bytes | None]) -> bytes | None:
        """Return the events queued by now as one write (a keep-alive after KEEPALIVE_S of
        quiet); None once the work is done and all it emitted was returned."""
        if queue.empty():
            try:
                first = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
            except TimeoutError:
                return b": keep-alive\n\n"
        else:
            first = queue.get_nowait()
        chunks = [first] if first is not None else []
        while not queue.empty():  # an ask emits events in bursts: one write for each burst
            chunk = queue.get_nowait()
            if chunk is None:
                queue.put_nowait(None)  # the end, after what came before it
                break
            chunks.append(chunk)
        return b"".join(chunks) if chunks else None

    def _end(self, chunk: bytes) -> None:
        """Send the last event with the end of the response (one write, not two)."""
        if self.request.connection is not None and not self._finished:
            self.write(chunk)
        # APIHandler.finish sets its JSON content type unless told: headers may not be sent yet.
        self.finish(set_content_type="text/event-stream")

    async def answer(self, session: Session, work: Work) -> dict[str, Any] | None:
        """Run `work` under the session's lock for one JSON reply; a hang-up interrupts it."""
        # None: its client hung up while it waited its turn, so there is nobody to answer.
        task = self._begin(session, work, lambda _: None)
        await asyncio.wait([task])
        if not task.cancelled():
            return task.result()
        if session.closed:
            raise UnknownSession(f"The session {session.id!r} was deleted while this ran.")
        return None

    def _begin(self, session: Session, work: Work, send: Callable[[bytes], None]
               ) -> asyncio.Future[dict[str, Any]]:
        """Start `work` as a task of the session (deleting the session cancels it)."""
        self._session = session
        self._task = task = asyncio.ensure_future(self._locked(session, work, send))
        session.tasks.add(task)
        task.add_done_callback(session.tasks.discard)
        return task

    async def _locked(self, session: Session, work: Work,
                      send: Callable[[bytes], None]) -> dict[str, Any]:
        async with session.lock:
            self._holding = True
            try:
                return await work(send)
            finally:
                self._holding = False

    async def _send(self, chunk: bytes) -> None:
        if self.request.connection is None or self._finished:
            return
        self.write(chunk)
        try:
            await self.flush()
        except Exception:  # the client hung up; on_connection_close stops the work
            return

    def on_connection_close(self) -> None:
        """A client that hangs up interrupts what runs for it (and only that)."""
        super().on_connection_close()
        if self._task is None or self._task.done() or self._session is None:
            return
        if not self._holding:
            self._task.cancel()  # still waiting its turn: another request's run goes on
            return
        self._interrupting = asyncio.ensure_future(self.manager.interrupt(self._session.id))
        if self.cancel_on_close:
            self._task.cancel()


class ExecuteHandler(StreamingHandler):
    """POST code to run; JSON, or server-sent events with `Accept: text/event-stream`."""

    @web.authenticated
    @authorized
    async def post(self, sid: str) -> None:
        """Run {"code", "timeout"?, "env"?} in the session (timeout 0 or null: no deadline)."""
        body = self.fields(EXECUTE_FIELDS)
        code = body.get("code")
        if not isinstance(code, str):
            raise Refused(400, "bad_field", "'code' (a string) is required.")
        if len(code.encode()) > self.ci.max_code_bytes:
            raise Refused(413, "code_too_large", f"The code is over "
                          f"{self.ci.max_code_bytes} bytes (c.JupyterCI.max_code_bytes).")
        timeout, env = _timeout(body), validate_env(body.get("env"))
        session = self.manager.get(sid)
        if env and languages.normalize(session.language) not in languages.ENV_LANGUAGES:
            raise Refused(400, "env_not_supported", f"A run's 'env' is set in "
                          f"{', '.join(languages.ENV_LANGUAGES)} kernels, not "
                          f"{session.language}: give this session its variables when "
                          "creating it ('env').")
        streaming = "text/event-stream" in self.request.headers.get("Accept", "")

        async def work(send: Callable[[bytes], None]) -> dict[str, Any]:
            listener = (lambda event: send(output_event(event))) if streaming else None
            result, changed = await self.manager.run_locked(
                session, code, timeout or self.ci.timeout, listener, env)
            return execute_result(result, changed)

        if streaming:
            return await self.stream(session, work)
        reply = await self.answer(session, work)
        if reply is not None:
            self.finish(json.dumps(reply))


class AskHandler(StreamingHandler):
    """POST a prompt; the ask's events stream back, ending with its result."""

    cancel_on_close = True

    @web.authenticated
    @authorized
    async def post(self, sid: str) -> None:
        """Ask {"prompt", "model"?, "timeout"?, "max_steps"?, "max_fixes"?, "approve"?}."""
        request = ask.parse(self.fields(ask.FIELDS))
        session = self.manager.get(sid)
        languages.check_ask(session.language)
        chat, redactor = await ask.resolve(self.manager, session, request.model)

        async def work(send: Callable[[bytes], None]) -> dict[str, Any]:
            return await ask.ask(self.manager, session, request, chat, redactor,
                                 lambda event, data: send(sse(event, data)), self.user())

        await self.stream(session, work)


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
        self.finish(json.dumps(await asyncio.to_thread(files.listing, directory)))


class OpenAPIHandler(SessionAPIHandler):
    """GET the OpenAPI 3.1 document of the sessions API (a file in the package)."""

    @web.authenticated
    @authorized
    def get(self) -> None:
        """Send the document."""
        self.set_header("Content-Type", "application/json")
        self.finish(OPENAPI.read_bytes())
