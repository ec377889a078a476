"""Sessions whose kernels live in a gateway that goes away, and comes back (or not).

A session's kernel in a gateway (`--gateway-url`) is reached over one websocket. When the
gateway goes away (killed, restarted, the network between cut), that websocket ends: the
session is then listed as `unavailable`, and its runs answer 503 `gateway_unreachable`
naming the gateway, instead of a 500 from a send on a closed socket. Meanwhile it is
probed (`GET /api/kernels/<id>` on the gateway) with a growing pause; so is it at once by
each request. When the gateway answers again:

- with its kernel: the session reconnects, with its variables, and works as before;
- without it (the gateway restarted and its kernels died with it): the session is listed as
  `gone`, and its runs answer 410 `kernel_gone`; its files are still on this server to
  download before deleting it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from logging import Logger
from typing import Any

from jupyter_server.gateway.gateway_client import GatewayClient, gateway_request
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.escape import url_escape
from tornado.httpclient import HTTPClientError

from jupyter_ci.server.gateway import connected, kernel_client
from jupyter_ci.server.sessions import languages
from jupyter_ci.server.sessions.errors import GatewayUnreachable, KernelGone, SessionError
from jupyter_ci.server.sessions.kernels import READY_S, SessionKernels
from jupyter_ci.server.sessions.session import Session

#: Pauses between probes of a gateway that went away, in seconds (the last one repeats).
RECHECK_S = (1.0, 2.0, 5.0, 10.0, 30.0)
#: How long one probe may take (a gateway that accepts and never answers is unreachable).
PROBE_TIMEOUT_S = 10.0


def gateway_url() -> str:
    """Return the URL of the server's gateway."""
    return str(GatewayClient.instance().url or "")


def unreachable(detail: str) -> GatewayUnreachable:
    """Say that the gateway does not answer, and what to do."""
    return GatewayUnreachable(
        f"The gateway at {gateway_url()} is unreachable ({detail}): this session's kernel runs "
        "there. Try again when the gateway is back; the session reconnects to its kernel, "
        "variables kept, if the gateway still has it.")


def gone(kernel_id: str) -> KernelGone:
    """Say that the gateway no longer has the session's kernel, and what to do."""
    return KernelGone(
        f"The gateway at {gateway_url()} no longer has this session's kernel {kernel_id} "
        "(it restarted without it, or the kernel was shut down there): the session's "
        "variables are lost. Its files are still here to download; then delete the session "
        "and create a new one.")


def _detail(error: BaseException) -> str:
    """Describe why a request to the gateway failed, briefly."""
    cause = error.__cause__ or error.__context__ or error
    if isinstance(error, web.HTTPError) and isinstance(cause, HTTPClientError):
        return f"HTTP {cause.code}: {cause.message}"
    return type(cause).__name__ + (f": {cause}" if str(cause) else "")


async def probe(kernel_id: str) -> None:
    """Return if the gateway has this kernel; raise GatewayUnreachable or KernelGone if not."""
    gateway = GatewayClient.instance()
    url = url_path_join(gateway.url or "", gateway.kernels_endpoint, url_escape(kernel_id))
    try:
        await asyncio.wait_for(gateway_request(url, method="GET"), PROBE_TIMEOUT_S)
    except web.HTTPError as error:
        if isinstance(error.__cause__, HTTPClientError) and error.__cause__.code == 404:
            raise gone(kernel_id) from None
        raise unreachable(_detail(error)) from None
    except TimeoutError:
        raise unreachable(f"no answer within {PROBE_TIMEOUT_S:g} s") from None
    except Exception as error:  # connection reset, TLS, DNS: all mean "not reachable now"
        raise unreachable(_detail(error)) from None


def translate(error: BaseException) -> SessionError | None:
    """Return the session error for a failed gateway request (jupyter_server's HTTPError)."""
    if isinstance(error, web.HTTPError) and error.status_code in (503, 599):
        return unreachable(_detail(error))
    return None


