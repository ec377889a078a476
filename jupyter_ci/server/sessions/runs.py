"""The routes that run something in a session (execute, ask), as JSON or server-sent events.

A run holds its session's lock; a client that hangs up interrupts what runs for it.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from jupyter_server.auth.decorator import authorized
from tornado import web

from jupyter_ci.agent.outputs import OutputEvent
from jupyter_ci.server.sessions import ask, languages
from jupyter_ci.server.sessions.errors import SessionError, UnknownSession
from jupyter_ci.server.sessions.fields import Refused, execute, names_of
from jupyter_ci.server.sessions.handlers import SessionAPIHandler
from jupyter_ci.server.sessions.manager import SessionManager
from jupyter_ci.server.sessions.results import execute_result
from jupyter_ci.server.sessions.session import Session
from jupyter_ci.server.streams import ServerSentEvent, ServerSentEvents, StreamWriter
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.requests import SERVER_TIMEOUT, Ask, Execute
from jupyter_ci.wire.rest import CellResult, CellStart, ErrorReply, Execution, ExecutionOfCells
from jupyter_ci.wire.results import AskResult

#: Seconds of silence after which a stream sends an SSE comment, so that proxies and clients'
#: read timeouts (httpx, nginx: 60 s) do not cut a long quiet run, which would interrupt it.
KEEPALIVE_S = 15.0


def output_event(event: OutputEvent) -> ServerSentEvent:
    """Say one change of a run's outputs as a server-sent event."""
    if event.kind == "add":
        return ServerSentEvent("output", event.output)
    if event.kind == "clear":
        return ServerSentEvent("clear_output", {"wait": event.wait})
    return ServerSentEvent("set_outputs", {"outputs": list(event.outputs)})


#: Sends one server-sent event of a run (at the loop's next turn, with any others).
Send = Callable[[ServerSentEvent], None]
#: What a run replies: an execute's result, or an ask's (as their wire classes).
Reply = Execution | ExecutionOfCells | AskResult
Work = Callable[[Send], Awaitable[Reply]]


class StreamingHandler(SessionAPIHandler):
    """A run or an ask, as server-sent events or one JSON reply; a client's hang-up stops it."""

    _session: Session | None = None
    _task: asyncio.Future[Reply] | None = None
    #: Whether this request holds the session's lock (its work runs, not waits its turn).
    _holding = False
    #: Whether hanging up cancels the work too (an ask), not only interrupts the kernel.
    cancel_on_close = False
    #: Whether the client hung up (the cells of an execute not started yet are not run).
    hung_up = False
    _writer: StreamWriter[ServerSentEvent] | None = None

    async def stream(self, session: Session, work: Work) -> None:
        """Run `work` under the session's lock; send what it emits, then its `result`."""
        self._writer = writer = StreamWriter[ServerSentEvent](
            self, ServerSentEvents(), on_lost=self._stop, keepalive=KEEPALIVE_S, nodelay=True,
            # APIHandler.finish sets its JSON content type unless told.
            finish=lambda: self.finish(set_content_type=ServerSentEvents.content_type))
        writer.start()
        task = self._begin(session, work, writer.send)
        await asyncio.wait([task])
        if task.cancelled():
            if session.closed:  # deleted (or culled) while it ran: say so, if anyone listens
                writer.end(ServerSentEvent("error", encode(ErrorReply(
                    "The session was deleted while this ran; its kernel is gone.",
                    "unknown_session"))))
            return
        try:
            writer.end(ServerSentEvent("result", encode(task.result())))
        except SessionError as error:
            writer.end(ServerSentEvent("error", encode(ErrorReply(error.message,
                                                                  error.reason))))

    async def answer(self, session: Session, work: Work) -> Reply | None:
        """Run `work` under the session's lock for one JSON reply; a hang-up interrupts it."""
        # None: its client hung up while it waited its turn, so there is nobody to answer.
        task = self._begin(session, work, lambda _: None)
        await asyncio.wait([task])
        if not task.cancelled():
            return task.result()
        if session.closed:
            raise UnknownSession(f"The session {session.id!r} was deleted while this ran.")
        return None

    def _begin(self, session: Session, work: Work, send: Send
               ) -> asyncio.Future[Reply]:
        """Start `work` as a task of the session (deleting the session cancels it)."""
        self._session = session
        self._task = task = asyncio.ensure_future(self._locked(session, work, send))
        session.tasks.add(task)
        task.add_done_callback(session.tasks.discard)
        return task

    async def _locked(self, session: Session, work: Work, send: Send) -> Reply:
        async with session.lock:
            self._holding = True
            try:
                return await work(send)
            finally:
                self._holding = False

    def on_connection_close(self) -> None:
        """A client that hangs up interrupts what runs for it (and only that)."""
        super().on_connection_close()
        self._stop()

    def _stop(self) -> None:
        """Stop what runs for a client that hung up (once; tornado or a failed write says so)."""
        if self.hung_up:
            return
        self.hung_up = True
        if self._writer is not None:
            self._writer.hang_up()
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
        """Run {"code" | "cells", "timeout"?, "env"?} (timeout 0 or null: no deadline)."""
        request = execute(self.fields(names_of(Execute)), self.ci.max_code_bytes)
        code = request.code if request.cells is None else list(request.cells)
        timeout, env = request.timeout or math.inf, request.env or {}
        if request.timeout == SERVER_TIMEOUT:
            timeout = self.ci.timeout
        session = self.manager.get(sid)
        languages.check_run(request.language, session.language)
        if env and languages.normalize(session.language) not in languages.ENV_LANGUAGES:
            raise Refused(400, "env_not_supported", f"A run's 'env' is set in "
                          f"{', '.join(languages.ENV_LANGUAGES)} kernels, not "
                          f"{session.language}: give this session its variables when "
                          "creating it ('env').")
        streaming = "text/event-stream" in self.request.headers.get("Accept", "")

        async def work(send: Send) -> Reply:
            run = Run(self.manager, session, timeout, env, send if streaming else None,
                      lambda: self.hung_up)
            return await (run.one(code) if isinstance(code, str) else run.cells(code or []))

        if streaming:
            return await self.stream(session, work)
        reply = await self.answer(session, work)
        if reply is not None:
            self.finish(json.dumps(encode(reply)))


