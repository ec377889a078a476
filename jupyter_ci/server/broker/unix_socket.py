"""The broker on Unix sockets for kernels in a box (they have no network): one per box.

A boxed kernel cannot reach the server's port; the sandbox provisioner binds a socket of its
box's own into it instead, made when the kernel starts and removed when it ends for good
(sandbox/sockets.py asks for them). They serve the broker's routes and nothing else (no
Jupyter API, no terminals), to this user only (0600, in a private folder), and each request
still needs the token of a live kernel, as on the server's port.

A box cannot take the server down through its socket: it gets `sandbox_broker_connections`
connections at a time, and past them its socket stops accepting, so the box's own backlog
(and its own descriptors) take the rest, not the server's. A connection that sends no
request, or its body too slowly, is closed after a short timeout, and each answers one
request. Should the process run out of descriptors all the same, accepting pauses with
back-off and says so in one log line a minute, not one per turn of the loop.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from logging import Logger
from pathlib import Path
from typing import Any

from tornado import web
from tornado.httpserver import HTTPServer
from tornado.ioloop import IOLoop
from tornado.iostream import IOStream
from tornado.log import gen_log
from tornado.netutil import bind_unix_socket

from jupyter_ci.server.sandbox import sockets
from jupyter_ci.server.sandbox.provisioner import private_base

#: Seconds a connection may take to send a request's headers, and then its body.
HEADER_TIMEOUT = 10.0
BODY_TIMEOUT = 30.0
#: Connections the kernel queues on a socket beyond those accepted (the listen backlog).
BACKLOG = 64
#: Bytes a connection may buffer while read (bodies stream in chunks of 64 KiB).
BUFFER_BYTES = 4 << 20
#: Seconds accepting pauses when the process is short of descriptors: first, and at most.
PAUSE_FIRST, PAUSE_MOST = 0.05, 2.0
#: Seconds between two log lines about a shortage of descriptors.
LOG_EVERY = 60.0

#: The peer's address of a box's connections, as tornado's logs would name it.
BOX_PEER = ("a jupyter-ci box",)

Routes = list[tuple[str, type[web.RequestHandler], dict[str, object]]]


class _Shortage:
    """Say once a minute at most that accepting had to pause (shared by every socket)."""

    last = float("-inf")
    missed = 0

    @classmethod
    def tell(cls, log: Logger, err: OSError) -> None:
        """Log the shortage now if no line was logged in the last minute, else count it."""
        now = time.monotonic()
        if now - cls.last < LOG_EVERY:
            cls.missed += 1
            return
        more = f" ({cls.missed} more since the last line)" if cls.missed else ""
        cls.last, cls.missed = now, 0
        log.warning("jupyter-ci: the model service's sockets for boxes pause accepting "
                    "(%s)%s: the process is short of file descriptors; raise its limit "
                    "(ulimit -n) or lower c.JupyterCI.sandbox_broker_connections", err, more)


class _QuietBoxes(logging.Filter):
    """Drop tornado's line per malformed request or slow body of a box: a box could send
    thousands a second; it learns what it did wrong from its own connection."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep every record but those about a box's connection."""
        args = record.args if isinstance(record.args, tuple) else ()
        return not (args and getattr(args[0], "address", None) == BOX_PEER)


class _Server(HTTPServer):
    """tornado's HTTP server, telling its socket when a connection ends."""

    released: Any = None

    def on_close(self, server_conn: object) -> None:
        """Free the connection's place under the cap."""
        super().on_close(server_conn)
        if self.released is not None:
            self.released()


