"""The broker on a Unix socket of its own, for kernels in a box (they have no network).

A boxed kernel cannot reach the server's port; the sandbox provisioner binds this socket
into its box instead. It serves the broker's routes and nothing else (no Jupyter API, no
terminals), to this user only (the socket is 0600, in a private folder), and each request
still needs the token of a live kernel, as on the server's port.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from tornado import web
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_unix_socket

from jupyter_ci.server.sandbox.provisioner import private_base


class BrokerSocket:
    """An HTTP server of the broker's routes on a Unix socket (started and stopped here)."""

    def __init__(self, routes: list[tuple[str, type[web.RequestHandler], dict[str, Any]]]
                 ) -> None:
        self.path = private_base() / f"broker-{os.getpid()}.sock"
        self._server = HTTPServer(web.Application(routes, base_url="/"))

    def start(self) -> Path:
        """Listen on the socket (a stale one of an earlier server with this pid is replaced)."""
        self._server.add_socket(bind_unix_socket(str(self.path), mode=0o600))
        return self.path

    def stop(self) -> None:
        """Stop listening and remove the socket."""
        self._server.stop()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
