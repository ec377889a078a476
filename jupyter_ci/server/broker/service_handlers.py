"""The model service's routes for kernels: one turn, streamed; and what the server serves now.

Authenticated only by a kernel's own credential (issued at its start, void at shutdown),
never by Jupyter's token or cookies, and judged on its headers before a byte of its body
is read. Served on the server's port and on the private socket of sandboxed kernels.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from logging import Logger
from typing import Any, Protocol

from tornado import web
from tornado.http1connection import HTTP1Connection
from tornado.httputil import HTTPServerRequest

from jupyter_ci.agent.errors import AskError, LimitReached, ModelConfigError
from jupyter_ci.config import JupyterCI
from jupyter_ci.models.broker import INFO_PATH, MODEL_CODE_PATH
from jupyter_ci.models.turn_wire import TURN_PATH, WireError, error_json, read_turn, reply_json
from jupyter_ci.server.broker.broker import BROKER_ROUTE, Broker, presented_token
from jupyter_ci.server.broker.errors import BodyTooLarge, BrokerError
from jupyter_ci.server.broker.model_service import TOOLS, ModelService
from jupyter_ci.server.jsonbody import BadJSON, parse_json
from jupyter_ci.server.streams import JsonLines, StreamWriter
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.turn import ErrorLine, TurnError

#: HTTP status of an ask error answered before the stream starts.
_STATUS = {LimitReached: 429, ModelConfigError: 400}


class Gate(Protocol):
    """Names who a turn is charged to, from its request's headers, before its body is read."""

    async def holder(self, request: HTTPServerRequest) -> str:
        """Return the budget holder of `request`, or raise the BrokerError refusing it."""
        ...


@dataclass(frozen=True)
class CredentialGate:
    """A single server's gate: the credential of one of its running kernels."""

    broker: Broker

    async def holder(self, request: HTTPServerRequest) -> str:
        """Return the kernel whose live credential the request carries."""
        return self.broker.authenticate(presented_token(request.headers))


class _KernelRoute(web.RequestHandler):
    """A route kernels call with their credential; errors are JSON wire.turn.ErrorLine."""

    def check_xsrf_cookie(self) -> None:
        """Skip XSRF: these routes never read cookies, so a forged request has no credential."""

    def refuse(self, status: int, kind: str, message: str, hint: str = "") -> None:
        """Finish with an error body the kernel's client turns into the ask error `kind`."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(encode(ErrorLine(TurnError(kind, message, hint)))))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Answer tornado's own errors (bad method, a bug) in JSON, without details."""
        self.refuse(status_code, "ModelUnavailable",
                    f"The jupyter-ci model service cannot handle this request (HTTP "
                    f"{status_code} {self._reason}); the server log may say more.")


class InfoHandler(_KernelRoute):
    """GET, with a kernel's credential: the providers and model the server serves now.

    A kernel reads them from its environment at start; one started before a key was
    pasted in the panel asks here instead. No key, URL or token is in the answer.
    """

    def initialize(self, ci: JupyterCI, broker: Broker) -> None:
        """Keep the settings and the broker."""
        self.ci = ci
        self.broker = broker

    def get(self) -> None:
        """Answer {providers, model} to a live kernel credential, else 403."""
        try:
            self.broker.authenticate(presented_token(self.request.headers))
        except BrokerError as err:
            self.refuse(err.status, "ModelConfigError", err.message)
            return
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(self.broker.kernel_environ(None, model=self.ci.model)))


class ModelCodeMarkHandler(_KernelRoute):
    """POST, with a kernel's credential: model-written code is about to run in that kernel."""

    def initialize(self, broker: Broker) -> None:
        """Keep the broker (its credentials, and its registry of marked kernels)."""
        self.broker = broker

    def post(self) -> None:
        """Mark the credential's kernel (model_code.py): 204, else 403."""
        try:
            kernel_id = self.broker.authenticate(presented_token(self.request.headers))
        except BrokerError as err:
            self.refuse(err.status, "ModelConfigError", err.message)
            return
        self.broker.model_code.mark(kernel_id)
        self.set_status(204)
        self.finish()


