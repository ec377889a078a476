"""Kernel clients for sessions whose kernels live in a gateway (`--gateway-url`).

jupyter_server's `GatewayKernelClient` (2.21) opens its websocket to the gateway without the
headers `GatewayClient` sends with every HTTP request, so a gateway that requires a token
(`KernelGatewayApp.auth_token`, Enterprise Gateway behind auth) refuses it with 401. The
server's own websocket proxy is not affected; only clients made in the server are, which is
what a session uses. This subclass opens the same websocket with those headers.

It is also quick (gateway_channels.py): its websocket is read on the event loop, not polled
from a thread, and each message is acknowledged at once. A REST execute through a gateway took
2.3-4.3x a local one, 1.2x now (bench/bench_gateway.py; issue 24).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from threading import Thread
from typing import Any

import websocket
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_server.gateway.gateway_client import GatewayClient
from jupyter_server.gateway.managers import GatewayKernelClient
from jupyter_server.utils import url_path_join
from tornado.escape import url_escape
from tornado.httpclient import HTTPRequest

from jupyter_ci.server import gateway_channels


class AuthenticatedGatewayKernelClient(GatewayKernelClient):
    """A gateway kernel client whose websocket carries the gateway's auth headers."""

    #: Read the websocket on the event loop, waking readers and acknowledging each message
    #: at once (c.KernelWebsockets.low_latency; server/nodelay.py); False: upstream's thread
    #: and polling queues.
    low_latency = True
    #: Called when the websocket ends without stop_channels (the gateway went away, or
    #: dropped the connection); from the reading thread when low_latency is off.
    on_lost: Callable[[], None] | None = None

    # Async, as GatewayKernelClient itself overrides jupyter_client's sync method.
    async def start_channels(  # type: ignore[override]
        self, shell: Any = True, iopub: Any = True, stdin: Any = True, hb: Any = True,
        control: Any = True,
    ) -> None:
        """Connect to the kernel's channels on the gateway, authenticated."""
        gateway: Any = GatewayClient.instance()  # untyped upstream
        url = url_path_join(gateway.ws_url or "", gateway.kernels_endpoint,
                            url_escape(self.kernel_id), "channels")
        if self.low_latency:
            await self._start_on_loop(url, gateway)
        else:
            self._start_threaded(url, gateway)
        # The channel queues over that socket (the waking ones, or GatewayKernelClient's).
        AsyncKernelClient.start_channels(self, shell=shell, iopub=iopub, stdin=stdin, hb=hb,
                                         control=control)
        if isinstance(self.response_router, Thread):
            self.response_router.start()

    async def _start_on_loop(self, url: str, gateway: Any) -> None:
        """Open the websocket with tornado and read it with a task on the event loop."""
        # The arguments of every request the server makes to the gateway: headers, TLS,
        # timeouts (as jupyter_server's own websocket proxy to it uses them).
        socket = await gateway_channels.connect(HTTPRequest(
            url, **gateway.load_connection_args()))
        self.channel_socket = socket  # type: ignore[assignment]
        queues = gateway_channels.waking_queues(socket, self.log, asyncio.get_running_loop())
        for name, queue in queues.items():
            setattr(self, f"_{name}_channel", queue)
        self._channel_queues = dict(queues)
        self.response_router = asyncio.ensure_future(  # type: ignore[assignment]
            gateway_channels.route(socket, queues, self.log, self._ended))

    def _start_threaded(self, url: str, gateway: Any) -> None:
        """Open the websocket as upstream does (websocket-client, a reading thread)."""
        headers = gateway.load_connection_args().get("headers", {})
        self.channel_socket = websocket.create_connection(
            url, timeout=gateway.KERNEL_LAUNCH_TIMEOUT, enable_multithread=True,
            header=headers, sslopt={"ca_certs": gateway.ca_certs,
                                    "certfile": gateway.client_cert,
                                    "keyfile": gateway.client_key})
        self.response_router = Thread(target=self._route_threaded, daemon=True)

    def _route_threaded(self) -> None:
        """Upstream's reading loop, then say that the websocket ended."""
        self._route_responses()  # type: ignore[no-untyped-call]
        self._ended()

    def _ended(self) -> None:
        """The websocket ended: tell on_lost, unless stop_channels ended it."""
        if not self._channels_stopped and self.on_lost is not None:
            self.on_lost()

    def stop_channels(self) -> None:
        """Close the websocket and stop the channels."""
        router = self.response_router
        if not isinstance(router, asyncio.Future):
            super().stop_channels()  # type: ignore[no-untyped-call]
            return
        AsyncKernelClient.stop_channels(self)
        self._channels_stopped = True
        if self.channel_socket is not None:
            self.channel_socket.close()
        if self._channel_queues:
            gateway_channels.finish(self._channel_queues.values())
            self._channel_queues.clear()
            self._channel_queues = None

    async def _async_is_alive(self) -> bool:
        """Ask the gateway, as its kernel manager's `is_alive` does.

        jupyter_client's client asks its manager's `_async_is_alive`, which on a gateway's
        manager asserts a local provisioner it never has: `wait_for_ready` on a kernel slow
        to answer (a busy machine, a restart) then failed with an AssertionError.
        """
        manager: Any = self.parent
        if manager is None:
            return True
        return bool(await manager.is_alive())


def is_gateway(manager: Any) -> bool:
    """Say whether a kernel manager (of all kernels, or of one) is jupyter_server's gateway's."""
    return type(manager).__module__.startswith("jupyter_server.gateway")


def connected(client: Any) -> bool:
    """Say whether a gateway kernel client's websocket still reads (any other client: True)."""
    router = getattr(client, "response_router", None)
    if isinstance(router, Thread):
        return router.is_alive()
    return not isinstance(router, asyncio.Future) or not router.done()


def kernel_client(kernel: Any) -> Any:
    """Return a client for one of the server's kernels, authenticated on a gateway."""
    if is_gateway(kernel):
        kernel.client_factory = AuthenticatedGatewayKernelClient
    return kernel.client()
