"""The routes of the broker: the panel's config and keys, and the kernels' model service."""

from __future__ import annotations

from collections.abc import Callable
from logging import Logger
from typing import TYPE_CHECKING

from tornado import web

from jupyter_ci.config import JupyterCI
from jupyter_ci.server.broker.hub_handlers import SpendingHandler
from jupyter_ci.server.broker.hub_link import HubUpstream
from jupyter_ci.server.broker.model_code import PAGE_ROUTE, ModelCodeHandler
from jupyter_ci.server.broker.model_service import ModelService
from jupyter_ci.server.broker.panel_handlers import ConfigHandler, KeysHandler
from jupyter_ci.server.broker.service_handlers import service_routes

if TYPE_CHECKING:
    import httpx


def routes(ci: JupyterCI, service: ModelService, client: httpx.AsyncClient, log: Logger,
           publish: Callable[[], None]
           ) -> list[tuple[str, type[web.RequestHandler], dict[str, object]]]:
    """Return the broker's routes; `publish` tells new kernels what a pasted key changed."""
    broker = service.broker
    hub = service.upstream if isinstance(service.upstream, HubUpstream) else None
    return [
        (r"/jupyter-ci/config", ConfigHandler, {"ci": ci, "broker": broker}),
        (r"/jupyter-ci/keys", KeysHandler,
         {"ci": ci, "broker": broker, "client": client, "log": log, "publish": publish}),
        (PAGE_ROUTE, ModelCodeHandler, {"kernels": broker.model_code}),
        (r"/jupyter-ci/spending", SpendingHandler, {"hub": hub}),
        *service_routes(ci, service, log),
    ]
