"""A user's server under JupyterHub: no provider key here; each turn goes to the Hub service.

When the Hub's jupyter-ci service is configured (jupyter_ci.hub.configure), every user's
server is started with its URL (JUPYTER_CI_HUB_URL, or c.JupyterCI.hub_url) beside the
server's own Hub token (JUPYTERHUB_API_TOKEN, which holds the scope to call it as the user).
Then the model service holds no key (any found in the environment, key file or keyring is
dropped, and the panel takes none): its adapter for every model is `HubModel`, which sends
the turn, unchanged, to the Hub service and streams its reply back, so kernels and REST asks
work as on a single server and the Hub judges and charges each turn by the user's policy.
The server reads that policy at its start and every few minutes, and applies what only it
can: the approval floor and the boxing of REST sessions (apply_policy).
"""

from __future__ import annotations

import asyncio
import http.client
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from jupyter_ci import providers
from jupyter_ci.agent.approval import stricter
from jupyter_ci.agent.errors import ModelUnavailable
from jupyter_ci.agent.types import ModelReply, ModelRequest, OnText
from jupyter_ci.config import ServerSettings
from jupyter_ci.models.base import UrlSetting, Usage
from jupyter_ci.models.service import connection
from jupyter_ci.models.turn_wire import NDJSON, TURN_PATH, ReplyReader, read_error, request_json
from jupyter_ci.server.broker.broker import Broker, Provider
from jupyter_ci.server.broker.hub_http import HopClient, HopError
from jupyter_ci.wire.codec import WireError, decode, encode
from jupyter_ci.wire.hub import ENV_HUB_URL, POLICY_PATH, UserPolicy

#: The server's own Hub token, which kernels do not get under the Hub service (with it,
#: code in a kernel could call the service as the user, past the kernel's own budget).
HUB_TOKENS = frozenset({"JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN"})
#: What the server applies while it cannot read the policy: the strictest; every provider
#: offered, so that an ask says the service cannot be reached, not that no key is set.
UNREAD = UserPolicy(user="", models=(), approval_minimum="each", boxed=True,
                    providers=tuple(spec.name for spec in providers.configurable()))
_SHOWN = 300


class HubLinkError(Exception):
    """The Hub service could not be read; the message says why, never the token."""


@dataclass(frozen=True)
class HubLink:
    """Where the Hub service is, and the token this server calls it with."""

    url: str
    token: str = field(repr=False)

    @classmethod
    def find(cls, setting: str, env: Mapping[str, str]) -> HubLink | None:
        """Return the link when the server runs under a Hub with the service, else None."""
        url = (setting or env.get(ENV_HUB_URL, "")).strip()
        token = env.get("JUPYTERHUB_API_TOKEN", "").strip()
        if not url or not token:
            return None
        return cls(url if url.endswith("/") else f"{url}/", token)

    def headers(self) -> dict[str, str]:
        """Return the headers that authenticate this server's calls as its user."""
        return {"Authorization": f"token {self.token}"}

    def read_policy(self, timeout: float = 10.0) -> UserPolicy:
        """GET the user's policy (blocking: at the server's start), or raise HubLinkError."""
        url = urlsplit(f"{self.url}{POLICY_PATH}")
        conn = connection(url.scheme, url.hostname or "", url.port, None, timeout)
        try:
            conn.request("GET", url.path, headers=self.headers())
            reply = conn.getresponse()
            body = reply.read(1 << 20)
        except (OSError, http.client.HTTPException) as err:
            raise HubLinkError(f"the jupyter-ci Hub service at {self.url} did not answer "
                               f"({type(err).__name__})") from None
        finally:
            conn.close()
        return read_user_policy(reply.status, body, self.url)


def read_user_policy(status: int, body: bytes, where: str) -> UserPolicy:
    """Read the service's answer to GET policy, or raise HubLinkError saying what it was."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if status != 200:
        said = data.get("message") if isinstance(data, dict) else None
        raise HubLinkError(f"the jupyter-ci Hub service at {where} answered HTTP {status}"
                           + (f": {str(said)[:_SHOWN]}" if said else ""))
    try:
        return decode(UserPolicy, data, lenient=True)
    except WireError as err:
        raise HubLinkError(f"the jupyter-ci Hub service at {where} sent a policy this "
                           f"server cannot read ({err})") from None


@dataclass
class Applied:
    """The settings a policy changes, as the server's own config had them."""

    approval_minimum: str
    session_sandbox: str


