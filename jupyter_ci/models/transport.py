"""The HTTP client an SDK needs for an endpoint its own default client cannot reach.

Current `openai` and `anthropic` SDKs are built on `httpx2`, older ones on `httpx`; their
`http_client=` takes a client of that package only (`anthropic` refuses `httpx` objects).
Each SDK's `DefaultHttpxClient` is a subclass of that client with the SDK's own defaults
(timeout, connection limits, redirects), so clients are built from it with only the
transport replaced, taken from the package the class is built on. That package is
imported only when such a client is made.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from jupyter_ci.models.base import Endpoint

if TYPE_CHECKING:
    import httpx2

_HTTP_PACKAGES = ("httpx2", "httpx")


def http_client(endpoint: Endpoint, client_class: type[httpx2.Client]) -> httpx2.Client | None:
    """Return the SDK's client class built for `endpoint`, or None when its default fits."""
    if not endpoint.socket:
        return None
    # A server started with --sock: connect through its Unix socket; the base URL still
    # gives the path and Host header. A given transport also keeps environment proxies out.
    transport = _http_package(client_class).HTTPTransport(uds=endpoint.socket)
    return client_class(transport=transport)


def _http_package(client_class: type[object]) -> ModuleType:
    """Return the package (httpx2 or httpx) whose Client `client_class` extends."""
    for cls in client_class.__mro__:
        package = cls.__module__.partition(".")[0]
        if package in _HTTP_PACKAGES:
            return importlib.import_module(package)
    raise TypeError(f"{client_class.__qualname__} is not an httpx2 or httpx client class")
