"""The key broker: provider keys live only in the server; kernels hold a broker token."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

from jupyter_ci import providers
from jupyter_ci.models.broker import (
    ENV_HOSTS,
    ENV_MODEL,
    ENV_PROVIDERS,
    ENV_SOCKET,
    ENV_TOKEN,
    ENV_URL,
    encode_hosts,
)
from jupyter_ci.providers import ProviderSpec

#: Route of the broker under the server's base_url; kernels append `/<provider>`.
BROKER_ROUTE = "jupyter-ci/broker"

# Never forwarded upstream: credentials (ours are replaced), Jupyter's cookies and XSRF
# token, and hop-by-hop headers that belong to the kernel-to-server connection only.
_DROPPED_REQUEST_HEADERS = frozenset(
    {
        "authorization", "x-api-key", "cookie", "x-xsrftoken", "host", "content-length",
        "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
        "proxy-authorization", "proxy-connection", "accept-encoding", "origin", "referer",
    }
)
# Returned to the kernel: what the SDKs read (type, retry hints, request ids). Upstream
# cookies and encodings stay out, since the body is relayed decoded on Jupyter's origin.
_KEPT_RESPONSE_HEADERS = frozenset(
    {"content-type", "retry-after", "retry-after-ms", "x-should-retry", "request-id",
     "x-request-id"}
)
_KEPT_RESPONSE_PREFIXES = ("openai-", "anthropic-", "x-ratelimit-")


class BrokerError(Exception):
    """A broker request that cannot be forwarded; `status` is the HTTP status to answer."""

    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(BrokerError):
    """The request cannot be forwarded as it is."""

    status = 400


class BadBrokerToken(BrokerError):
    """The request did not carry this server's broker token."""

    status = 403


class UnknownProvider(BrokerError):
    """The route names a provider the broker does not serve."""

    status = 404


class NoProviderKey(BrokerError):
    """The server was started without a key or URL for this provider."""

    status = 401


class UpstreamUnreachable(BrokerError):
    """The provider could not be reached at all."""

    status = 502


class UpstreamTimeout(BrokerError):
    """The provider stopped answering for longer than the read timeout."""

    status = 504


@dataclass(frozen=True)
class Provider:
    """One model provider as the server was started with it."""

    spec: ProviderSpec
    base_url: str
    api_key: str = field(default="", repr=False)
    explicit_url: bool = False

    @property
    def name(self) -> str:
        """Return the provider's name in the table."""
        return self.spec.name

    @property
    def configured(self) -> bool:
        """Say whether requests can be forwarded (a key, or a keyless server's URL)."""
        return bool(self.api_key) or self.explicit_url

    def auth_headers(self) -> dict[str, str]:
        """Return the real credential header; none for a keyless local server."""
        if not self.api_key:
            return {}
        if self.spec.auth == "x-api-key":
            return {"x-api-key": self.api_key}
        return {"Authorization": f"Bearer {self.api_key}"}

    def url_for(self, path: str, query: str) -> str:
        """Join the provider's base URL and the SDK's path, staying on the provider's host."""
        url = f"{self.base_url.rstrip('/')}/{quote(path.lstrip('/'), safe='/:@!$&()*+,;=-._~')}"
        base, target = urlsplit(self.base_url), urlsplit(url)
        # The key must only ever travel to the configured host.
        if (target.scheme, target.netloc) != (base.scheme, base.netloc):
            raise BadRequest(f"Path {path!r} leaves {self.name}'s base URL.")
        return f"{url}?{query}" if query else url


@dataclass(frozen=True)
class Outgoing:
    """A request ready to send upstream."""

    method: str
    url: str
    headers: dict[str, str] = field(repr=False)
    body: bytes = field(default=b"", repr=False)


