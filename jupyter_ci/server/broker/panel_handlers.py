"""HTTP handlers of the JupyterLab panel: its config, and the keys pasted in it."""

from __future__ import annotations

import json
from collections.abc import Callable
from logging import Logger
from typing import TYPE_CHECKING

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from jupyter_ci.config import JupyterCI
from jupyter_ci.server.broker.broker import Broker
from jupyter_ci.server.broker.errors import BadRequest
from jupyter_ci.server.broker.panel import panel_config
from jupyter_ci.server.broker.pasted_keys import KEYS_BODY, accept_key, remove_key
from jupyter_ci.server.jsonbody import BadJSON, parse_json

if TYPE_CHECKING:
    import httpx


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
    """POST a key (and base URL) pasted in the panel, or DELETE one; no reply holds a key."""

    auth_resource = "jupyter_ci"

    def initialize(self, ci: JupyterCI, broker: Broker, client: httpx.AsyncClient, log: Logger,
                   publish: Callable[[], None]) -> None:
        """Keep the settings, the broker that will hold the key, its client, the publisher."""
        self.ci = ci
        self.broker = broker
        self.client = client
        self.logger = log
        self.publish = publish

    def _held_elsewhere(self) -> bool:
        """Refuse keys on a server that holds none (the Hub's service holds them)."""
        if not self.broker.elsewhere:
            return False
        self.set_status(409)
        self.finish(json.dumps({"message": f"This server holds no model keys: "
                                f"{self.broker.elsewhere} holds them for everyone. Ask your "
                                "JupyterHub admin to add or change one."}))
        return True

    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Check the key with its provider, hold it (pasted_keys.py); answer the panel config."""
        if self._held_elsewhere():
            return
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

    @web.authenticated
    @authorized
    def delete(self) -> None:
        """Forget the key and URL of `?provider=`; answer the panel config."""
        if self._held_elsewhere():
            return
        try:
            reply = remove_key(self.get_query_argument("provider", ""), self.ci, self.broker,
                               self.logger)
        except BadRequest as err:
            self._refuse(str(err))
            return
        self.publish()
        self.finish(json.dumps(reply))

    def _refuse(self, message: str) -> None:
        self.set_status(400)
        self.finish(json.dumps({"message": message}))

