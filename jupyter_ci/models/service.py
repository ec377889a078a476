"""The kernel's model under Jupyter Server: a small client of the server's model service.

It sends the server our own request for one turn (turn_wire.py) with the kernel's
credential and reads the reply as it streams, with the standard library only: no provider
SDK loads in a kernel under a server, so the first ask costs what the later ones do. The
server holds the keys, builds the provider's request, retries and meters. An interrupt of
the kernel closes the connection, and the server cancels the provider's stream.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from urllib.parse import SplitResult, urlsplit

from jupyter_ci.agent.errors import BadModelReply, ModelConfigError, ModelUnavailable
from jupyter_ci.agent.types import ModelReply, ModelRequest, OnText
from jupyter_ci.models.base import Endpoint
from jupyter_ci.models.broker import ENV_URL
from jupyter_ci.models.turn_wire import (
    NDJSON,
    TURN_PATH,
    ReplyReader,
    read_error,
    request_json,
)
from jupyter_ci.providers import ProviderSpec

#: Seconds the server may take beyond its own provider timeout and retries to say something.
GRACE_S = 30.0


class ServiceModel:
    """A `provider:model` the kernel reaches through the server's model service."""

    def __init__(self, spec: ProviderSpec, name: str, endpoint: Endpoint) -> None:
        self.spec = spec
        self.name = name
        self.endpoint = endpoint

    @property
    def id(self) -> str:
        """Return the `provider:model` id."""
        return f"{self.spec.name}:{self.name}"

    @property
    def sees_images(self) -> bool:
        """Tell whether this model takes images, as its provider's table says of its name."""
        return self.spec.sees_images(self.name)

    def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        """Stream one turn from the server, calling `on_text` with text as it arrives."""
        body = json.dumps(request_json(self.id, request)).encode()
        url = urlsplit(f"{(self.endpoint.base_url or '').rstrip('/')}/{TURN_PATH}")
        # The server answers within its own timeout per attempt; more means it is stuck.
        wait = self.endpoint.timeout * (self.endpoint.max_retries + 1) + GRACE_S
        conn = connection(url.scheme, url.hostname or "", url.port, self.endpoint.socket, wait)
        try:
            try:
                conn.request("POST", url.path, body, {
                    "Authorization": f"Bearer {self.endpoint.api_key}",
                    "Content-Type": "application/json"})
                response = conn.getresponse()
            except (OSError, http.client.HTTPException) as err:
                raise ModelUnavailable(
                    f"Could not reach the Jupyter server's model service at {_where(url)} "
                    f"({type(err).__name__}).",
                    "Is the Jupyter server still running? Restart the kernel if the server "
                    "was restarted.") from None
            if response.status != 200:
                raise _refusal(response)
            if _media_type(response) != NDJSON:
                raise _not_a_reply(response, url)
            reader = ReplyReader(on_text, request.on_tool_input)
            return _read(response, reader)
        finally:
            # Also on KeyboardInterrupt: the server sees the hang-up and stops the provider.
            conn.close()


def _read(response: http.client.HTTPResponse, reader: ReplyReader) -> ModelReply:
    """Read event lines until the reply (or an error) ends the stream."""
    try:
        while raw := response.readline():
            reply = reader.feed(raw)
            if reply is not None:
                return reply
    except (OSError, http.client.HTTPException) as err:
        raise ModelUnavailable(
            f"The connection to the Jupyter server's model service broke ({type(err).__name__}).",
            "Try again; the server log may say more.") from None
    raise ModelUnavailable("The Jupyter server's model service ended the reply early.",
                           "Try again; the server log may say more.")


def _refusal(response: http.client.HTTPResponse) -> Exception:
    """Turn a non-200 answer into the ask error its body names."""
    try:
        data = json.loads(response.read(1 << 16))
    except (ValueError, OSError, http.client.HTTPException):
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return read_error(error)
    if response.status in (401, 403):
        return ModelConfigError(
            "The Jupyter server refused this kernel's model credential.",
            "Restart the kernel so it gets a current one.")
    return ModelUnavailable(f"The Jupyter server's model service answered HTTP "
                            f"{response.status}.", "The server log may say more.")


def _media_type(response: http.client.HTTPResponse) -> str:
    """Return the answer's media type, without parameters."""
    return (response.getheader("Content-Type") or "").partition(";")[0].strip().lower()


def _not_a_reply(response: http.client.HTTPResponse, url: SplitResult) -> BadModelReply:
    """Say what answered in the service's place (a proxy in front of the server, say)."""
    try:
        head = response.read(512)
    except (OSError, http.client.HTTPException):
        head = b""
    text = " ".join(head.decode("utf-8", "replace").split())
    shown = text[:160] + ("…" if len(text) > 160 else "")
    return BadModelReply(
        f"The Jupyter server's model service at {_where(url)} answered HTTP 200 with "
        f"{_media_type(response) or 'no content type'}, not its reply stream ({NDJSON}): "
        f"'{shown}'.",
        f"Something else answered at {ENV_URL} (a proxy in front of the Jupyter server?); "
        "check the server's address, then restart the kernel.")


def connection(scheme: str, host: str, port: int | None, unix_path: str | None,
                timeout: float) -> http.client.HTTPConnection:
    """Open a connection to the server: its Unix socket when given, else host and port,
    through the proxy the environment names for it (a box whose network is an allowlist
    reaches a remote server that way)."""
    if unix_path:
        return _UnixConnection(unix_path, timeout)
    port = port or (443 if scheme == "https" else 80)
    proxy = _proxy_for(scheme, host)
    conn: http.client.HTTPConnection
    if scheme == "https":
        conn = http.client.HTTPSConnection(*(proxy or (host, port)), timeout=timeout)
    else:
        conn = http.client.HTTPConnection(*(proxy or (host, port)), timeout=timeout)
    if proxy is not None:
        conn.set_tunnel(host, port)  # CONNECT: the proxy sees the host, never the request
    return conn


_PROXY_VARIABLES = frozenset({"http_proxy", "https_proxy", "all_proxy"})


def _proxy_for(scheme: str, host: str) -> tuple[str, int] | None:
    """Return the proxy's host and port for `scheme://host`, as HTTP(S)_PROXY and NO_PROXY say."""
    if not any(name.lower() in _PROXY_VARIABLES for name in os.environ):
        return None  # the usual case, without loading urllib.request
    import urllib.request

    proxies = urllib.request.getproxies()
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return (parts.hostname or "", parts.port or 80) if parts.hostname else None


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (a server started with --sock, or a box's broker socket)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        """Connect to the socket instead of a host and port."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.unix_path)
        self.sock = sock


def _where(url: SplitResult) -> str:
    """Show the service URL for messages (it carries no credential)."""
    return f"{url.scheme}://{url.netloc}{url.path}"
