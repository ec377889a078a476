"""HTTP handlers: the panel's config route and the key broker; the route table of all routes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from logging import Logger
from typing import TYPE_CHECKING, Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web
from tornado.http1connection import HTTP1Connection

from jupyter_ci import providers
from jupyter_ci.config import JupyterCI
from jupyter_ci.server import session_handlers as s
from jupyter_ci.server.allowlist import split_provider
from jupyter_ci.server.broker import BROKER_ROUTE, Admitted, Broker, presented_token
from jupyter_ci.server.errors import BadRequest, BodyTooLarge, BrokerError
from jupyter_ci.server.jsonbody import BadJSON, parse_json
from jupyter_ci.server.panel import panel_config
from jupyter_ci.server.pasted_keys import KEYS_BODY, accept_key
from jupyter_ci.server.relay import relay
from jupyter_ci.server.session_file_handler import FileHandler
from jupyter_ci.server.sessions import SessionManager
from jupyter_ci.server.usage import UsageMeter

if TYPE_CHECKING:
    import httpx


def error_reply(provider: str, err: BrokerError) -> tuple[int, dict[str, Any]]:
    """Map a broker failure to its HTTP status and a body in the provider's error format."""
    # err.kind is in the providers' own vocabulary, so the SDKs raise the matching error.
    spec = providers.get(provider)
    if spec is not None and spec.error_format == "anthropic":
        return err.status, {"type": "error", "error": {"type": err.kind, "message": err.message}}
    error = {"message": err.message, "type": err.kind, "param": None,
             "code": "jupyter_ci_broker"}
    return err.status, {"error": error}


class ConfigHandler(APIHandler):
    """GET the models the panel offers, the default model and what is missing."""

    auth_resource = "jupyter_ci"

    def initialize(self, ci: JupyterCI, broker: Broker) -> None:
        """Keep the shared settings and the broker (for which providers are configured)."""
        self.ci = ci
        self.broker = broker

    @web.authenticated
    @authorized
    def get(self) -> None:
        """Answer with the panel configuration; it never contains a key."""
        reply = panel_config(self.ci.model, self.ci.models, self.broker.configured())
        self.finish(json.dumps(reply.to_json()))


