"""The egress proxy of boxed kernels whose network is an allowlist (`sandbox_network`).

An HTTP proxy on a Unix socket, bound into each such box (forward.py gives it a loopback
port there). It takes `CONNECT host:port` (HTTPS and any TLS: bytes are spliced, never
read) and absolute-form plain HTTP requests (`GET http://host/path`, rewritten to origin
form with the URL's own Host, one request per connection). A target passes only if the
allowlist names it (allowlist.py) and its name resolves, here and not in the box, to an
address the allowlist lets it reach; anything else gets 403 and a line saying which
setting allows it. Refusals are logged at INFO with the host only; no body is ever read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import socket
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from jupyter_ci.server.sandbox.allowlist import DEFAULT_PORTS, SETTING, Allowlist, split_authority
from jupyter_ci.server.sandbox.splice import answer, splice

#: A logger, or a Jupyter application's (its adapter), where refusals are told.
Log: TypeAlias = "logging.Logger | logging.LoggerAdapter[Any]"

#: Connections all proxies of this process carry at once; more get 503.
MAX_CONNECTIONS = 256
#: Largest request head (request line and headers), in bytes.
HEAD_BYTES = 64 << 10
#: Seconds a client has to send its request head (a silent one holds a connection slot).
HEAD_SECONDS = 30.0
#: Seconds a refused client has to read the answer and hang up.
LINGER_SECONDS = 5.0
#: Seconds one way of a half-closed connection may stay idle before both are closed.
HALF_CLOSED_SECONDS = 60.0
#: Seconds to connect to one address of the target.
CONNECT_SECONDS = 15.0
#: Refused hosts a proxy remembers (the newest), for the page to offer to allow.
REFUSALS_KEPT = 32
#: The process's connection slots, shared by its proxies.
SLOTS = threading.BoundedSemaphore(MAX_CONNECTIONS)

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_VERSION = re.compile(r"HTTP/1\.[01]")
_ABSOLUTE = re.compile(r"(?i:http)://([^/?#]*)([^#]*)(#.*)?")
#: Headers for the proxy, or for a connection this proxy does not keep open; the URL's own
#: Host replaces the client's (a different one would reach another site on a shared address).
_DROPPED = frozenset({"connection", "proxy-connection", "keep-alive", "proxy-authorization",
                      "upgrade", "host"})
_REASONS = {400: "Bad Request", 403: "Forbidden", 408: "Request Timeout",
            431: "Request Header Fields Too Large", 502: "Bad Gateway",
            503: "Service Unavailable", 504: "Gateway Timeout"}


class Refused(Exception):
    """A request the proxy answers itself: its status and a line of text for the user."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status, self.text = status, text


@dataclass(frozen=True)
class Request:
    """What a client asked for: a target, and the head to send it (none for CONNECT)."""

    method: str
    host: str
    port: int
    head: bytes = b""


def parse_head(head: bytes) -> Request:
    """Parse a request head (ending with a blank line); raise Refused(400) when malformed."""
    line, *fields = head.decode("latin-1").removesuffix("\r\n\r\n").split("\r\n")
    parts = line.split(" ")
    if (len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not _VERSION.fullmatch(parts[2])
            or not (parts[1].isascii() and parts[1].isprintable())):
        raise Refused(400, "jupyter-ci: not an HTTP/1.x request line.")
    method, target, version = parts
    headers = [_field(text) for text in fields]
    if method == "CONNECT":
        found = split_authority(target)
        if found is None or found[1] is None:
            raise Refused(400, "jupyter-ci: CONNECT takes host:port.")
        return Request(method, found[0], found[1])
    match = _ABSOLUTE.fullmatch(target)
    if match is None:
        raise Refused(400, "jupyter-ci: this proxy takes absolute http:// URLs, and https:// "
                      "through CONNECT.")
    authority, path = match.group(1), match.group(2)
    found = split_authority(authority) if "@" not in authority else None
    if found is None:
        raise Refused(400, "jupyter-ci: the URL's host is not a host name or address.")
    host, port = found[0], found[1] or 80
    path = path if path.startswith("/") else f"/{path}"
    return Request(method, host, port, _origin_head(method, path, version, authority, headers))


def _field(text: str) -> tuple[str, str]:
    """Split one header line; raise Refused(400) for one a server might read differently."""
    name, colon, value = text.partition(":")
    if not colon or not _TOKEN.fullmatch(name) or any(c in value for c in "\r\n\0"):
        raise Refused(400, "jupyter-ci: a malformed header line.")
    return name, value.strip()


def _origin_head(method: str, path: str, version: str, authority: str,
                 headers: list[tuple[str, str]]) -> bytes:
    """Write the request for the origin server: origin form, its Host, no keep-alive."""
    named = {token.strip().lower() for name, value in headers if name.lower() == "connection"
             for token in value.split(",")}
    lines = [f"{method} {path} {version}", f"Host: {authority}"]
    lines += [f"{name}: {value}" for name, value in headers
              if name.lower() not in _DROPPED and name.lower() not in named]
    return "\r\n".join([*lines, "Connection: close", "", ""]).encode("latin-1")


