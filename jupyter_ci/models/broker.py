"""The kernel side of the server's model service: the environment contract and its info call.

The server extension (jupyter_ci/server/app.py) publishes these variables into the
environment kernels inherit; the resolver reads them here. Both sides import the names
from this module, so the contract is written once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

#: Base URL of the kernels' routes: the model service's `turn`, and `_info`.
ENV_URL = "JUPYTER_CI_BROKER_URL"
#: The credential kernels present instead of a provider key.
ENV_TOKEN = "JUPYTER_CI_BROKER_TOKEN"
#: Comma-separated providers the server holds a key or URL for.
ENV_PROVIDERS = "JUPYTER_CI_BROKER_PROVIDERS"
#: The server's Unix socket, when it listens on one (--sock) instead of a port.
ENV_SOCKET = "JUPYTER_CI_BROKER_SOCKET"
#: The default model, shared by the server's config and kernels.
ENV_MODEL = "JUPYTER_CI_MODEL"
#: The least approval mode an admin set for every ask (config.JupyterCI.approval_minimum).
ENV_APPROVAL = "JUPYTER_CI_APPROVAL_MINIMUM"
#: The server's price table (config.JupyterCI.prices) as JSON: kernels price asks with it.
ENV_PRICES = "JUPYTER_CI_PRICES"

#: "1" in a REST session's kernel: it has no model (its asks run in the server), so an
#: `%%ask` run in its code is told where asks go instead.
ENV_REST_SESSION = "JUPYTER_CI_REST_SESSION"

#: Every variable the server manages in kernels' environments.
MANAGED = (ENV_URL, ENV_TOKEN, ENV_PROVIDERS, ENV_SOCKET, ENV_MODEL, ENV_APPROVAL,
           ENV_PRICES)


#: What an `%%ask` in a REST session's code is told.
REST_SESSION_HINT = ("This kernel belongs to a REST session, whose asks run in the server: "
                     "POST /jupyter-ci/sessions/<id>/ask (session.ask(...) in the Python "
                     "client, or the MCP tool ask). %%ask in the session's code has no model.")


def behind_broker(env: Mapping[str, str]) -> bool:
    """Tell whether this process reaches models through a server's broker."""
    return bool(env.get(ENV_URL))


def brokered(env: Mapping[str, str]) -> list[str]:
    """List the providers the server's broker serves, as it published them."""
    return [name for name in env.get(ENV_PROVIDERS, "").split(",") if name]


def own_credentials(env: Mapping[str, str]) -> list[str]:
    """Return the credentials this process holds (broker token, provider keys), to redact."""
    from jupyter_ci import providers

    names = [ENV_TOKEN, *(spec.key_var for spec in providers.configurable() if spec.key_var)]
    return [value for name in names if (value := env.get(name, "").strip())]


#: Below ENV_URL: what the broker serves now (GET with the token; no key in the answer).
INFO_PATH = "_info"
#: Below ENV_URL: POST with the token before model-written code first runs in this kernel.
MODEL_CODE_PATH = "_model_code"


def needs_refresh(spec: str | None, env: Mapping[str, str]) -> bool:
    """Tell whether resolving `spec` in `env` needs to ask the broker what it serves now.

    Only when behind a broker that published no provider, or not the one `spec` names: a
    key pasted in the panel after the kernel started is known only to the broker.
    """
    from jupyter_ci import providers

    if not behind_broker(env):
        return False
    wanted = (spec or "").partition(":")[0]
    listed = brokered(env)
    if listed and (not wanted or wanted in listed):
        return False
    # An unknown provider: parse_model_id says what is wrong with it, no need to ask.
    return not wanted or providers.get(wanted) is not None


def refreshed_environ(spec: str | None, env: Mapping[str, str]) -> dict[str, str]:
    """Return the environment to resolve `spec` in, updated by the broker when it must be asked.

    The one place resolving a model does I/O: an HTTP call to the broker, only when
    `needs_refresh`. `env` is left alone; the caller decides whether to keep the result.
    """
    if not needs_refresh(spec, env):
        return dict(env)
    return {**env, **current_environ(env)}


def current_environ(env: Mapping[str, str], timeout: float = 5.0) -> dict[str, str]:
    """Ask the broker which providers and model it serves now, as kernel variables.

    A kernel learns them from its environment when it starts; a key pasted in the panel
    later reaches only the broker, so a kernel that finds no provider asks here. Returns
    {} when the broker cannot say (the caller keeps what the environment says).
    """
    import http.client
    from urllib.parse import urlsplit

    from jupyter_ci.models.service import connection

    url = urlsplit(f"{env.get(ENV_URL, '').rstrip('/')}/{INFO_PATH}")
    conn = connection(url.scheme, url.hostname or "", url.port, env.get(ENV_SOCKET) or None,
                      timeout)
    try:
        conn.request("GET", url.path, headers={
            "Authorization": f"Bearer {env.get(ENV_TOKEN, '')}"})
        reply = conn.getresponse()
        body = reply.read(1 << 16)
    except (OSError, http.client.HTTPException):
        return {}
    finally:
        conn.close()
    try:
        data = json.loads(body) if reply.status == 200 else None
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    wanted = (ENV_PROVIDERS, ENV_MODEL)
    return {k: v for k, v in data.items() if k in wanted and isinstance(v, str)}


def announce_model_code(env: Mapping[str, str], timeout: float = 5.0) -> bool:
    """Tell the server that model-written code is about to run in this kernel.

    From then until the kernel restarts, the page renders none of its outputs as trusted
    (server/broker/model_code.py). Said before the code runs, so what the code does to this
    process cannot take it back. False when there is no server to tell, or it did not answer.
    """
    import http.client
    from urllib.parse import urlsplit

    from jupyter_ci.models.service import connection

    if not behind_broker(env) or not env.get(ENV_TOKEN):
        return False
    url = urlsplit(f"{env.get(ENV_URL, '').rstrip('/')}/{MODEL_CODE_PATH}")
    conn = connection(url.scheme, url.hostname or "", url.port, env.get(ENV_SOCKET) or None,
                      timeout)
    try:
        conn.request("POST", url.path, body=b"", headers={
            "Authorization": f"Bearer {env.get(ENV_TOKEN, '')}"})
        reply = conn.getresponse()
        reply.read(1 << 12)
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()
    return reply.status == 204