class CappedSocket:
    """One Unix socket of the broker's routes that accepts `cap` connections at a time."""

    def __init__(self, path: Path, app: web.Application, cap: int, log: Logger,
                 io_loop: IOLoop) -> None:
        self.path, self.cap, self.log, self.io_loop = path, max(1, cap), log, io_loop
        self._server = _Server(app, no_keep_alive=True, idle_connection_timeout=HEADER_TIMEOUT,
                               body_timeout=BODY_TIMEOUT, max_buffer_size=BUFFER_BYTES)
        self._server.released = self._released
        self._sock: Any = None
        self._active = 0
        self._reading = self._paused = False
        self._pause = 0.0

    def start(self) -> Path:
        """Listen (a stale socket at the path is replaced); accept from the loop's next turn."""
        self._sock = bind_unix_socket(str(self.path), mode=0o600, backlog=BACKLOG)
        self.io_loop.add_callback(self._resume)
        return self.path

    def stop(self) -> None:
        """Stop accepting, remove the socket, and close its connections (on the loop)."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        if self._reading:
            self.io_loop.remove_handler(sock)
            self._reading = False
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.io_loop.add_callback(self._server.close_all_connections)

    def _resume(self) -> None:
        """Accept again: there is room under the cap, and descriptors."""
        if self._sock is not None and not self._reading and not self._paused:
            self.io_loop.add_handler(self._sock, self._accept, IOLoop.READ)
            self._reading = True

    def _hold(self) -> None:
        """Stop accepting: connections wait in the socket's backlog, in the box's account."""
        if self._reading:
            self.io_loop.remove_handler(self._sock)
            self._reading = False

    def _accept(self, fd: Any, events: int) -> None:
        """Accept what waits, up to the cap; then hold until a connection ends."""
        while self._sock is not None and self._active < self.cap:
            try:
                conn, _ = self._sock.accept()
            except BlockingIOError:
                return
            except ConnectionAbortedError:
                continue
            except OSError as err:
                self._short(err)
                return
            self._pause = 0.0
            self._active += 1
            conn.setblocking(False)
            self._server.handle_stream(IOStream(conn, max_buffer_size=BUFFER_BYTES), BOX_PEER)
        self._hold()

    def _short(self, err: OSError) -> None:
        """Pause accepting, longer each time in a row (EMFILE would repeat every turn)."""
        if err.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
            self.log.warning("jupyter-ci: accepting on %s failed (%s)", self.path, err)
        _Shortage.tell(self.log, err)
        self._hold()
        self._paused = True
        self._pause = min(max(2 * self._pause, PAUSE_FIRST), PAUSE_MOST)
        self.io_loop.call_later(self._pause, self._unpause)

    def _unpause(self) -> None:
        self._paused = False
        self._resume()

    def _released(self) -> None:
        """A connection ended: room for the next one."""
        self._active -= 1
        self._resume()


class BrokerSockets:
    """The broker's sockets for boxes: one per kernel, and one shared for other processes.

    The shared socket (`start`) is published for boxes whose provisioner runs in another
    process (a Kernel Gateway on this machine); it has the same cap, for all of them.
    """

    def __init__(self, routes: Routes, cap: int, log: Logger, io_loop: IOLoop) -> None:
        self.cap, self.log, self.io_loop = cap, log, io_loop
        self._app = web.Application(routes, base_url="/", log_function=self._log_request)
        self.shared = self._socket(private_base() / f"broker-{os.getpid()}.sock")
        self._boxes: dict[str, CappedSocket] = {}
        if not any(isinstance(known, _QuietBoxes) for known in gen_log.filters):
            gen_log.addFilter(_QuietBoxes())

    def start(self) -> Path:
        """Listen on the shared socket, and serve boxes started from now on; return its path."""
        sockets.register(self)
        return self.shared.start()

    def open(self, kernel_id: str) -> Path:
        """Return the socket of this kernel's box, made at its first start."""
        found = self._boxes.get(kernel_id)
        if found is None:
            name = f"b-{kernel_id.replace('-', '')[:16]}.sock"
            found = self._boxes[kernel_id] = self._socket(private_base() / name)
            found.start()
        return found.path

    def close(self, kernel_id: str) -> None:
        """Stop serving this kernel's box and remove its socket."""
        found = self._boxes.pop(kernel_id, None)
        if found is not None:
            self.io_loop.add_callback(found.stop)

    def stop(self) -> None:
        """Stop every socket (the server is stopping)."""
        sockets.unregister(self)
        for sock in [self.shared, *self._boxes.values()]:
            sock.stop()
        self._boxes.clear()

    def _socket(self, path: Path) -> CappedSocket:
        return CappedSocket(path, self._app, self.cap, self.log, self.io_loop)

    def _log_request(self, handler: web.RequestHandler) -> None:
        """Log only the service's own failures: what a box asks wrong is its own business."""
        if handler.get_status() >= 500:
            self.log.warning("jupyter-ci: %d %s on a box's socket", handler.get_status(),
                             handler.request.path)