class EgressProxy:
    """An HTTP proxy on a Unix socket that lets through only what its allowlist allows."""

    def __init__(self, allowlist: Allowlist, path: Path,
                 slots: threading.BoundedSemaphore = SLOTS, log: Log | None = None,
                 hint: str = "", setting: str = SETTING) -> None:
        #: Replaced whole when the user allows a host (read once per connection).
        self.allowlist, self.path, self._slots = allowlist, path, slots
        self.log = log or logging.getLogger(__name__)
        #: What a refusal says allows the host, besides the setting (a notebook's page).
        self.hint = hint
        #: The setting that lists what the proxy lets through.
        self.setting = setting
        self._server: asyncio.AbstractServer | None = None
        #: Connections open now (for tests and logs).
        self.active = 0
        #: The hosts (host or host:port) refused lately, oldest first, each once.
        self.refusals: deque[str] = deque(maxlen=REFUSALS_KEPT)

    async def start(self) -> Path:
        """Listen on the socket (0600; a stale one of an earlier process is replaced)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.path),
                                                       limit=HEAD_BYTES)
        os.chmod(self.path, 0o600)
        return self.path

    def close(self) -> None:
        """Stop listening and remove the socket (open connections run to their end)."""
        if self._server is not None:
            self._server.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Carry one client connection, within the process's connection slots."""
        if not self._slots.acquire(blocking=False):
            await _answer(reader, writer, Refused(
                503, "jupyter-ci: too many connections through the sandbox's egress proxy at "
                "once; try again."))
            return
        self.active += 1
        try:
            await self._carry(reader, writer)
        except OSError as err:
            self.log.debug("jupyter-ci sandbox: an egress connection ended: %s", err)
        finally:
            self.active -= 1
            self._slots.release()
            writer.close()

    async def _carry(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Read the request, open its target if allowed, and splice the two."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_SECONDS)
            request = parse_head(head)
            upstream = await self._open(request)
        except Refused as refused:
            await _answer(reader, writer, refused)
            return
        except asyncio.IncompleteReadError:
            return  # gone before it asked
        except asyncio.LimitOverrunError:
            await _answer(reader, writer, Refused(431, "jupyter-ci: the request head is too "
                                                  "large."))
            return
        except TimeoutError:
            await _answer(reader, writer, Refused(408, "jupyter-ci: no request came."))
            return
        if request.method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            upstream[1].write(request.head)
        await splice((reader, writer), upstream, HALF_CLOSED_SECONDS)

    async def _open(self, request: Request) -> tuple[asyncio.StreamReader,
                                                     asyncio.StreamWriter]:
        """Connect to the target if the allowlist allows it and what its name resolves to."""
        host, port = request.host, request.port
        allowlist = self.allowlist
        rule = allowlist.rule_for(host, port)
        if rule is None:
            self.log.info("jupyter-ci sandbox: refused %s:%d (not in %s)", host, port,
                          self.setting)
            self._refused(host, port)
            where = self.hint.format(host=_entry(host, port)) if self.hint else \
                f"{self.setting} lists the hosts (and host:port) they may reach."
            raise Refused(403, f"jupyter-ci: sandboxed kernels may not reach {host}:{port}; "
                          f"{where}")
        addresses = await _resolve(host, port)
        allowed = [address for address in addresses if allowlist.reachable(rule, address)]
        if not allowed:
            self.log.info("jupyter-ci sandbox: refused %s:%d (a non-public address)", host, port)
            raise Refused(403, f"jupyter-ci: {host} resolves to {addresses[0]}, a loopback, "
                          "private or link-local address; sandboxed kernels reach such an "
                          f"address only if {self.setting} lists the address itself.")
        failure: Exception | None = None
        for address in allowed:
            try:
                return await asyncio.wait_for(asyncio.open_connection(address, port),
                                              CONNECT_SECONDS)
            except (TimeoutError, OSError) as err:
                failure = err
        if isinstance(failure, asyncio.TimeoutError):
            raise Refused(504, f"jupyter-ci: {host}:{port} did not answer.")
        raise Refused(502, f"jupyter-ci: could not connect to {host}:{port} ({failure}).")


    def _refused(self, host: str, port: int) -> None:
        """Remember a refused host, newest last, once."""
        entry = _entry(host, port)
        if entry in self.refusals:
            self.refusals.remove(entry)
        self.refusals.append(entry)


def _entry(host: str, port: int) -> str:
    """Return the allowlist entry that would allow `host:port` (no port for 80 and 443)."""
    shown = f"[{host}]" if ":" in host else host
    return shown if port in DEFAULT_PORTS else f"{shown}:{port}"


async def _resolve(host: str, port: int) -> list[str]:
    """Return the addresses `host` resolves to, in the resolver's order."""
    loop = asyncio.get_running_loop()
    try:
        found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as err:
        raise Refused(502, f"jupyter-ci: cannot resolve {host} ({err}).") from err
    addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    if not addresses:
        raise Refused(502, f"jupyter-ci: {host} has no address.")
    return addresses


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                  refused: Refused) -> None:
    """Send the proxy's own short plain-text answer and end the connection."""
    body = f"{refused.text}\n".encode()
    # The text is the reason phrase too: a client that fails a CONNECT shows the status
    # line alone (urllib's and urllib3's "Tunnel connection failed: 403 ...", so pip's).
    reason = refused.text if refused.status == 403 else _REASONS.get(refused.status, "Error")
    reason = reason.encode("latin-1", "replace").decode("latin-1")
    head = (f"HTTP/1.1 {refused.status} {reason}\r\n"
            f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n")
    await answer(reader, writer, head.encode() + body, LINGER_SECONDS)
