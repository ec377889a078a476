"""The jupyter-ci JupyterHub service: the process the Hub starts (`python -m jupyter_ci.hub`).

It holds the provider keys (its environment, or a key file only the Hub's user reads) and
serves users' servers the model service's turn (the same route, stream and errors as a
single server's: server/broker/service_handlers.TurnHandler over the same ModelService),
charged to the user whose JupyterHub token the request carries, by the admin's policy, and
recorded in the spending database. The Hub tells it where to listen and who it is
(JUPYTERHUB_SERVICE_URL, _PREFIX, _API_TOKEN, _API_URL, _OAUTH_*); deploy.configure writes
the rest into its environment (settings.py).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import secrets
import signal
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from tornado import web
from tornado.httpserver import HTTPServer

from jupyter_ci.agent.cost import price_table
from jupyter_ci.hub.auth import Directory, HubGate, hub_client
from jupyter_ci.hub.handlers import (
    AdminPageHandler,
    AdminSpendingHandler,
    PolicyHandler,
    SpendingHandler,
)
from jupyter_ci.hub.meter import HubMeter
from jupyter_ci.hub.settings import HubSettings
from jupyter_ci.hub.store import Store
from jupyter_ci.models.base import UrlSetting
from jupyter_ci.models.turn_wire import TURN_PATH
from jupyter_ci.server.broker.broker import Broker
from jupyter_ci.server.broker.keys import stored_keys
from jupyter_ci.server.broker.model_service import ModelService
from jupyter_ci.server.broker.service_handlers import TurnHandler
from jupyter_ci.server.hardening import make_non_dumpable
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.hub import ADMIN_PATH, ADMIN_SPENDING_PATH, POLICY_PATH, SPENDING_PATH

LOG = logging.getLogger("jupyter_ci.hub")
#: Where the service's providers are set, as their errors say it to users.
HELD = UrlSetting("set in the JupyterHub's jupyter-ci service", "ask your JupyterHub admin")


@dataclass
class HubService:
    """The service's parts, for its routes and its stop."""

    settings: HubSettings
    service: ModelService
    meter: HubMeter
    gate: HubGate

    def routes(self) -> list[tuple[str, type[web.RequestHandler], dict[str, object]]]:
        """Return the service's routes below its prefix."""
        prefix = self.settings.prefix
        served = tuple(p.name for p in self.service.broker.configured())
        reads = {"gate": self.gate, "providers": served, "prices": self.settings.prices}
        from jupyterhub.services.auth import HubOAuthCallbackHandler

        return [
            (f"{prefix}{TURN_PATH}", TurnHandler, {
                "service": self.service, "log": LOG, "gate": self.gate,
                "max_body": self.settings.max_body_bytes,
                "max_reply_tokens": self.settings.max_reply_tokens}),
            (f"{prefix}{POLICY_PATH}", PolicyHandler, reads),
            (f"{prefix}{SPENDING_PATH}", SpendingHandler, reads),
            (f"{prefix}{ADMIN_SPENDING_PATH}", AdminSpendingHandler, reads),
            (f"{prefix}{ADMIN_PATH}", AdminPageHandler, reads),
            (f"{prefix}oauth_callback", HubOAuthCallbackHandler, {}),
        ]


def build(settings: HubSettings) -> HubService:
    """Take the keys, open the database, and put the service together."""
    from jupyterhub.services.auth import HubOAuth

    stored = stored_keys(settings.key_file, os.environ, LOG)
    broker = Broker.take_from_environ(os.environ, stored, settings.key_file)
    for problem in broker.misconfigured():
        LOG.warning("jupyter-ci: %s", problem)
    # A provider's failure tells users where its URL is set: here, not their server.
    for name, provider in broker.providers.items():
        broker.providers[name] = replace(provider, url_setting=HELD)
    meter = HubMeter(settings.policy, Store.open(settings.db_url), LOG,
                     served=frozenset(p.name for p in broker.configured()))
    service = ModelService(broker, settings.request_timeout, settings.retries,
                           settings.max_reply_tokens, LOG, settings.policy.default.model or "",
                           price_table({k: encode(v) for k, v in settings.prices.items()}),
                           custom_meter=meter)
    auth = HubOAuth(cache_max_age=60)
    return HubService(settings, service, meter,
                      HubGate(auth, Directory(auth, hub_client(auth), settings.users_ttl),
                              meter))


async def serve(settings: HubSettings) -> None:
    """Serve until SIGTERM or SIGINT, then finish the database's writes."""
    hub = build(settings)
    app = web.Application(hub.routes(), cookie_secret=secrets.token_bytes(32),
                          xsrf_cookies=False, log_function=_quiet)
    where = urlsplit(settings.url)
    server = HTTPServer(app, xheaders=True)
    server.listen(where.port or 80, listen_ip(where.hostname or "127.0.0.1"))
    names = ", ".join(p.name for p in hub.service.broker.configured()) or "none"
    LOG.info("jupyter-ci Hub service on %s%s, provider keys held: %s", settings.url,
             settings.prefix, names)
    await hub.service.warm()
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    await stopping.wait()
    server.stop()
    hub.meter.stop()
    LOG.info("jupyter-ci Hub service stopped")


def listen_ip(host: str) -> str:
    """Listen on the URL's address, or on every address for a name (`hub` in a pod: the
    name of a Kubernetes Service, which no interface of the pod holds)."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return "127.0.0.1" if host == "localhost" else ""
    return host.strip("[]")


def _quiet(handler: web.RequestHandler) -> None:
    """Log requests that failed; the turns themselves are too many to log each."""
    status = handler.get_status()
    if status >= 400:
        LOG.warning("%d %s %s", status, handler.request.method, handler.request.path)


def main() -> None:
    """Run the service as the Hub starts it."""
    logging.basicConfig(level=logging.INFO, format="[%(levelname)1.1s %(asctime)s jupyter-ci] "
                        "%(message)s")
    make_non_dumpable(LOG)
    asyncio.run(serve(HubSettings.from_environ(os.environ)))