class KeysHandler(APIHandler):
    """POST a provider key (and base URL) pasted in the panel; the reply never holds it."""

    auth_resource = "jupyter_ci"

    def initialize(self, ci: JupyterCI, broker: Broker, client: httpx.AsyncClient, log: Logger,
                   publish: Callable[[], None]) -> None:
        """Keep the settings, the broker that will hold the key, its client, the publisher."""
        self.ci = ci
        self.broker = broker
        self.client = client
        self.logger = log
        self.publish = publish

    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Check the key with its provider, hold it (pasted_keys.py); answer the panel config."""
        try:
            body = parse_json(self.request.body or b"{}")
            reply = await accept_key(body, self.ci, self.broker, self.client, self.logger)
        except BadJSON as err:
            self._refuse(f"The body is {err}. {KEYS_BODY}")
            return
        except BadRequest as err:
            self._refuse(str(err))
            return
        # New kernels learn the provider from their environment; running ones ask the broker.
        self.publish()
        self.finish(json.dumps(reply))

    def _refuse(self, message: str) -> None:
        self.set_status(400)
        self.finish(json.dumps({"message": message}))


class BrokerInfoHandler(web.RequestHandler):
    """GET, with a kernel's broker token: the providers and model the broker serves now.

    A kernel reads them from its environment at start; one started before a key was
    pasted in the panel asks here instead. No key, URL or token is in the answer.
    """

    def initialize(self, ci: JupyterCI, broker: Broker) -> None:
        """Keep the settings and the broker."""
        self.ci = ci
        self.broker = broker

    def check_xsrf_cookie(self) -> None:
        """Kernels send no cookies: the broker token is the credential."""

    def get(self) -> None:
        """Answer {providers, hosts, model} to a live kernel token, else 403."""
        self.set_header("Content-Type", "application/json")
        try:
            self.broker.authenticate(presented_token(self.request.headers))
        except BrokerError as err:
            self.set_status(err.status)
            self.finish(json.dumps({"message": str(err)}))
            return
        env = self.broker.kernel_environ(None, model=self.ci.model)
        self.finish(json.dumps(env))


@web.stream_request_body
class BrokerHandler(web.RequestHandler):
    """Forward a kernel's SDK request to its provider with the real key, streaming back.

    Authenticated only by the kernel's broker token, never by Jupyter's token or cookies,
    and judged on its headers in prepare(), before a byte of its body is read.
    """

    # Every method reaches prepare(), which answers those no route allows, in JSON.
    SUPPORTED_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")

    def initialize(
        self, broker: Broker, client: httpx.AsyncClient, log: Logger, max_body: int
    ) -> None:
        """Keep the broker, the upstream client, the server's logger and the body cap."""
        self.broker = broker
        self.client = client
        self.log = log
        self.max_body = max_body
        self._provider = self._raw_path = ""
        self._call: Admitted | None = None
        self._body = bytearray()
        self._started = False
        self._gone = False
        self._task: asyncio.Future[None] | None = None

    def check_xsrf_cookie(self) -> None:
        """Skip XSRF: the broker never reads cookies, so a forged request has no credential."""

    def prepare(self) -> None:
        """Admit the request on its token, route, budget and length, or answer why not."""
        self._raw_path = _below_broker(self.request.path, self.settings.get("base_url", "/"))
        self._provider, path = split_provider(self._raw_path)
        try:
            self._call = self.broker.admit(self._provider, path, self.request.method or "",
                                           self.request.headers)
            declared = self.request.headers.get("Content-Length", "0")
            if not declared.isdigit() or int(declared) > self.max_body:
                raise BodyTooLarge(self._too_large())
        except BrokerError as err:
            self._fail(err)

    def data_received(self, chunk: bytes) -> None:
        """Collect the body of an admitted request, up to the cap (chunked bodies too)."""
        self._body += chunk
        if len(self._body) > self.max_body:
            self._body.clear()
            self._fail(BodyTooLarge(self._too_large()))

    async def get(self) -> None:
        """Forward an admitted GET (listing models)."""
        await self._forward()

    async def post(self) -> None:
        """Forward an admitted POST (chat completions, messages)."""
        await self._forward()

    async def put(self) -> None:
        """Forward a PUT, should a provider's routes allow one."""
        await self._forward()

    async def patch(self) -> None:
        """Forward a PATCH, should a provider's routes allow one."""
        await self._forward()

    async def delete(self) -> None:
        """Forward a DELETE, should a provider's routes allow one."""
        await self._forward()

    async def _forward(self) -> None:
        """Relay the admitted request; count the tokens its reply reports."""
        call, meter = self._call, UsageMeter()
        assert call is not None, "prepare() answered every request it did not admit"
        body = bytes(self._body)
        try:
            out = self.broker.outgoing(call, self.request.query, body)
            # A task of its own, so a kernel that hangs up cancels the upstream request.
            self._task = asyncio.ensure_future(relay(self.client, out, self, meter))
            await self._task
            self.log.debug("jupyter-ci broker: %s %r", call.method, self._raw_path)
        except BrokerError as err:
            self._fail(err)
        except asyncio.CancelledError:
            if not self._gone:
                raise
            self.log.info("jupyter-ci broker: kernel closed %r early", self._raw_path)
        finally:
            self.broker.charge(call.kernel_id, meter.finish(len(body)))

    def _too_large(self) -> str:
        """Say that the body is over the cap, and which setting sets it."""
        return (f"The request body is larger than the jupyter-ci broker takes "
                f"(c.JupyterCI.broker_max_body_bytes = {self.max_body} bytes).")

    def _fail(self, err: BrokerError) -> None:
        """Answer a failure, or cut the stream if the upstream status was already sent."""
        # %r: the path comes from the kernel; a decoded line break must not forge a log line.
        self.log.warning("jupyter-ci broker: %s %r: %s", self.request.method, self._raw_path,
                         err.message)
        if self._started:
            # Too late for a status: closing makes the SDK see a broken stream, not success.
            if isinstance(self.request.connection, HTTP1Connection):
                self.request.connection.close()
            return
        if err.final:
            self.set_header("x-should-retry", "false")  # the SDKs' retry hint
        self._reply_json(*error_reply(self._provider, err))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Answer tornado's own errors (bad method, malformed request, a bug) in JSON too."""
        err = BrokerError(f"The jupyter-ci broker cannot handle this request (HTTP "
                          f"{status_code} {self._reason}); the server log may say more.")
        err.status = status_code
        self._reply_json(*error_reply(self._provider, err))

    def _reply_json(self, status: int, body: dict[str, Any]) -> None:
        """Finish with a JSON error body."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(body))

    def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        """Take over the upstream status and the headers the SDKs read."""
        self._started = True
        self.set_status(status)
        self.clear_header("Content-Type")
        for name, value in headers:
            self.add_header(name, value)

    async def send(self, chunk: bytes) -> None:
        """Write one upstream chunk and flush it now, so streamed events arrive live."""
        self.write(chunk)
        await self.flush()

    def on_connection_close(self) -> None:
        """Stop the upstream request when the kernel hangs up."""
        super().on_connection_close()
        self._gone = True
        if self._task is not None:
            self._task.cancel()


def _below_broker(path: str, base_url: str) -> str:
    """Return the still percent-encoded part of a request path after the broker route."""
    prefix = f"{base_url.rstrip('/')}/{BROKER_ROUTE}"
    if path.startswith(prefix):
        return path[len(prefix):]
    # A base_url that the client percent-encoded differently: find the route itself.
    found = path.find(f"/{BROKER_ROUTE}")
    return path[found + len(BROKER_ROUTE) + 1:] if found >= 0 else ""


def broker_routes(ci: JupyterCI, broker: Broker, client: httpx.AsyncClient, log: Logger
                  ) -> list[tuple[str, type[web.RequestHandler], dict[str, Any]]]:
    """Return the broker's routes (also served on the private socket of sandboxed kernels)."""
    return [
        # Before the broker's catch-all route: the first match wins.
        (rf"/{BROKER_ROUTE}/_info", BrokerInfoHandler, {"ci": ci, "broker": broker}),
        # Everything below the broker route, so even paths no route allows answer in JSON.
        (rf"/{BROKER_ROUTE}(?:/.*)?", BrokerHandler,
         {"broker": broker, "client": client, "log": log, "max_body": ci.broker_max_body_bytes}),
    ]


