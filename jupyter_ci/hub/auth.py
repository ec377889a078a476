"""Who calls the Hub service: JupyterHub's own tokens, scopes, and the users' groups.

A request carries a JupyterHub token (a user's server's JUPYTERHUB_API_TOKEN, or any token
the user made) in its Authorization header; the Hub says whose it is and with which scopes
(HubAuth, cached a minute). The caller must be a user, not a service, and hold
access:services!service=<this service> (the Hub sets JUPYTERHUB_OAUTH_ACCESS_SCOPES for
it). The user's groups and admin flag are read with the service's own token (its role:
read:users:name and read:users:groups), never taken from the request, whose body names
no user at all: a forged body cannot move a turn onto someone else's budget.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote

from tornado.httputil import HTTPServerRequest

from jupyter_ci.hub.meter import HubMeter
from jupyter_ci.server.broker.errors import BrokerError

if TYPE_CHECKING:
    import httpx
    from jupyterhub.services.auth import HubAuth


class NotAllowed(BrokerError):
    """A request without a token of a user allowed to use this service."""

    status = 403


class HubUnavailable(BrokerError):
    """The Hub's API did not answer the service."""

    status = 503


@dataclass(frozen=True)
class Member:
    """A user as the Hub describes them to the service."""

    name: str
    groups: list[str]
    admin: bool


def presented(headers: Mapping[str, str]) -> str:
    """Return the token of an `Authorization: token <t>` (or `Bearer <t>`) header."""
    scheme, _, value = headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme.lower() in ("token", "bearer") else ""


@dataclass
class Directory:
    """The Hub's users as the service may read them, each kept `ttl` seconds."""

    auth: HubAuth
    client: httpx.AsyncClient
    #: Seconds a user's groups and admin flag are kept.
    ttl: float = 60.0
    _members: dict[str, tuple[float, Member]] = field(default_factory=dict)

    async def member(self, name: str) -> Member:
        """Return `name`'s groups and admin flag, asking the Hub at most once a minute."""
        now = time.monotonic()
        kept = self._members.get(name)
        if kept is not None and now - kept[0] < self.ttl:
            return kept[1]
        url = f"{self.auth.api_url.rstrip('/')}/users/{quote(name, safe='')}"
        try:
            reply = await self.client.get(url, headers={
                "Authorization": f"token {self.auth.api_token}"})
        except Exception as err:  # httpx's errors: told by class (the text may hold URLs)
            raise HubUnavailable(f"The JupyterHub API did not answer the jupyter-ci service "
                                 f"({type(err).__name__}).") from None
        if reply.status_code != 200:
            raise HubUnavailable(
                f"The JupyterHub API answered HTTP {reply.status_code} when the jupyter-ci "
                "service asked for a user's groups: does its role grant read:users:name and "
                "read:users:groups (jupyter_ci.hub.configure gives it them)?")
        data = reply.json()
        member = Member(name, [g for g in data.get("groups") or [] if isinstance(g, str)],
                        data.get("admin") is True)
        self._members[name] = (now, member)
        return member


@dataclass
class HubGate:
    """The Hub service's gate to a turn: the caller's user, entered in the meter."""

    auth: HubAuth
    directory: Directory
    meter: HubMeter

    async def holder(self, request: HTTPServerRequest) -> str:
        """Return the user whose token the request carries, their rules and counts ready."""
        member = await self.caller(request.headers)
        await self.meter.enter(member.name, member.groups, time.monotonic())
        return member.name

    async def caller(self, headers: Mapping[str, str]) -> Member:
        """Return the user whose token `headers` carry, or raise NotAllowed."""
        token = presented(headers)
        if not token:
            raise NotAllowed("The jupyter-ci Hub service takes a JupyterHub token "
                             "(Authorization: token <token>), and this request has none.")
        model = await self.user_for(token)
        return await self.check(model)

    async def user_for(self, token: str) -> dict[str, Any] | None:
        """Ask the Hub whose token this is (HubAuth keeps the answer a minute)."""
        try:
            found = await self.auth.user_for_token(token, sync=False)
        except Exception as err:  # tornado's HTTPError from HubAuth, or the connection's
            raise HubUnavailable(f"The JupyterHub API could not check the token "
                                 f"({type(err).__name__}).") from None
        return cast(dict[str, Any] | None, found)

    async def check(self, model: Mapping[str, Any] | None) -> Member:
        """Return the member a Hub user model names if it may use the service."""
        if not model:
            raise NotAllowed("JupyterHub does not know this token (expired or revoked?).")
        if model.get("kind", "user") != "user":
            raise NotAllowed(f"{model.get('name')!r} is a JupyterHub {model.get('kind')}, not "
                             "a user: the jupyter-ci service charges users' turns only.")
        needed = self.auth.access_scopes
        if needed and not self.auth.check_scopes(needed, model):
            raise NotAllowed(
                f"This token of {model.get('name')!r} lacks the scope to use the jupyter-ci "
                f"service ({' or '.join(sorted(needed))}); a user's server gets it from "
                "c.Spawner.server_token_scopes (jupyter_ci.hub.configure sets it).")
        return await self.directory.member(str(model["name"]))


def hub_client(auth: HubAuth) -> httpx.AsyncClient:
    """Return the client the service asks the Hub's API with (its TLS, if it has some)."""
    import httpx

    from jupyter_ci.server.broker.upstream import no_cookies

    return httpx.AsyncClient(timeout=httpx.Timeout(10.0), verify=tls_context(auth),
                             follow_redirects=False, trust_env=False, cookies=no_cookies())


def tls_context(auth: HubAuth) -> ssl.SSLContext | bool:
    """Return the TLS context for the Hub's API when it uses internal TLS, else True."""
    if not (auth.certfile or auth.keyfile):
        return True
    context = ssl.create_default_context(cafile=auth.client_ca or None)
    context.load_cert_chain(auth.certfile, auth.keyfile or None)
    return context