@dataclass
class Run:
    """One execute request's run in a session whose lock it holds: one cell, or several."""

    manager: SessionManager
    session: Session
    timeout: float
    env: dict[str, str]
    #: Sends server-sent events as they come (None: one JSON reply at the end).
    send: Send | None
    #: Whether nobody waits for the rest any more (its client hung up).
    gone: Callable[[], bool] = lambda: False

    async def one(self, code: str) -> Execution:
        """Run one cell; return its result."""
        send = self.send
        listener = None if send is None else (lambda event: send(output_event(event)))
        result, _ = await self.manager.run_locked(self.session, code, self.timeout, listener,
                                                  self.env)
        return execute_result(result)

    async def cells(self, cells: list[str]) -> ExecutionOfCells:
        """Run cells in order, back to back, up to the first that does not end `ok`."""
        # One request for a notebook's worth of cells: no HTTP round trip between them, and
        # no other request's run between them (the lock is held throughout).
        results: list[Execution] = []
        for index, code in enumerate(cells):
            if self.gone() and results:  # the interrupt stopped a cell, or fell between two
                break
            if self.send is not None:
                self.send(ServerSentEvent("cell", encode(CellStart(index))))
            results.append(await self.one(code))
            if self.send is not None:
                self.send(ServerSentEvent("cell_result", encode(CellResult(index, results[-1]))))
            if results[-1].status != "ok":
                break
        return ExecutionOfCells(results[-1].status, tuple(results), len(cells) - len(results))


class AskHandler(StreamingHandler):
    """POST a prompt; the ask's events stream back, ending with its result."""

    cancel_on_close = True

    @web.authenticated
    @authorized
    async def post(self, sid: str) -> None:
        """Ask {"prompt", "model"?, "timeout"?, "max_steps"?, "max_fixes"?, "approve"?}."""
        request = ask.parse(self.fields(names_of(Ask)))
        session = self.manager.get(sid)
        languages.check_ask(session.language)
        chat, redactor = await ask.resolve(self.manager, session, request.model)

        async def work(send: Send) -> Reply:
            return await ask.ask(self.manager, session, request, chat, redactor,
                                 lambda event, data: send(ServerSentEvent(event, data)),
                                 self.user())

        await self.stream(session, work)