@web.stream_request_body
class TurnHandler(_KernelRoute):
    """POST one turn (turn_wire.py) and stream its events back as JSON lines."""

    def initialize(self, service: ModelService, log: Logger, max_body: int,
                   max_reply_tokens: int, gate: Gate | None = None) -> None:
        """Keep the service, the server's logger, the body cap, the reply token cap and the
        gate that names a request's budget holder (a kernel's credential unless given)."""
        self.service = service
        self.gate = gate or CredentialGate(service.broker)
        self.log = log
        self.max_body = max_body
        self.max_reply_tokens = max_reply_tokens
        self.holder = ""
        self._body = bytearray()
        self._refused = False
        self._task: asyncio.Future[Any] | None = None
        # Text reaches the kernel as it streams, one write per turn of the loop at most: as
        # the loop gets busier, each write carries more.
        self._writer = StreamWriter[Mapping[str, Any]](self, JsonLines(), on_lost=self._stop)

    async def prepare(self) -> None:
        """Admit the request on its credential and length, or answer why not."""
        try:
            self.holder = await self.gate.holder(self.request)
            declared = self.request.headers.get("Content-Length", "0")
            if not declared.isdigit() or int(declared) > self.max_body:
                raise BodyTooLarge(self._too_large())
        except BrokerError as err:
            self._refused = True
            self.refuse(err.status, "ModelConfigError" if err.status == 403 else
                        "ModelUnavailable", err.message)

    def data_received(self, chunk: bytes) -> None:
        """Collect the body of an admitted request, up to the cap (chunked bodies too)."""
        if self._refused:
            return
        self._body += chunk
        if len(self._body) > self.max_body:
            self._body.clear()
            self._refused = True
            self.refuse(413, "ModelUnavailable", self._too_large())
            if isinstance(self.request.connection, HTTP1Connection):
                self.request.connection.close()  # stop reading the rest

    async def post(self) -> None:
        """Stream the turn; a hang-up cancels it (and with it the provider's stream)."""
        if self._refused:
            return
        try:
            turn = read_turn(parse_json(bytes(self._body)), TOOLS, self.max_reply_tokens)
        except (BadJSON, WireError) as err:
            self.refuse(400, "ModelConfigError", f"The turn is not one the model service "
                        f"takes: {err}", "Update jupyter-ci in the kernel to the server's version.")
            return
        self._body.clear()
        self._task = asyncio.ensure_future(self.service.turn(self.holder, turn,
                                                             self._writer.send))
        try:
            reply = await self._task
        except asyncio.CancelledError:
            if not self._writer.lost:
                raise
            self.log.info("jupyter-ci: a kernel hung up on its %r turn; the call was stopped",
                          turn.model)
            return
        except AskError as err:
            if not self._writer.started:
                self.refuse(_STATUS.get(type(err), 502), error_json(err)["type"], err.message,
                            err.hint)
                return
            self._writer.end({"error": error_json(err)})
        else:
            self._writer.end({"reply": reply_json(reply)})

    def on_connection_close(self) -> None:
        """Stop the provider's stream when the kernel hangs up (or is interrupted)."""
        super().on_connection_close()
        self._writer.hang_up()

    def _stop(self) -> None:
        """Cancel the turn of a kernel that hung up."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def _too_large(self) -> str:
        """Say that the body is over the cap, and which setting sets it."""
        return (f"The turn's body is larger than the jupyter-ci model service takes "
                f"(c.JupyterCI.broker_max_body_bytes = {self.max_body} bytes).")


def service_routes(ci: JupyterCI, service: ModelService, log: Logger
                   ) -> list[tuple[str, type[web.RequestHandler], dict[str, object]]]:
    """Return the kernels' routes (also served on the private socket of sandboxed kernels)."""
    return [
        (rf"/{BROKER_ROUTE}/{INFO_PATH}", InfoHandler, {"ci": ci, "broker": service.broker}),
        (rf"/{BROKER_ROUTE}/{MODEL_CODE_PATH}", ModelCodeMarkHandler, {"broker": service.broker}),
        (rf"/{BROKER_ROUTE}/{TURN_PATH}", TurnHandler,
         {"service": service, "log": log, "max_body": ci.broker_max_body_bytes,
          "max_reply_tokens": ci.max_reply_tokens}),
    ]
