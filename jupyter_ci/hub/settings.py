"""What the Hub service is told: the Hub's variables, and those deploy.configure writes.

JupyterHub gives a managed service its URL, prefix and token in its environment; the
admin's policy, prices, database and key file come from `configure(c, ...)` in
jupyterhub_config.py, which writes them into the service's environment as the variables
below (JSON where structured), checked there first so that a mistake stops the Hub's start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jupyter_ci.agent.cost import PriceError, parse_prices
from jupyter_ci.hub.policy import Policy, PolicyError, read_policy
from jupyter_ci.models.broker import ENV_PRICES
from jupyter_ci.wire.hub import SERVICE_NAME, Price

#: The admin's policy (policy.py's form), as JSON.
ENV_POLICY = "JUPYTER_CI_HUB_POLICY"
#: The spending database's SQLAlchemy URL.
ENV_DB_URL = "JUPYTER_CI_HUB_DB_URL"
#: The model service's own settings (TUNABLE), as JSON.
ENV_SETTINGS = "JUPYTER_CI_HUB_SETTINGS"
#: A key file (server/broker/keys.py's forms) the service reads its provider keys from.
ENV_KEY_FILE = "JUPYTER_CI_KEY_FILE"
#: The database when no URL is given: in the working directory, as jupyterhub.sqlite is.
DEFAULT_DB_URL = "sqlite:///jupyter_ci_hub.sqlite"
#: The model service's settings an admin may set (c.JupyterCI's, with its defaults), and
#: users_ttl: seconds a user's groups and admin flag are kept before the Hub is asked again.
TUNABLE: dict[str, type] = {"request_timeout": float, "retries": int,
                            "max_reply_tokens": int, "broker_max_body_bytes": int,
                            "users_ttl": float}


class SettingsError(ValueError):
    """A setting of the Hub service that cannot be used; the message names it."""


@dataclass(frozen=True)
class HubSettings:
    """Everything the service reads at its start."""

    url: str
    prefix: str = f"/services/{SERVICE_NAME}/"
    policy: Policy = field(default_factory=Policy)
    #: The admin's price table, as c.JupyterCI.prices takes it (checked).
    prices: dict[str, Price] = field(default_factory=dict)
    db_url: str = DEFAULT_DB_URL
    key_file: str = ""
    request_timeout: float = 120.0
    retries: int = 3
    max_reply_tokens: int = 4096
    max_body_bytes: int = 32 * 1024 * 1024
    users_ttl: float = 60.0

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> HubSettings:
        """Read the settings the Hub and configure() put in the environment."""
        url = env.get("JUPYTERHUB_SERVICE_URL", "")
        if not url:
            raise SettingsError("JUPYTERHUB_SERVICE_URL is not set: the jupyter-ci Hub "
                                "service is started by JupyterHub (c.JupyterHub.services, "
                                "see jupyter_ci.hub.configure), with a url.")
        tuned = check_tunable(_json(env, ENV_SETTINGS, {}))
        prefix = env.get("JUPYTERHUB_SERVICE_PREFIX") or f"/services/{SERVICE_NAME}/"
        return cls(url, prefix if prefix.endswith("/") else f"{prefix}/",
                   check_policy(_json(env, ENV_POLICY, None)),
                   check_prices(_json(env, ENV_PRICES, {})),
                   env.get(ENV_DB_URL) or DEFAULT_DB_URL, env.get(ENV_KEY_FILE, ""),
                   float(tuned.get("request_timeout", 120.0)), int(tuned.get("retries", 3)),
                   int(tuned.get("max_reply_tokens", 4096)),
                   int(tuned.get("broker_max_body_bytes", 32 * 1024 * 1024)),
                   float(tuned.get("users_ttl", 60.0)))


def check_policy(data: object) -> Policy:
    """Read the policy, or raise SettingsError saying what is wrong."""
    try:
        return read_policy(data)
    except PolicyError as err:
        raise SettingsError(str(err)) from None


def check_prices(data: object) -> dict[str, Price]:
    """Read a price table (c.JupyterCI.prices' form), or raise SettingsError."""
    if not isinstance(data, Mapping):
        raise SettingsError("The jupyter-ci prices must be a dict of model id -> prices.")
    try:
        rates = parse_prices(data)
    except PriceError as err:
        raise SettingsError(str(err)) from None
    return {key: Price(r.input, r.output, r.cached_input, r.context_window)
            for key, r in rates.items()}


def check_tunable(data: object) -> dict[str, Any]:
    """Check the model service's settings, or raise SettingsError naming the bad one."""
    if not isinstance(data, Mapping):
        raise SettingsError("The jupyter-ci Hub service's settings must be a dict.")
    for name, value in data.items():
        kind = TUNABLE.get(name)
        if kind is None:
            raise SettingsError(f"The jupyter-ci Hub service has no setting {name!r}; it "
                                f"takes {', '.join(TUNABLE)}.")
        least = 0 if name == "users_ttl" else 1e-9  # users_ttl 0: ask the Hub every time
        if isinstance(value, bool) or not isinstance(value, int | float) or value < least or (
                kind is int and value != int(value)):
            raise SettingsError(f"The jupyter-ci Hub service's {name} must be a "
                                f"{'positive ' if least else ''}"
                                f"{'whole ' if kind is int else ''}number.")
    return dict(data)


def _json(env: Mapping[str, str], name: str, empty: object) -> object:
    """Read a JSON variable (`empty` when unset)."""
    raw = env.get(name, "")
    if not raw:
        return empty
    try:
        return json.loads(raw)
    except ValueError as err:
        raise SettingsError(f"{name} is not JSON ({err}).") from None
