"""Send one broker request upstream and stream the answer back as it arrives."""

from __future__ import annotations

from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from jupyter_ci.server.allowlist import keep_response_header
from jupyter_ci.server.broker import Outgoing
from jupyter_ci.server.errors import UpstreamTimeout, UpstreamUnreachable
from jupyter_ci.server.usage import UsageMeter

if TYPE_CHECKING:
    import httpx

#: Seconds to wait for the provider to accept the connection.
CONNECT_TIMEOUT = 30.0
#: Idle connections kept open to providers for the next request.
KEEP_ALIVE = 32
# What failed, by httpx exception class name, in our words: the exceptions' own text may
# hold the URL, headers or the key, so it is never shown.
_FAILURES = {
    "ConnectError": "the connection failed",
    "ProxyError": "the proxy refused the connection",
    "RemoteProtocolError": "it did not answer in HTTP",
    "LocalProtocolError": "the request could not be encoded",
    "ReadError": "reading the answer failed",
    "WriteError": "sending the request failed",
    "UnsupportedProtocol": "the base URL's scheme is not http or https",
    "InvalidURL": "the base URL is not valid",
}


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
    # No cap on connections: each kernel's stream holds one for its whole reply, and httpcore
    # matches every queued request against every connection at each change (quadratic),
    # which held the server's event loop for 100+ ms with 200 streams past the default 100.
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=KEEP_ALIVE)
    return httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=True,
                             cookies=no_cookies(), limits=limits)


def no_cookies() -> CookieJar:
    """Return a cookie jar that stores nothing, whatever a provider sets."""
    # The client is shared by every kernel and provider: a stored cookie would ride along
    # on the next kernel's request, to whichever provider's domain it matches.
    return CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))


async def relay(
    client: httpx.AsyncClient, out: Outgoing, sink: Sink, meter: UsageMeter | None = None
) -> None:
    """Forward `out` and stream the response into `sink` (and `meter`), chunk by chunk."""
    import httpx

    meter = meter or UsageMeter()
    started = False
    try:
        async with client.stream(
            out.method, out.url, headers=out.headers, content=out.body or None
        ) as response:
            headers = [(k, v) for k, v in response.headers.items() if keep_response_header(k)]
            meter.start(response.status_code, response.headers.get("content-type", ""))
            sink.start(response.status_code, headers)
            started = True
            # aiter_bytes decodes any gzip from upstream; the kernel gets plain bytes.
            async for chunk in response.aiter_bytes():
                meter.feed(chunk)
                await sink.send(chunk)
    except httpx.TimeoutException:
        raise UpstreamTimeout(
            f"The jupyter-ci broker got no answer from {_where(out.url)} in time."
        ) from None
    except Exception as err:
        # Any failure, httpx's or below it (anyio wraps a bad port in an ExceptionGroup),
        # is told by its class: the exception's text may quote the URL or headers.
        what = "lost the connection to" if started else "could not reach"
        why = why_failed(err)
        raise UpstreamUnreachable(
            f"The jupyter-ci broker {what} {_where(out.url)}: {why}.") from None


def why_failed(err: BaseException) -> str:
    """Say why a request failed, by the exception's class only (its text may hold the URL)."""
    name = type(err).__name__
    return _FAILURES.get(name, f"the request failed ({name})")


def _where(url: str) -> str:
    """Shorten a URL to scheme, host and path for messages (no userinfo, no query)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a malformed port in the configured base URL
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}"
