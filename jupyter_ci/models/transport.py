"""The SDK adapters' offline rehearsal: a canned turn through a mock transport.

Current `openai` and `anthropic` SDKs are built on `httpx2`, older ones on `httpx`; their
`http_client=` takes a client of that package only (`anthropic` refuses `httpx` objects).
Each SDK's `DefaultHttpxClient` is a subclass of that client with the SDK's own defaults
(timeout, connection limits, redirects), so the rehearsal's client is built from it with
only the transport replaced, taken from the package the class is built on.
"""

from __future__ import annotations

import importlib
import json
from types import ModuleType
from typing import TYPE_CHECKING

from jupyter_ci.agent.types import Message, ModelRequest, ToolSpec

if TYPE_CHECKING:
    import httpx2

_HTTP_PACKAGES = ("httpx2", "httpx")
#: Where a rehearsal "sends" its request: never resolved, the mock transport answers.
REHEARSAL_URL = "http://rehearsal.invalid"
#: The turn a rehearsal streams: one tool and one message, like a real ask's first call.
REHEARSAL_REQUEST = ModelRequest(
    system="rehearsal", messages=(Message("user", "rehearsal"),), max_tokens=16,
    tools=(ToolSpec("run_python", "rehearsal", {"type": "object", "properties": {}}),),
)


def rehearsal_client(client_class: type[httpx2.Client], stream: bytes) -> httpx2.Client:
    """Return the SDK's client class answering every request with `stream`, offline."""
    package = _http_package(client_class)

    def answer(request: httpx2.Request) -> httpx2.Response:
        response: httpx2.Response = package.Response(
            200, headers={"content-type": "text/event-stream"}, content=stream)
        return response

    # A given transport keeps environment proxies out too: nothing leaves the process.
    return client_class(transport=package.MockTransport(answer))


def sse_body(*events: tuple[str | None, object]) -> bytes:
    """Encode (event name or None, data) pairs as server-sent events; data not str is JSON."""
    return "".join((f"event: {name}\n" if name else "")
                   + f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
                   for name, data in events).encode()


def _http_package(client_class: type[object]) -> ModuleType:
    """Return the package (httpx2 or httpx) whose Client `client_class` extends."""
    for cls in client_class.__mro__:
        package = cls.__module__.partition(".")[0]
        if package in _HTTP_PACKAGES:
            return importlib.import_module(package)
    raise TypeError(f"{client_class.__qualname__} is not an httpx2 or httpx client class")
