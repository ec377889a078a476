"""What an admin calls from jupyterhub_config.py: the service, its role, the users' scopes.

    from jupyter_ci.hub import configure
    configure(c, key_file="/etc/jupyterhub/jupyter-ci-keys.json",
              policy={"default": {"models": ["openai:gpt-5-mini"], "usd_per_month": 20}})

adds the jupyter-ci service to c.JupyterHub.services (the Hub starts it, with the policy,
prices, database and key file in its environment), gives it a role that reads users' names,
admin flags and groups, lets every user reach it (c.JupyterHub.extra_user_scopes), gives
users' servers' tokens the scope to call it as their user (c.Spawner.server_token_scopes),
and tells users' servers where it is (c.Spawner.environment). The policy and prices are
checked here: a mistake stops the Hub's start, saying what is wrong, and so does a JupyterHub
with a known advisory (jupyter_ci/advisories.py). Standard library only (besides jupyter-ci's
own readers, and `packaging`, which JupyterHub needs too): the Hub loads this with its config.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from jupyter_ci import providers
from jupyter_ci.advisories import affecting, upgrade_to
from jupyter_ci.hub.settings import (
    DEFAULT_DB_URL,
    ENV_DB_URL,
    ENV_KEY_FILE,
    ENV_POLICY,
    ENV_SETTINGS,
    check_policy,
    check_prices,
    check_tunable,
)
from jupyter_ci.models.broker import ENV_PRICES
from jupyter_ci.wire.hub import ENV_HUB_URL, SERVICE_NAME

#: Where the service listens unless told: beside the Hub's own API port (8081).
DEFAULT_URL = "http://127.0.0.1:10101"
#: The scopes of the Hub's `server` role, which a server's token has when none are set.
SERVER_ROLE_SCOPES = ("users:activity!user", "access:servers!server")
#: What the service itself may read of the Hub: users' names, admin flags and groups.
SERVICE_SCOPES = ("read:users:name", "read:users:groups")


class VulnerableHub(RuntimeError):
    """The running JupyterHub has a known advisory; the message names it and the fix."""


def hub_version() -> str:
    """Return the version of the JupyterHub that runs this config."""
    import jupyterhub

    return str(jupyterhub.__version__)


def refuse_vulnerable_hub(version: str) -> None:
    """Raise VulnerableHub when an advisory affects JupyterHub `version`."""
    found = affecting("jupyterhub", version)
    if not found:
        return
    first, others = found[0], [a.id for a in found[1:]]
    more = f" (and {', '.join(others)})" if others else ""
    target = upgrade_to("jupyterhub", version)
    upgrade = (f"upgrade JupyterHub to {target} or later (pip install 'jupyterhub>={target}')"
               if target else "upgrade JupyterHub once a fixed release is out")
    # The service holds every user's provider keys and budgets: it does not run on a Hub
    # that a published advisory lets users (or anyone) get around.
    raise VulnerableHub(
        f"jupyter_ci.hub.configure: JupyterHub {version} is affected by {first.id}{more}: "
        f"{first.summary} The jupyter-ci service holds the team's provider keys, so it "
        f"does not start on it; {upgrade}.")


def access_scope(name: str = SERVICE_NAME) -> str:
    """Return the scope that lets a token call the service `name`."""
    return f"access:services!service={name}"


def configure(c: Any, *, policy: Mapping[str, object] | None = None,
              prices: Mapping[str, object] | None = None, key_file: str = "",
              keys: Sequence[str] | None = None, url: str = "",
              users_url: str = "", db_url: str = "", settings: Mapping[str, object] | None = None,
              python: str = sys.executable, name: str = SERVICE_NAME) -> dict[str, Any]:
    """Add the jupyter-ci service to the Hub's config `c`; return the service's entry.

    `keys`: the provider variables passed from the Hub's environment to the service
    (default: each provider's key and base-URL variable the Hub's environment sets);
    `key_file`: a file of them only the Hub's user can read (server/broker/keys.py's
    forms), instead of or besides. `url`: where the service listens (default
    http://127.0.0.1:10101); `users_url`: where
    users' servers reach it (default: `url` and the service's prefix; through the proxy,
    `http://<proxy>/services/<name>/`). `db_url`: the spending database (SQLAlchemy URL;
    default SQLite in the Hub's working directory). `settings`: request_timeout, retries,
    max_reply_tokens, broker_max_body_bytes of its model service.
    """
    refuse_vulnerable_hub(hub_version())
    url = url or DEFAULT_URL
    check_policy(dict(policy) if policy is not None else None)
    check_prices(dict(prices or {}))
    check_tunable(dict(settings or {}))
    service = {"name": name, "url": url, "command": [python, "-m", "jupyter_ci.hub"],
               "environment": service_environment(policy, prices, key_file, keys, db_url,
                                                  settings),
               "oauth_no_confirm": True, "display": True,
               "info": {"about": "jupyter-ci: models, budgets and spending for everyone"}}
    c.JupyterHub.services.append(service)
    c.JupyterHub.load_roles.append({"name": f"{name}-service", "services": [name],
                                    "description": "What jupyter-ci reads of the Hub's users",
                                    "scopes": list(SERVICE_SCOPES)})
    _user_scopes(c, access_scope(name))
    _server_scopes(c, access_scope(name))
    reached = users_url or f"{url.rstrip('/')}/services/{name}/"
    c.Spawner.environment.update({ENV_HUB_URL: reached})
    return service


def service_environment(policy: Mapping[str, object] | None, prices: Mapping[str, object] | None,
                        key_file: str, keys: Sequence[str] | None, db_url: str,
                        settings: Mapping[str, object] | None) -> dict[str, str]:
    """Return the service's environment: its keys, and its settings as JSON."""
    names = list(keys) if keys is not None else [
        var for spec in providers.configurable() for var in (spec.key_var, spec.url_var)
        if var and os.environ.get(var)]
    missing = [n for n in names if not os.environ.get(n)]
    if keys is not None and missing:
        raise ValueError(f"jupyter_ci.hub.configure: {', '.join(missing)} is not set in the "
                         "Hub's environment (keys=...).")
    env = {n: os.environ[n] for n in names}
    env[ENV_DB_URL] = db_url or "sqlite:///" + os.path.abspath(
        DEFAULT_DB_URL.removeprefix("sqlite:///"))
    if policy is not None:
        env[ENV_POLICY] = json.dumps(policy)
    if prices:
        env[ENV_PRICES] = json.dumps(prices)
    if settings:
        env[ENV_SETTINGS] = json.dumps(settings)
    if key_file:
        env[ENV_KEY_FILE] = os.path.abspath(os.path.expanduser(key_file))
    return env


def _user_scopes(c: Any, scope: str) -> None:
    """Let every user hold `scope` (their servers' tokens can only have what they hold)."""
    from jupyterhub.app import JupyterHub

    trait = JupyterHub.class_traits().get("extra_user_scopes")
    if trait is None:
        raise ValueError("jupyter_ci.hub.configure needs JupyterHub 5 or later "
                         "(c.JupyterHub.extra_user_scopes).")
    scopes = c.JupyterHub.extra_user_scopes
    if isinstance(scopes, list | set | tuple):  # set by the admin earlier in the file
        c.JupyterHub.extra_user_scopes = type(scopes)([*scopes, scope])
    elif type(trait).__name__ == "Set":
        scopes.add(scope)
    else:
        scopes.append(scope)


def _server_scopes(c: Any, scope: str) -> None:
    """Give users' servers' tokens `scope`, keeping the server role's (or the admin's)."""
    spawner = c.Spawner
    current = spawner.server_token_scopes if "server_token_scopes" in spawner else None
    if callable(current):
        raise ValueError("jupyter_ci.hub.configure: c.Spawner.server_token_scopes is a "
                         f"function; add {scope!r} to what it returns yourself.")
    scopes = list(current) if isinstance(current, list | tuple) else list(SERVER_ROLE_SCOPES)
    if scope not in scopes:
        scopes.append(scope)
    spawner.server_token_scopes = scopes
