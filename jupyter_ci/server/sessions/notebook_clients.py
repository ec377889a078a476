"""One kernel client per notebook kernel for run_in_notebook, kept while the kernel lives.

A client opened for each call cost ~200 ms (its sockets, then a kernel_info round trip), and
numbered its messages from where the kernel manager's session stood, so every call's requests
had the same ids as the last call's (the kernel's gate took the code's request for one it had
let through, and never told the pages which request was the cell's). Here each kernel has one
client, opened at the first call with a session id of its own (its message ids are unique),
used by one call at a time (between calls, what the kernel publishes for the notebook's own
runs is read and dropped each second, so none piles up), and closed when the kernel is
removed from the server's kernel manager (shut down, or dead for good: `remove_kernel` ends
both), when its connection is lost (a gateway's websocket), or when the server stops
(`close_notebook_clients`).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from jupyter_core.utils import ensure_async

from jupyter_ci.server.gateway import kernel_client
from jupyter_ci.server.sessions.errors import KernelUnavailable, SessionError

#: Seconds at most for a kernel to answer a new client's kernel_info request.
READY_S = 60.0
#: IOPub messages read and dropped at most before a call (the notebook's own, since the last).
DRAIN_MAX = 100_000
#: Seconds between the reads that drop what the kernel published while no call ran.
IDLE_DRAIN_S = 1.0
_ATTRIBUTE = "_jupyter_ci_notebook_clients"


@dataclass
class _Kept:
    """A kernel's client, the kernel manager object it was opened on, its idle reader."""

    kernel: Any
    client: Any
    reader: asyncio.Future[None] | None = None


class NotebookClients:
    """The kernel clients of run_in_notebook, one per kernel of the server's kernel manager."""

    def __init__(self, kernel_manager: Any) -> None:
        self.kernel_manager = kernel_manager
        self._kept: dict[str, _Kept] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        remove = kernel_manager.remove_kernel

        def remove_kernel(kernel_id: str, *args: Any, **kwargs: Any) -> Any:
            self.close(kernel_id)
            self._locks.pop(kernel_id, None)
            return remove(kernel_id, *args, **kwargs)

        kernel_manager.remove_kernel = remove_kernel

    @classmethod
    def of(cls, kernel_manager: Any) -> NotebookClients:
        """Return the clients of this kernel manager (made, and hooked on it, once)."""
        clients = getattr(kernel_manager, _ATTRIBUTE, None)
        if not isinstance(clients, cls):
            clients = cls(kernel_manager)
            setattr(kernel_manager, _ATTRIBUTE, clients)
        return clients

    @contextlib.asynccontextmanager
    async def use(self, kernel_id: str) -> AsyncIterator[Any]:
        """Lend the kernel's client to one call at a time, its IOPub read up to now."""
        async with self._locks.setdefault(kernel_id, asyncio.Lock()):
            client = await self._client(kernel_id)
            await _drain(client)
            try:
                yield client
            except SessionError:
                raise  # a refusal: the client is fine
            except BaseException:
                # Whatever broke the call may have broken the client: the next opens anew.
                self.close(kernel_id)
                raise

    async def _client(self, kernel_id: str) -> Any:
        """Return the kept client of the kernel, opening one when it has none."""
        if kernel_id not in self.kernel_manager:
            raise KernelUnavailable("The notebook's kernel was shut down while this call "
                                    "waited for it: start it again, then retry; nothing ran.")
        kernel = self.kernel_manager.get_kernel(kernel_id)
        kept = self._kept.get(kernel_id)
        if kept is not None and kept.kernel is kernel and kept.client.channels_running:
            return kept.client
        self.close(kernel_id)
        client = kernel_client(kernel)
        client.session.session = str(uuid.uuid4())  # message ids no other client has
        await ensure_async(client.start_channels())
        try:
            await client.wait_for_ready(timeout=READY_S)
        except BaseException:
            client.stop_channels()
            raise
        if hasattr(client, "on_lost"):  # a gateway's: its websocket may end
            loop = asyncio.get_running_loop()

            def lost() -> None:
                with contextlib.suppress(RuntimeError):  # the loop is closed: the server
                    loop.call_soon_threadsafe(self._lost, kernel_id, client)

            client.on_lost = lost
        self._kept[kernel_id] = _Kept(kernel, client, asyncio.ensure_future(
            self._read_idle(self._locks[kernel_id], client)))
        return client

    @staticmethod
    async def _read_idle(lock: asyncio.Lock, client: Any) -> None:
        """Between calls, drop what the kernel publishes (the notebook's own runs): left for
        the next call, it would pile up in this process (a gateway client's queues have no
        bound) or fill the socket's queue, which then drops the next call's messages."""
        while True:
            await asyncio.sleep(IDLE_DRAIN_S)
            async with lock:  # never while a call reads
                await _drain(client)

    def _lost(self, kernel_id: str, client: Any) -> None:
        """Close the client whose connection ended (the next call opens a new one)."""
        kept = self._kept.get(kernel_id)
        if kept is not None and kept.client is client:
            self.close(kernel_id)

    def close(self, kernel_id: str) -> None:
        """Close the kernel's client, if it has one."""
        kept = self._kept.pop(kernel_id, None)
        if kept is not None:
            if kept.reader is not None:
                kept.reader.cancel()
            with contextlib.suppress(Exception):  # closing what may be half gone already
                kept.client.stop_channels()

    def close_all(self) -> None:
        """Close every client (the server stops)."""
        for kernel_id in list(self._kept):
            self.close(kernel_id)

    def __len__(self) -> int:
        return len(self._kept)


def close_notebook_clients(kernel_manager: Any) -> None:
    """Close run_in_notebook's clients of this kernel manager, if it has any."""
    clients = getattr(kernel_manager, _ATTRIBUTE, None)
    if isinstance(clients, NotebookClients):
        clients.close_all()


async def _drain(client: Any) -> None:
    """Drop the IOPub messages that came since the last call (the notebook's own runs): read
    first, they would fill the socket's queue before this call's could be read."""
    for _ in range(DRAIN_MAX):
        try:
            await client.get_iopub_msg(timeout=0)
        except Exception:  # queue.Empty: read up to now
            return