def routes(
    ci: JupyterCI, broker: Broker, client: httpx.AsyncClient, log: Logger,
    sessions: SessionManager, publish: Callable[[], None],
) -> list[tuple[str, type[web.RequestHandler], dict[str, Any]]]:
    """Return the extension's routes, relative to the server's base_url."""
    session = {"manager": sessions, "ci": ci}
    base, sid = "/jupyter-ci/sessions", s.SID
    return [
        (r"/jupyter-ci/config", ConfigHandler, {"ci": ci, "broker": broker}),
        (r"/jupyter-ci/keys", KeysHandler,
         {"ci": ci, "broker": broker, "client": client, "log": log, "publish": publish}),
        *broker_routes(ci, broker, client, log),
        (r"/jupyter-ci/openapi.json", s.OpenAPIHandler, session),
        (base, s.SessionsHandler, session),
        (rf"{base}/{sid}", s.SessionHandler, session),
        (rf"{base}/{sid}/restart", s.RestartHandler, session),
        (rf"{base}/{sid}/execute", s.ExecuteHandler, session),
        (rf"{base}/{sid}/ask", s.AskHandler, session),
        (rf"{base}/{sid}/notebook", s.NotebookHandler, session),
        (rf"{base}/{sid}/files", s.FilesHandler, session),
        (rf"{base}/{sid}/files/(?P<path>.+)", FileHandler, session),
    ]
