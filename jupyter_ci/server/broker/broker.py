"""The key broker: provider keys live only in the server; each kernel holds its own credential.

The model service (model_service.py) is the only user of the keys; the broker holds them,
issues and revokes kernels' credentials, and keeps the token budget.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

from jupyter_ci import providers
from jupyter_ci.models.base import UrlSetting
from jupyter_ci.models.broker import ENV_MODEL, ENV_PROVIDERS, ENV_SOCKET, ENV_TOKEN, ENV_URL
from jupyter_ci.providers import ProviderSpec
from jupyter_ci.server.broker.budget import Budgets
from jupyter_ci.server.broker.credentials import Credentials
from jupyter_ci.server.broker.errors import (
    BadBrokerToken,
    BadRequest,
    NoProviderKey,
    UnknownProvider,
)
from jupyter_ci.server.broker.model_code import ModelCodeKernels

#: Route of the broker under the server's base_url; kernels append `/<provider>`.
BROKER_ROUTE = "jupyter-ci/broker"

# A key the upstream HTTP library can send in a header: printable ASCII, no whitespace.
# Anything else (a pasted line break, a typographic dash) fails at the first request, and
# that failure's text would hold the key; so it is refused once, at start-up, by name.
_KEY = re.compile(r"[\x21-\x7e]+")


_IN_PANEL = "in the jupyter-ci panel (the Ask tab, Model keys)"


def url_setting_of(variable: str = "", key_file: str = "", panel: bool = False) -> UrlSetting:
    """Say where a base URL came from: an environment `variable`, a `key_file`, the panel.

    None of them: the provider's own URL, and where one would be set.
    """
    if panel:
        return UrlSetting(f"set {_IN_PANEL}", "there")
    if variable:
        return UrlSetting(f"set by {variable} in the Jupyter server's environment",
                          f"where JupyterLab starts and restart it, or {_IN_PANEL}")
    if key_file:
        return UrlSetting(f"read from the key file {key_file} (c.JupyterCI.key_file, where "
                          "the panel remembers keys)",
                          f"in that file and restart JupyterLab, or {_IN_PANEL}")
    return UrlSetting("", f"where JupyterLab starts and restart it, or {_IN_PANEL}")


@dataclass(frozen=True)
class Provider:
    """One model provider as the server was started with it."""

    spec: ProviderSpec
    base_url: str
    api_key: str = field(default="", repr=False)
    explicit_url: bool = False
    #: The key variable held a value that is not a usable key (see _KEY); never shown.
    bad_key: bool = False
    #: Why the URL variable's value is not a usable base URL (see check_base_url), or "".
    bad_url: str = ""
    #: Where base_url was set (environment, key file, panel), for errors when it fails.
    url_setting: UrlSetting = field(default_factory=url_setting_of)

    @property
    def name(self) -> str:
        """Return the provider's name in the table."""
        return self.spec.name

    @property
    def configured(self) -> bool:
        """Say whether requests can be forwarded (a key, or a keyless server's URL)."""
        return not (self.bad_key or self.bad_url) and (bool(self.api_key) or self.explicit_url)

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


