"""A small HTTP/1.1 client for the one hop from a user's server to the Hub service.

Every model turn of a user's server under the Hub crosses this hop, text chunk by text
chunk, so it is kept lean: connections are kept open and reused (keep-alive), a reply's
body is read as it arrives (chunked or by length) and split into lines, and nothing is
parsed twice. httpx did the same about 3 ms slower per turn here (bench/bench_hub.py), a
third of a turn through a single server. Leaving a reply before its end (the turn was
cancelled: the kernel hung up) closes its connection, which is how the service learns to
stop the provider's stream. Plain HTTP and HTTPS; no proxy (the Hub's service is reached
directly, as JupyterHub's own API is).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

#: What a status line or header may be, at most.
_LINE = 1 << 16
#: A reply's body that is read whole (a refusal, a policy), at most.
BODY_LIMIT = 1 << 20


class HopError(Exception):
    """The service could not be reached, or did not answer in HTTP (told by what happened)."""


@dataclass
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def close(self) -> None:
        self.writer.close()


@dataclass
class Reply:
    """The status and headers of an answer, and its body as it is read."""

    status: int
    headers: dict[str, str]
    conn: _Conn
    #: The body was read to its end: the connection can serve the next request.
    done: bool = False

    async def chunks(self) -> AsyncIterator[bytes]:
        """Yield the body as it arrives."""
        reader, headers = self.conn.reader, self.headers
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while size := int((await reader.readline()).split(b";")[0].strip() or b"0", 16):
                data = await reader.readexactly(size + 2)
                yield data[:-2]
            while (await reader.readline()).strip():
                pass  # trailers
        elif "content-length" in headers:
            left = int(headers["content-length"])
            while left > 0:
                data = await reader.read(min(left, 1 << 16))
                if not data:
                    raise HopError("the connection closed mid-body")
                left -= len(data)
                yield data
        else:
            while data := await reader.read(1 << 16):
                yield data
            self.headers["connection"] = "close"
        self.done = True

    async def lines(self) -> AsyncIterator[bytes]:
        """Yield the body's lines (without their line feed) as they arrive."""
        pending = b""
        async for data in self.chunks():
            *whole, pending = (pending + data).split(b"\n")
            for line in whole:
                yield line
        if pending:
            yield pending

    async def read(self, limit: int = BODY_LIMIT) -> bytes:
        """Return the body whole (up to `limit` bytes; the rest is read and dropped)."""
        body = b""
        async for data in self.chunks():
            body += data[:max(0, limit - len(body))]
        return body


@dataclass
class HopClient:
    """Keep-alive connections to one service (scheme, host and port of `url`)."""

    url: str
    #: Seconds one exchange (request and whole reply) may take.
    timeout: float
    _idle: list[_Conn] = field(default_factory=list)

    @contextlib.asynccontextmanager
    async def request(self, method: str, path: str, headers: Mapping[str, str],
                      body: bytes = b"") -> AsyncIterator[Reply]:
        """Send a request (path below the URL's); yield its reply, its body to be read."""
        parts = urlsplit(self.url)
        target = f"{parts.path.rstrip('/')}/{path.lstrip('/')}"
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        data = (f"{method} {target} HTTP/1.1\r\nHost: {parts.netloc}\r\n{head}"
                f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1") + body
        async with asyncio.timeout(self.timeout):  # TimeoutError: told as unreachable
            reply = await self._send(data)
            try:
                yield reply
            finally:
                if reply.done and reply.headers.get("connection", "").lower() != "close":
                    self._idle.append(reply.conn)
                else:
                    reply.conn.close()  # left before its end: the service stops the turn

    async def _send(self, data: bytes) -> Reply:
        """Send on a kept connection (once more on a new one if it was closed meanwhile)."""
        while self._idle:
            conn = self._idle.pop()
            try:
                return await self._exchange(conn, data)
            except (OSError, asyncio.IncompleteReadError):
                conn.close()  # the service closed it while idle: nothing was answered
        conn = await self._open()
        try:
            return await self._exchange(conn, data)
        except BaseException:
            conn.close()
            raise

    async def _open(self) -> _Conn:
        parts = urlsplit(self.url)
        secure = parts.scheme == "https"
        context = ssl.create_default_context() if secure else None
        reader, writer = await asyncio.open_connection(
            parts.hostname, parts.port or (443 if secure else 80), ssl=context, limit=_LINE)
        return _Conn(reader, writer)

    async def _exchange(self, conn: _Conn, data: bytes) -> Reply:
        conn.writer.write(data)
        await conn.writer.drain()
        status = await conn.reader.readline()
        if not status:
            raise ConnectionResetError("closed before an answer")
        fields = status.split(b" ", 2)
        if len(fields) < 2 or not fields[0].startswith(b"HTTP/") or not fields[1].isdigit():
            raise HopError("the answer is not HTTP")
        headers: dict[str, str] = {}
        while (line := await conn.reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return Reply(int(fields[1]), headers, conn)

    def close(self) -> None:
        """Close the kept connections."""
        while self._idle:
            self._idle.pop().close()