class GatewayWatch:
    """Notice sessions whose gateway went away; reconnect them when it is back."""

    def __init__(self, kernels: SessionKernels, enabled: bool, log: Logger) -> None:
        self.kernels = kernels
        self.enabled = enabled
        self.log = log
        self._recovering: dict[str, asyncio.Task[None]] = {}

    def watch(self, session: Session) -> None:
        """Have the session's client say when its websocket ends."""
        if not self.enabled:
            return
        loop, client = asyncio.get_running_loop(), session.client

        def lost() -> None:  # on the loop, or on upstream's reading thread (low_latency off)
            with contextlib.suppress(RuntimeError):  # the loop is closed: the server stopped
                loop.call_soon_threadsafe(self._lost, session, client)

        client.on_lost = lost

    def _lost(self, session: Session, client: Any) -> None:
        """The websocket of this client ended: mark the session, and try to get it back."""
        if session.closed or client is not session.client or session.gateway_trouble:
            return
        self.failed(session, unreachable("the connection to it was lost"))

    def failed(self, session: Session, error: SessionError) -> None:
        """Record why the session cannot run; keep probing while the gateway is away."""
        status = "gone" if isinstance(error, KernelGone) else "unavailable"
        if session.gateway_trouble is None or session.gateway_trouble[0] != status:
            self.log.warning("jupyter-ci: session %s: %s", session.id, error.message)
        session.gateway_trouble = (status, error.message)
        task = self._recovering.get(session.id)
        if status == "unavailable" and (task is None or task.done()):
            self._recovering[session.id] = asyncio.ensure_future(self._recover(session))

    async def _recover(self, session: Session) -> None:
        """Probe the gateway with growing pauses until it answers (or the session ends)."""
        for attempt in itertools.count():
            await asyncio.sleep(RECHECK_S[min(attempt, len(RECHECK_S) - 1)])
            if session.closed or session.gateway_trouble is None:
                return
            if session.lock.locked():
                continue  # a request is at it (ensure runs under the lock)
            async with session.lock:
                try:
                    await self.ensure(session)
                    return
                except KernelGone:
                    return
                except SessionError:
                    continue

    async def ensure(self, session: Session) -> None:
        """Reconnect the session if its websocket ended and its kernel lives; else raise why.

        Runs under the session's lock. Costs nothing while the websocket is up.
        """
        if not self.enabled or (session.gateway_trouble is None and connected(session.client)):
            return
        trouble = session.gateway_trouble
        if trouble is not None and trouble[0] == "gone":
            raise KernelGone(trouble[1])
        try:
            await probe(session.kernel_id)
            await self._reconnect(session)
        except SessionError as error:
            if isinstance(error, (GatewayUnreachable, KernelGone)):
                self.failed(session, error)
            raise

    async def explain(self, session: Session, error: BaseException) -> None:
        """Raise why a run failed if the gateway is why (call where the run raised `error`)."""
        if not self.enabled or isinstance(error, SessionError):
            return
        try:
            await probe(session.kernel_id)
        except (GatewayUnreachable, KernelGone) as found:
            self.failed(session, found)
            raise found from None
        if not connected(session.client):  # the gateway is back already: reconnect next time
            lost = unreachable("the connection to it was lost during this run")
            self.failed(session, lost)
            raise lost from None

    async def _reconnect(self, session: Session) -> None:
        """Connect the session anew to its kernel in the gateway (variables kept)."""
        with contextlib.suppress(Exception):  # its websocket is over already
            session.client.stop_channels()
        try:
            client = kernel_client(self.kernels.km.get_kernel(session.kernel_id))
        except KeyError:  # this server forgot it: the gateway listed it as gone
            raise gone(session.kernel_id) from None
        await client.start_channels()
        try:
            await client.wait_for_ready(timeout=READY_S)
        except Exception as exc:
            with contextlib.suppress(Exception):
                client.stop_channels()
            raise unreachable(f"its kernel did not answer ({type(exc).__name__})") from exc
        session.client = client
        session.executor = self.kernels.executor(session.kernel_id, client)
        session.executor.late_s = languages.LATE_OUTPUTS_S.get(session.language, 0.0)
        session.gateway_trouble = None
        self.watch(session)
        self.log.info("jupyter-ci: session %s reconnected to its kernel in the gateway at %s",
                      session.id, gateway_url())

    def forget(self, session: Session) -> None:
        """Stop probing for a session that ended."""
        task = self._recovering.pop(session.id, None)
        if task is not None:
            task.cancel()
