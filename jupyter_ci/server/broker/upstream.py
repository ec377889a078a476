"""The server's own HTTP client to providers (checking a pasted key), and its failures in words."""

from __future__ import annotations

from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

#: Seconds to wait for the provider to accept the connection.
CONNECT_TIMEOUT = 30.0
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


def make_client(read_timeout: float) -> httpx.AsyncClient:
    """Create the client the server checks pasted keys with."""
    # httpx (already a dependency of both SDKs) honours HTTPS_PROXY/NO_PROXY; imported here
    # so the module loads without it.
    import httpx

    timeout = httpx.Timeout(read_timeout, connect=min(CONNECT_TIMEOUT, read_timeout))
    return httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=True,
                             cookies=no_cookies())


def no_cookies() -> CookieJar:
    """Return a cookie jar that stores nothing, whatever a provider sets."""
    # The client is shared by every provider: a stored cookie would ride along on the next
    # check, to whichever provider's domain it matches.
    return CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))


def why_failed(err: BaseException) -> str:
    """Say why a request failed, by the exception's class only (its text may hold the URL)."""
    name = type(err).__name__
    return _FAILURES.get(name, f"the request failed ({name})")