@dataclass
class Broker:
    """Provider keys held in server memory, and the kernels' credentials and budgets."""

    providers: dict[str, Provider]
    credentials: Credentials = field(default_factory=Credentials)
    budget: Budgets = field(default_factory=Budgets)
    #: Kernels where model-written code ran since their start (model_code.py).
    model_code: ModelCodeKernels = field(default_factory=ModelCodeKernels)
    #: Who holds the keys when this server holds none (a JupyterHub service): the panel
    #: takes no key then. "" (a single server): the keys are here.
    elsewhere: str = ""

    @classmethod
    def take_from_environ(
        cls, environ: MutableMapping[str, str], stored: Mapping[str, str] | None = None,
        key_file: str = "",
    ) -> Broker:
        """Move provider keys and URLs out of `environ`; fall back on `stored` (`key_file`)."""
        found, stored = {}, stored or {}
        for spec in providers.configurable():
            key = environ.pop(spec.key_var, "").strip() or stored.get(spec.key_var, "")
            from_env = environ.pop(spec.url_var, "").strip()
            url = from_env or stored.get(spec.url_var, "")
            setting = (url_setting_of(variable=spec.url_var) if from_env
                       else url_setting_of(key_file=key_file or "of this server") if url
                       else url_setting_of())
            bad_key = bool(key) and not _KEY.fullmatch(key)
            bad_url = ""
            if url:
                try:
                    url = check_base_url(url, spec.url_var)
                except ValueError as err:
                    # Like a bad key: left unconfigured, said by name at start (never the value).
                    url, bad_url = "", str(err)
            found[spec.name] = Provider(spec, url or spec.default_url, "" if bad_key else key,
                                        bool(url), bad_key, bad_url, setting)
        return cls(found)

    def hold(self, provider: Provider) -> Provider:
        """Serve `provider` (a candidate) from now on, in place of its earlier key and URL."""
        self.providers[provider.name] = provider
        return provider

    def forget(self, name: str) -> Provider:
        """Drop a provider's key and URL (the panel's Remove): it is unconfigured from now."""
        spec = providers.get(name)
        if spec is None or spec.in_process:
            raise BadRequest(f"Unknown provider {name!r}; known: "
                             f"{', '.join(s.name for s in providers.configurable())}.")
        return self.hold(Provider(spec, spec.default_url))

    def candidate(self, name: str, key: str, base_url: str) -> Provider:
        """Return the provider a key and URL given at run time make, without holding it.

        Both at once, never one kept from before: a new URL with the old key would send
        that key to whoever asked for the URL. Raise BadRequest, naming no value, when
        they cannot work.
        """
        spec = providers.get(name)
        if spec is None or spec.in_process:
            raise BadRequest(f"Unknown provider {name!r}; known: "
                             f"{', '.join(s.name for s in providers.configurable())}.")
        key, base_url = key.strip(), base_url.strip()
        if key and not _KEY.fullmatch(key):
            raise BadRequest(f"That is not a usable {spec.label} key: it must be printable "
                             "ASCII with no spaces or line breaks inside.")
        if base_url:
            try:
                base_url = check_base_url(base_url)
            except ValueError as err:
                raise BadRequest(str(err)) from None
        if not key and not (base_url and spec.keyless_with_url):
            article = "an" if spec.label[:1].lower() in "aeiou" else "a"
            raise BadRequest(f"Paste {article} {spec.label} key"
                             + (" (or only a base URL for a local server that needs none)."
                                if spec.keyless_with_url else "."))
        return Provider(spec, base_url or spec.default_url, key, bool(base_url),
                        url_setting=url_setting_of(panel=bool(base_url)))

    def misconfigured(self) -> list[str]:
        """Describe keys and base URLs that cannot work, for the log (never a key)."""
        problems = [f"{p.bad_url} {p.spec.label} stays unconfigured until it is fixed and the "
                    "server restarted." for p in self.providers.values() if p.bad_url]
        problems += [
            f"{p.spec.key_var} is not a usable API key: it must be printable ASCII with no "
            f"spaces or line breaks inside (its value is not shown). {p.spec.label} stays "
            "unconfigured until it is fixed and the server restarted."
            for p in self.providers.values() if p.bad_key
        ]
        return problems

    def configured(self) -> list[Provider]:
        """List the providers requests can be forwarded to, in preference order."""
        return [p for p in self.providers.values() if p.configured]

    def issue(self, kernel_id: str) -> str:
        """Return a new token for a kernel being started or restarted; its old one dies."""
        self.model_code.forget(kernel_id)  # a new process, without what model code left
        self.budget.open(kernel_id)
        return self.credentials.issue(kernel_id)

    def revoke(self, kernel_id: str) -> None:
        """Invalidate the token of a kernel that is shutting down or dead."""
        self.model_code.forget(kernel_id)
        self.credentials.revoke(kernel_id)
        self.budget.close(kernel_id)

    def rebind(self, provisional: str, kernel_id: str) -> None:
        """Give the token issued under `provisional` to `kernel_id`, its id once started."""
        self.credentials.rebind(provisional, kernel_id)
        self.budget.rebind(provisional, kernel_id)

    def authenticate(self, presented: str) -> str:
        """Return the kernel whose live token `presented` is, or raise BadBrokerToken."""
        kernel_id = self.credentials.kernel_for(presented)
        if kernel_id is None:
            raise BadBrokerToken(
                "This request does not carry the jupyter-ci credential of a running kernel "
                f"of this server. Restart the kernel so it gets a current {ENV_TOKEN}."
            )
        return kernel_id

    def provider(self, name: str) -> Provider:
        """Return a provider that can take requests, or raise why it cannot."""
        found = self.providers.get(name)
        if found is None:
            raise UnknownProvider(
                f"Unknown provider {name!r}; the broker serves {', '.join(self.providers)}."
            )
        if found.bad_key or found.bad_url:
            what = (f"{found.spec.key_var} is not a usable key" if found.bad_key
                    else f"{found.spec.url_var} is not a usable base URL")
            raise NoProviderKey(
                f"The Jupyter server's {what} (see the server log). Fix it where JupyterLab "
                "(or Jupyter Server) starts, or in its key file, then restart it."
            )
        if not found.configured:
            raise NoProviderKey(
                f"The Jupyter server has no key for {name}. Set {found.spec.key_var} in the "
                "environment that starts JupyterLab (or Jupyter Server), then restart it."
            )
        return found

    def kernel_environ(self, url: str | None, socket: str = "", model: str = "") -> dict[str, str]:
        """Return the variables every kernel gets; its token comes with its own start."""
        env = {ENV_PROVIDERS: ",".join(p.name for p in self.configured())}
        if url:
            env[ENV_URL] = url
        if socket:
            env[ENV_SOCKET] = socket
        if model:
            env[ENV_MODEL] = model
        return env