@dataclass
class Broker:
    """Provider credentials held in server memory and the token kernels use instead."""

    providers: dict[str, Provider]
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)

    @classmethod
    def take_from_environ(
        cls, environ: MutableMapping[str, str], stored: Mapping[str, str] | None = None
    ) -> Broker:
        """Move provider keys and URLs out of `environ`; fall back on `stored` (key file)."""
        found, stored = {}, stored or {}
        for spec in providers.configurable():
            key = environ.pop(spec.key_var, "").strip() or stored.get(spec.key_var, "")
            url = environ.pop(spec.url_var, "").strip() or stored.get(spec.url_var, "")
            found[spec.name] = Provider(spec, url or spec.default_url, key, bool(url))
        return cls(found)

    def misconfigured(self) -> list[str]:
        """Describe base URLs that cannot work (no http:// or https://), for the log."""
        return [
            f"{p.spec.url_var} must start with http:// or https:// (got {p.base_url!r})"
            for p in self.providers.values()
            if p.explicit_url and urlsplit(p.base_url).scheme not in ("http", "https")
        ]

    def configured(self) -> list[Provider]:
        """List the providers requests can be forwarded to, in preference order."""
        return [p for p in self.providers.values() if p.configured]

    def authenticate(self, presented: str) -> None:
        """Raise BadBrokerToken unless `presented` is this broker's token."""
        # Constant-time: the kernel-facing port must not leak the token byte by byte.
        if not presented or not hmac.compare_digest(presented.encode(), self.token.encode()):
            raise BadBrokerToken(
                "This request does not carry the jupyter-ci broker token of this server. "
                f"Restart the kernel so it gets the current {ENV_TOKEN}."
            )

    def provider(self, name: str) -> Provider:
        """Return a provider that can take requests, or raise why it cannot."""
        found = self.providers.get(name)
        if found is None:
            raise UnknownProvider(
                f"Unknown provider {name!r}; the broker serves {', '.join(self.providers)}."
            )
        if not found.configured:
            raise NoProviderKey(
                f"The Jupyter server has no key for {name}. Set {found.spec.key_var} in the "
                "environment that starts JupyterLab (or Jupyter Server), then restart it."
            )
        return found

    def outgoing(
        self, name: str, path: str, query: str, method: str, headers: Mapping[str, str],
        body: bytes,
    ) -> Outgoing:
        """Turn an authenticated kernel request into the one sent to the provider."""
        provider = self.provider(name)
        kept = {k: v for k, v in headers.items() if k.lower() not in _DROPPED_REQUEST_HEADERS}
        kept.update(provider.auth_headers())
        return Outgoing(method, provider.url_for(path, query), kept, body)

    def kernel_environ(self, url: str | None, socket: str = "", model: str = "") -> dict[str, str]:
        """Return the variables new kernels need to reach the models through the broker."""
        env = {
            ENV_TOKEN: self.token,
            ENV_PROVIDERS: ",".join(p.name for p in self.configured()),
        }
        if url:
            env[ENV_URL] = url
        hosts = {p.name: urlsplit(p.base_url).hostname or "" for p in self.configured()}
        if hosts:
            env[ENV_HOSTS] = encode_hosts(hosts)
        if socket:
            env[ENV_SOCKET] = socket
        if model:
            env[ENV_MODEL] = model
        return env


def presented_token(headers: Mapping[str, str]) -> str:
    """Find the broker token where the SDKs put their key: bearer auth or x-api-key."""
    scheme, _, value = headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return headers.get("x-api-key", "").strip()


def keep_response_header(name: str) -> bool:
    """Say whether an upstream response header is relayed to the kernel."""
    lower = name.lower()
    return lower in _KEPT_RESPONSE_HEADERS or lower.startswith(_KEPT_RESPONSE_PREFIXES)


def broker_url(scheme: str, ip: str, port: int, base_url: str) -> str:
    """Build the URL a kernel on this machine uses to reach the broker."""
    return f"{scheme}://{_local_host(ip)}:{port}{base_url.rstrip('/')}/{BROKER_ROUTE}"


def _local_host(ip: str) -> str:
    """Pick the address a local kernel connects to for a server bound to `ip`."""
    if ip in ("", "0.0.0.0", "localhost", "127.0.0.1"):
        return "127.0.0.1"
    if ip in ("::", "::1"):
        # Tornado binds IPv6 sockets v6-only, so "::" is not reachable at 127.0.0.1.
        return "[::1]"
    return f"[{ip}]" if ":" in ip else ip
