"""GET /jupyter-ci/spending on a user's server: their spending as the Hub service keeps it.

The panel's one route to the Hub service: the server asks it as its user (its own Hub
token) and answers the user's `UserSpending` (wire/hub.py). Only whoever may use this server
reaches it (Jupyter's auth, `read` on jupyter_ci), and the service answers each token's
owner only with their own: one user cannot see another's spending through it.
"""

from __future__ import annotations

import json

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from jupyter_ci.server.broker.hub_http import HopError
from jupyter_ci.server.broker.hub_link import HubUpstream
from jupyter_ci.wire.codec import WireError, decode, encode
from jupyter_ci.wire.hub import SPENDING_PATH, UserSpending


class SpendingHandler(APIHandler):
    """GET the user's spending today and this month, with their budgets."""

    auth_resource = "jupyter_ci"

    def initialize(self, hub: HubUpstream | None) -> None:
        """Keep the link to the Hub service (None: this server is not under one)."""
        self.hub = hub

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """Answer the Hub service's UserSpending for this server's user."""
        if self.hub is None:
            self._say(404, "This server keeps no spending: it is not under a JupyterHub with "
                      "the jupyter-ci service (see docs/hub.md).")
            return
        try:
            async with self.hub.client.request("GET", SPENDING_PATH,
                                               self.hub.link.headers()) as reply:
                status, data = reply.status, json.loads(await reply.read())
        except (OSError, ValueError, HopError, TimeoutError) as err:  # told by class only
            self._say(502, f"The JupyterHub's jupyter-ci service did not answer "
                      f"({type(err).__name__}).")
            return
        if status != 200:
            said = data.get("message") if isinstance(data, dict) else None
            self._say(502, f"The JupyterHub's jupyter-ci service answered HTTP {status}: "
                      f"{str(said or '')[:300]}")
            return
        try:
            spending = decode(UserSpending, data, lenient=True)
        except WireError as err:
            self._say(502, f"The JupyterHub's jupyter-ci service sent spending this server "
                      f"cannot read ({err}).")
            return
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(encode(spending)))

    def _say(self, status: int, message: str) -> None:
        self.set_status(status)
        self.finish(json.dumps({"message": message}))
