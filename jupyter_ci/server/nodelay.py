"""Kernel messages on websockets without Nagle's algorithm's 40 ms wait.

Jupyter Server's kernel websocket handler (and Kernel Gateway's, the same class) leaves its
socket with Nagle's algorithm on: tornado turns TCP_NODELAY off again once the upgrade's
response is written. An execute sends several small messages in a row (status, input, result,
reply); the second waits until the peer acknowledges the first, and a peer that has nothing
to send back delays that acknowledgement by 40 ms (Linux's delayed ACK). Every execute over
a kernel websocket then took ~40 ms longer than over ZMQ (issue 24; reported upstream).

Where we own the handler's connection (this server's kernel websockets, the browser's and
other clients'), it gets TCP_NODELAY, as tornado's own docs advise for latency. Where the
slow end is a gateway we do not run, the clients this server opens to it acknowledge each
message at once (TCP_QUICKACK, Linux), which releases the gateway's next message as soon
as the first arrives; a gateway can also take the fixed class itself:
`--KernelGatewayApp.kernel_websocket_connection_class=
jupyter_ci.server.nodelay.NoDelayZMQChannelsWebsocketConnection`.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import MutableMapping
from typing import Any

from jupyter_server.gateway.connections import GatewayWebSocketConnection
from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection
from traitlets import Bool
from traitlets.config import Configurable

#: Linux's; elsewhere (macOS, Windows) the quick acknowledgements are left out.
_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


def quick_ack(sock: socket.socket | None) -> None:
    """Acknowledge what a socket has received now, not after the 40 ms delayed-ACK timer.

    Linux resets the flag as it sees fit, so a reader sets it again after each message.
    """
    if _QUICKACK is not None and sock is not None:
        with contextlib.suppress(OSError):  # closed under us: nothing left to acknowledge
            sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)


class _NoDelay:
    """Mixin for a kernel websocket connection: the handler's socket without Nagle."""

    websocket_handler: Any

    def connect(self) -> Any:
        """Turn Nagle off on the websocket to the client, then connect as the base does."""
        # The handler's websocket is open here (connect runs from its open()); one closed
        # already has no socket, and nothing to speed up. Not async: ZMQ's connect returns
        # a future and the gateway's a coroutine; the handler awaits either.
        with contextlib.suppress(AssertionError, AttributeError):
            self.websocket_handler.set_nodelay(True)
        return super().connect()  # type: ignore[misc]


class NoDelayZMQChannelsWebsocketConnection(_NoDelay, ZMQChannelsWebsocketConnection):
    """Jupyter Server's ZMQ kernel websocket connection, messages sent at once."""


class _GatewayNoDelay(_NoDelay):
    """Mixin for a gateway's kernel websocket connection: both of its legs without waits."""

    ws: Any

    def _connection_done(self, fut: Any) -> None:
        super()._connection_done(fut)  # type: ignore[misc]
        if self.ws is not None:
            with contextlib.suppress(AttributeError):  # closed already
                self.ws.protocol.stream.set_nodelay(True)

    def handle_outgoing_message(self, incoming_msg: str, *args: Any) -> None:
        """Acknowledge the gateway's message at once, then pass it to the client."""
        if self.ws is not None:
            stream = getattr(getattr(self.ws, "protocol", None), "stream", None)
            quick_ack(getattr(stream, "socket", None))
        super().handle_outgoing_message(incoming_msg, *args)  # type: ignore[misc]


class NoDelayGatewayWebSocketConnection(_GatewayNoDelay, GatewayWebSocketConnection):
    """jupyter_server's gateway kernel websocket connection, messages sent at once."""


def without_nagle(cls: type[Any]) -> type[Any]:
    """Return a kernel websocket connection class like `cls` whose messages are sent at once."""
    if issubclass(cls, _NoDelay):
        return cls
    if cls is ZMQChannelsWebsocketConnection:
        return NoDelayZMQChannelsWebsocketConnection
    if cls is GatewayWebSocketConnection:
        return NoDelayGatewayWebSocketConnection
    # Another class configured by the admin: the same fix on top of it.
    mixin: type[Any] = _GatewayNoDelay if issubclass(cls, GatewayWebSocketConnection) \
        else _NoDelay
    return type(f"NoDelay{cls.__name__}", (mixin, cls), {"__module__": __name__})


class KernelWebsockets(Configurable):
    """How this server's kernel websockets pass messages."""

    low_latency = Bool(True, config=True, help=(
        "Pass kernel messages on websockets at once: TCP_NODELAY on this server's kernel "
        "websockets; on the websockets it opens to a gateway's kernels, quick "
        "acknowledgements (Linux's TCP_QUICKACK), and REST sessions reading theirs on the "
        "event loop rather than polling a reader thread. False keeps jupyter_server's and "
        "tornado's defaults, under which an execute over a websocket waits ~40 ms for a "
        "delayed ACK (default: True)."))


def install_low_latency(settings: MutableMapping[str, object], enabled: bool = True) -> None:
    """Make the server's kernel websockets send at once (its web app's settings)."""
    from jupyter_ci.server import gateway  # its client reads the same switch

    gateway.AuthenticatedGatewayKernelClient.low_latency = enabled
    configured = settings.get("kernel_websocket_connection_class")
    if enabled and isinstance(configured, type):
        settings["kernel_websocket_connection_class"] = without_nagle(configured)