def check_base_url(url: str, name: str = "The base URL") -> str:
    """Return `url` if it is a plain http(s)://host[:port][/path], else raise ValueError.

    The message begins with `name` and says what is wrong, never quoting the URL (a
    pasted one may hold a key). Checked before urlsplit, which drops tabs and line breaks.
    """
    odd = next((c for c in url if unicodedata.category(c)[0] in "CZ"), None)
    if odd is not None:
        # Z*: spaces and line/paragraph separators; C*: controls, format characters (zero
        # width, bidi), surrogates. A key file line split on one once became two variables.
        raise ValueError(f"{name} holds a space, control or invisible character "
                         f"(U+{ord(odd):04X}); type it again as plain text.")
    try:
        parts = urlsplit(url)
    except ValueError:  # "Invalid IPv6 URL": a "[" or "]" without its pair
        raise ValueError(f"{name} is not a valid URL (an IPv6 address goes in [ ]).") from None
    try:
        port = parts.port
    except ValueError:  # not a number, or outside 0-65535
        port = 0
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{name} must start with http:// or https://.")
    if "@" in parts.netloc:
        raise ValueError(f"{name} must not hold a user name or password (user:pw@); "
                         "the key goes in its own field or variable.")
    if "?" in url or "#" in url:
        raise ValueError(f"{name} must not have a query (?…) or fragment (#…).")
    if not _host_ok(parts.hostname or ""):
        raise ValueError(f"{name} has no valid host name or address.")
    if port == 0:
        raise ValueError(f"{name} has no valid port (1-65535).")
    return parts.geturl()


# A host name: letters (any script, for IDN), digits, "_", "." and "-"; nothing to smuggle.
_HOST = re.compile(r"[\w.-]+")


def _host_ok(host: str) -> bool:
    """Say whether `host` (as urlsplit gives it) is a name or an IP address."""
    if ":" in host:  # an IPv6 address, its brackets removed
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return False
        return True
    return bool(_HOST.fullmatch(host))


def presented_token(headers: Mapping[str, str]) -> str:
    """Find the broker token where the SDKs put their key: bearer auth or x-api-key."""
    scheme, _, value = headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return headers.get("x-api-key", "").strip()


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
