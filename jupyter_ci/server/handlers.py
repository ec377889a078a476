"""HTTP handlers: the panel's config route and the key broker (route table at the bottom)."""

from __future__ import annotations

import asyncio
import json
from logging import Logger
from typing import TYPE_CHECKING, Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web
from tornado.http1connection import HTTP1Connection

from jupyter_ci import providers
from jupyter_ci.config import JupyterCI
from jupyter_ci.server.broker import (
    BROKER_ROUTE,
    BadBrokerToken,
    BadRequest,
    Broker,
    BrokerError,
    NoProviderKey,
    UnknownProvider,
    presented_token,
)
from jupyter_ci.server.panel import panel_config
from jupyter_ci.server.relay import relay

if TYPE_CHECKING:
    import httpx

# Error types in the providers' own vocabulary, so the SDKs raise the matching exception.
_ERROR_TYPES: dict[type[BrokerError], str] = {
    BadRequest: "invalid_request_error",
    BadBrokerToken: "permission_error",
    NoProviderKey: "authentication_error",
    UnknownProvider: "not_found_error",
}


def error_reply(provider: str, err: BrokerError) -> tuple[int, dict[str, Any]]:
    """Map a broker failure to its HTTP status and a body in the provider's error format."""
    kind = _ERROR_TYPES.get(type(err), "api_error")
    spec = providers.get(provider)
    if spec is not None and spec.error_format == "anthropic":
        return err.status, {"type": "error", "error": {"type": kind, "message": err.message}}
    error = {"message": err.message, "type": kind, "param": None, "code": "jupyter_ci_broker"}
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


class BrokerHandler(web.RequestHandler):
    """Forward a kernel's SDK request to its provider with the real key, streaming back.

    Authenticated only by the broker token, never by Jupyter's token or cookies.
    """

    SUPPORTED_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")

    def initialize(self, broker: Broker, client: httpx.AsyncClient, log: Logger) -> None:
        """Keep the broker, the upstream client and the server's logger."""
        self.broker = broker
        self.client = client
        self.log = log
        self._started = False
        self._gone = False
        self._task: asyncio.Future[None] | None = None

    def check_xsrf_cookie(self) -> None:
        """Skip XSRF: the broker never reads cookies, so a forged request has no credential."""

    async def get(self, provider: str, path: str) -> None:
        """Forward a GET (e.g. listing models)."""
        await self._forward(provider, path)

    async def post(self, provider: str, path: str) -> None:
        """Forward a POST (chat completions, messages)."""
        await self._forward(provider, path)

    async def put(self, provider: str, path: str) -> None:
        """Forward a PUT."""
        await self._forward(provider, path)

    async def patch(self, provider: str, path: str) -> None:
        """Forward a PATCH."""
        await self._forward(provider, path)

    async def delete(self, provider: str, path: str) -> None:
        """Forward a DELETE."""
        await self._forward(provider, path)

    async def _forward(self, provider: str, path: str) -> None:
        """Authenticate, build the upstream request, relay it; answer failures as JSON."""
        request = self.request
        try:
            self.broker.authenticate(presented_token(request.headers))
            out = self.broker.outgoing(
                provider, path, request.query, request.method or "GET", request.headers,
                request.body,
            )
            # A task of its own, so a kernel that hangs up cancels the upstream request.
            self._task = asyncio.ensure_future(relay(self.client, out, self))
            await self._task
            self.log.debug("jupyter-ci broker: %s %s/%s", request.method, provider, path)
        except BrokerError as err:
            self._fail(provider, err)
        except asyncio.CancelledError:
            if not self._gone:
                raise
            self.log.info("jupyter-ci broker: kernel closed %s/%s early", provider, path)

    def _fail(self, provider: str, err: BrokerError) -> None:
        """Answer a failure, or cut the stream if the upstream status was already sent."""
        self.log.warning("jupyter-ci broker: %s/%s: %s", provider, self.path_args[-1], err)
        if self._started:
            # Too late for a status: closing makes the SDK see a broken stream, not success.
            if isinstance(self.request.connection, HTTP1Connection):
                self.request.connection.close()
            return
        status, body = error_reply(provider, err)
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
        self._gone = True
        if self._task is not None:
            self._task.cancel()


def routes(
    ci: JupyterCI, broker: Broker, client: httpx.AsyncClient, log: Logger
) -> list[tuple[str, type[web.RequestHandler], dict[str, Any]]]:
    """Return the extension's routes, relative to the server's base_url."""
    return [
        (r"/jupyter-ci/config", ConfigHandler, {"ci": ci, "broker": broker}),
        (rf"/{BROKER_ROUTE}/([^/]+)/(.*)", BrokerHandler,
         {"broker": broker, "client": client, "log": log}),
    ]
