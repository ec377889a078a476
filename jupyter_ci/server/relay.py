"""Send one broker request upstream and stream the answer back as it arrives."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from jupyter_ci.server.broker import (
    Outgoing,
    UpstreamTimeout,
    UpstreamUnreachable,
    keep_response_header,
)

if TYPE_CHECKING:
    import httpx

#: Seconds to wait for the provider to accept the connection.
CONNECT_TIMEOUT = 30.0


class Sink(Protocol):
    """Where the relayed response goes (the broker handler)."""

    def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        """Set the status and headers before the first body chunk."""
        ...

    async def send(self, chunk: bytes) -> None:
        """Write one chunk and flush it to the kernel."""
        ...


def make_client(read_timeout: float) -> httpx.AsyncClient:
    """Create the pooled client the broker sends upstream requests with."""
    # httpx (already a dependency of both SDKs) honours HTTPS_PROXY/NO_PROXY like the SDKs
    # would in the kernel; imported here so the module loads without it.
    import httpx

    timeout = httpx.Timeout(read_timeout, connect=min(CONNECT_TIMEOUT, read_timeout))
    return httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=True)


async def relay(client: httpx.AsyncClient, out: Outgoing, sink: Sink) -> None:
    """Forward `out` and stream the response into `sink`, chunk by chunk."""
    import httpx

    started = False
    try:
        async with client.stream(
            out.method, out.url, headers=out.headers, content=out.body or None
        ) as response:
            headers = [(k, v) for k, v in response.headers.items() if keep_response_header(k)]
            sink.start(response.status_code, headers)
            started = True
            # aiter_bytes decodes any gzip from upstream; the kernel gets plain bytes.
            async for chunk in response.aiter_bytes():
                await sink.send(chunk)
    except httpx.TimeoutException as err:
        raise UpstreamTimeout(
            f"The jupyter-ci broker got no answer from {_where(out.url)} in time "
            f"({type(err).__name__})."
        ) from None
    except (httpx.TransportError, httpx.InvalidURL) as err:
        what = "lost the connection to" if started else "could not reach"
        raise UpstreamUnreachable(
            f"The jupyter-ci broker {what} {_where(out.url)}: {type(err).__name__}: {err}"
        ) from None


def _where(url: str) -> str:
    """Shorten a URL to scheme, host and path for messages (no userinfo, no query)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}{_port(parts.port)}{parts.path}"


def _port(port: int | None) -> str:
    """Format an explicit port for a URL, or nothing."""
    return f":{port}" if port else ""
