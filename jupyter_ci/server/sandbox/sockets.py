"""Where a box gets its socket to the model service: from the server that hosts it, if any.

The Jupyter server registers its broker's sockets here when it starts (server/app.py); the
sandbox provisioner, running in that server, then asks for a socket of the box's own when a
kernel starts and gives it back when the kernel ends for good. A process that hosts no
broker (a Kernel Gateway, nbclient) registers nothing: its boxes use the socket the server
published, if one is there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class BrokerSockets(Protocol):
    """The broker's sockets of boxes, one per kernel."""

    def open(self, kernel_id: str) -> Path:
        """Return the socket of this kernel's box (made at its first start, kept on restarts)."""

    def close(self, kernel_id: str) -> None:
        """Stop serving this kernel's socket and remove it (the kernel ended for good)."""


_registered: list[BrokerSockets] = []


def register(sockets: BrokerSockets) -> None:
    """Serve the boxes of kernels started in this process from now on."""
    _registered.append(sockets)


def unregister(sockets: BrokerSockets) -> None:
    """Stop serving boxes (the server is stopping)."""
    if sockets in _registered:
        _registered.remove(sockets)


def current() -> BrokerSockets | None:
    """Return the sockets of the broker running in this process (the last started), if any."""
    return _registered[-1] if _registered else None
