"""Kernel clients for sessions whose kernels live in a gateway (`--gateway-url`).

jupyter_server's `GatewayKernelClient` (2.21) opens its websocket to the gateway without the
headers `GatewayClient` sends with every HTTP request, so a gateway that requires a token
(`KernelGatewayApp.auth_token`, Enterprise Gateway behind auth) refuses it with 401. The
server's own websocket proxy is not affected; only clients made in the server are, which is
what a session uses. This subclass opens the same websocket with those headers.
"""

from __future__ import annotations

from threading import Thread
from typing import Any

import websocket
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_server.gateway.gateway_client import GatewayClient
from jupyter_server.gateway.managers import GatewayKernelClient
from jupyter_server.utils import url_path_join
from tornado.escape import url_escape


class AuthenticatedGatewayKernelClient(GatewayKernelClient):
    """A gateway kernel client whose websocket carries the gateway's auth headers."""

    # Async, as GatewayKernelClient itself overrides jupyter_client's sync method.
    async def start_channels(  # type: ignore[override]
        self, shell: Any = True, iopub: Any = True, stdin: Any = True, hb: Any = True,
        control: Any = True,
    ) -> None:
        """Connect to the kernel's channels on the gateway, authenticated."""
        gateway: Any = GatewayClient.instance()  # untyped upstream
        url = url_path_join(gateway.ws_url or "", gateway.kernels_endpoint,
                            url_escape(self.kernel_id), "channels")
        headers = gateway.load_connection_args().get("headers", {})
        self.channel_socket = websocket.create_connection(
            url, timeout=gateway.KERNEL_LAUNCH_TIMEOUT, enable_multithread=True,
            header=headers, sslopt={"ca_certs": gateway.ca_certs,
                                    "certfile": gateway.client_cert,
                                    "keyfile": gateway.client_key})
        # The channel queues over that socket are GatewayKernelClient's own.
        AsyncKernelClient.start_channels(self, shell=shell, iopub=iopub, stdin=stdin, hb=hb,
                                         control=control)
        self.response_router = Thread(target=self._route_responses, daemon=True)
        self.response_router.start()

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


def kernel_client(kernel: Any) -> Any:
    """Return a client for one of the server's kernels, authenticated on a gateway."""
    if is_gateway(kernel):
        kernel.client_factory = AuthenticatedGatewayKernelClient
    return kernel.client()