def apply_policy(ci: ServerSettings, policy: UserPolicy, own: Applied) -> list[str]:
    """Set the server's settings by the user's policy; return what changed, in words.

    What the server's own config says stays the least: the policy only adds to it.
    """
    said = []
    floor = stricter(own.approval_minimum, policy.approval_minimum)
    if ci.approval_minimum != floor:
        ci.approval_minimum = floor
        said.append(f"approval_minimum = {floor!r}")
    sandbox = "always" if policy.boxed else own.session_sandbox
    if ci.session_sandbox != sandbox:
        ci.session_sandbox = sandbox
        said.append(f"session_sandbox = {sandbox!r}")
    return said


def start_with_policy(ci: ServerSettings, policy: UserPolicy) -> Broker:
    """Take the policy's prices and models; return a broker of the Hub's providers.

    Its providers hold no key: each "is reached" at the service's URL, so the panel, the
    kernels' environment and the resolver see what the Hub serves.
    """
    if policy.prices:
        # What the Hub charges is what the cost lines say.
        ci.prices = {key: encode(price) for key, price in policy.prices.items()}
    if not ci.model and policy.model:
        ci.model = policy.model
    exact = [m for m in policy.models if not any(c in m for c in "*?[")]
    if not ci.models and exact:
        ci.models = exact
    served = {}
    for name in policy.providers:
        spec = providers.get(name)
        if spec is not None and not spec.in_process:
            served[name] = Provider(spec, "", explicit_url=True,
                                    url_setting=UrlSetting("held by the JupyterHub", ""))
    return Broker(served, elsewhere="the JupyterHub's jupyter-ci service")


@dataclass
class HubUpstream:
    """Every model, reached through the Hub service as this server's user."""

    link: HubLink
    client: HopClient

    def model(self, model_id: str) -> HubModel:
        """Return the Hub service's model `model_id` (it judges whether the user may)."""
        return HubModel(model_id, self)

    def secrets(self) -> list[str]:
        """Return what REST asks redact besides provider keys: the server's Hub token."""
        return [self.link.token]


@dataclass
class HubModel:
    """One model of the Hub service: our turn sent on, its reply streamed back."""

    model_id: str
    upstream: HubUpstream

    @property
    def id(self) -> str:
        """Return the `provider:model` id."""
        return self.model_id

    @property
    def sees_images(self) -> bool:
        """Tell whether this model takes images, as its provider's table says of its name."""
        name, _, model = self.model_id.partition(":")
        spec = providers.get(name)
        return spec is not None and spec.sees_images(model)

    async def acomplete(self, request: ModelRequest, on_text: OnText,
                        usage: Usage | None = None) -> ModelReply:
        """Send the turn to the Hub service; stream its text and tool input back."""
        link = self.upstream.link
        body = json.dumps(request_json(self.model_id, request)).encode()
        headers = {**link.headers(), "Content-Type": "application/json"}
        try:
            async with self.upstream.client.request("POST", TURN_PATH, headers, body) as reply:
                if reply.status != 200:
                    raise _refusal(reply.status, await reply.read(), link.url)
                if reply.headers.get("content-type", "").partition(";")[0] != NDJSON:
                    raise ModelUnavailable(f"Something other than the jupyter-ci Hub "
                                           f"service answered at {link.url}.",
                                           "Ask your JupyterHub admin to check its URL.")
                reader, done = ReplyReader(on_text, request.on_tool_input), None
                async for line in reply.lines():  # to the body's end: the connection is kept
                    done = reader.feed(line) or done
            if done is not None:
                if usage is not None:
                    usage.set(done.input_tokens, done.output_tokens, done.cached_tokens)
                return done
        except (OSError, HopError, TimeoutError, asyncio.IncompleteReadError) as err:
            raise ModelUnavailable(f"Could not reach the JupyterHub's jupyter-ci service at "
                                   f"{link.url} ({type(err).__name__}).",
                                   "Try again; if it keeps failing, tell your JupyterHub "
                                   "admin.") from None
        raise ModelUnavailable("The JupyterHub's jupyter-ci service ended the reply early.",
                               "Try again.")


def _refusal(status: int, body: bytes, where: str) -> Exception:
    """Turn the service's refusal into the ask error its body names."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return read_error(error)
    said = data.get("message") if isinstance(data, dict) else None
    return ModelUnavailable(f"The JupyterHub's jupyter-ci service at {where} answered HTTP "
                            f"{status}" + (f": {str(said)[:_SHOWN]}" if said else "."),
                            "Tell your JupyterHub admin.")


def hub_client(link: HubLink, timeout: float, retries: int) -> HopClient:
    """Return the client turns go to the Hub service with (it retries; we do not)."""
    return HopClient(link.url, timeout * (retries + 1) + 30.0)  # its attempts, then some
