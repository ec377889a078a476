"""Keys pasted in the panel: checked with their provider, then held, and remembered on request.

The check lists the provider's models with the key, from the server, as the SDKs do (`GET
{base_url}/models`): a key the provider refuses is not kept; a URL nothing answers at is kept
(a local server may not have started yet) with a message naming that URL. Messages are our
own words: never the key, nor the provider's error text (which may quote part of it).
"""

from __future__ import annotations

from dataclasses import dataclass
from logging import Logger
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from jupyter_ci.config import JupyterCI
from jupyter_ci.server.broker.broker import Broker, Provider
from jupyter_ci.server.broker.errors import BadRequest
from jupyter_ci.server.broker.keys import (
    KeyFileError,
    default_key_file,
    key_file_to_read,
    read_key_file,
    remember_keys,
)
from jupyter_ci.server.broker.panel import PanelJSON, panel_config
from jupyter_ci.server.broker.upstream import why_failed

if TYPE_CHECKING:
    import httpx

#: Seconds the check may take: the Save button waits for it.
CHECK_TIMEOUT = 10.0
KEYS_BODY = 'Send JSON {"provider": "openai", "key": "…", "base_url": "", "remember": false}.'


class KeyCheckJSON(TypedDict):
    """The JSON of a KeyCheck."""

    ok: bool
    message: str


class KeyAccepted(PanelJSON):
    """The reply to a pasted key: the panel config, where it was saved, what the check said."""

    saved: str
    check: KeyCheckJSON


class KeyRemoved(PanelJSON):
    """The reply to a removed key: the panel config and what was removed where."""

    removed: str


class KeyRefused(BadRequest):
    """The provider answered that the key is wrong (HTTP 401 or 403): it is not kept."""


@dataclass(frozen=True)
class KeyCheck:
    """What listing the provider's models with a pasted key said."""

    ok: bool
    message: str

    def to_json(self) -> KeyCheckJSON:
        """Return the JSON-ready dict."""
        return {"ok": self.ok, "message": self.message}


def _models_path(provider: Provider) -> str | None:
    """Return the provider's model-list route (below its base URL), if it has one."""
    return provider.spec.models_path or None


def _counted(response: httpx.Response) -> str:
    """Say how many models a model list holds, when it reads as one."""
    try:
        data = response.json().get("data")
    except (ValueError, AttributeError):
        return ""
    if not isinstance(data, list):
        return ""
    return f" ({len(data)} model{'' if len(data) == 1 else 's'})"


async def check_key(client: httpx.AsyncClient, provider: Provider,
                    timeout: float = CHECK_TIMEOUT) -> KeyCheck:
    """List the provider's models with its key; raise KeyRefused when it refuses the key."""
    import httpx

    path = _models_path(provider)
    if path is None:
        return KeyCheck(True, "")
    shown, label = provider.base_url, provider.spec.label
    headers = {**dict(provider.spec.check_headers), **provider.auth_headers()}
    try:
        response = await client.get(provider.url_for(path, ""), headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        return KeyCheck(False, f"The server could not reach {shown}: it did not answer within "
                               f"{timeout:g} s. Asks will fail until it does.")
    except Exception as err:  # any transport failure, told by its class only
        return KeyCheck(False, f"The server could not reach {shown}: {why_failed(err)}. Asks "
                               "will fail until it answers: check the URL, or start the server.")
    status = response.status_code
    if status in (401, 403) and provider.api_key:
        raise KeyRefused(f"{label} refused this key at {shown} (HTTP {status}): it was not saved. "
                         "Check the key and paste it again.")
    if status in (401, 403):
        raise KeyRefused(f"{shown} wants a key (HTTP {status}): nothing was saved. Paste the "
                         "key it expects.")
    if 200 <= status < 300:
        return KeyCheck(True, f"Checked: {shown} answered{_counted(response)}.")
    if status == 404:
        return KeyCheck(False, f"{shown} has no model list (HTTP 404): is the base URL right? "
                               "OpenAI-compatible servers usually end in /v1.")
    return KeyCheck(False, f"{shown} answered HTTP {status} to a model list: asks may fail.")


def _remember(ci: JupyterCI, provider: Provider, log: Logger) -> str:
    """Write the provider's key and URL to the key file; say where, or why not."""
    path = Path(ci.key_file).expanduser() if ci.key_file else default_key_file()
    spec = provider.spec
    values = {spec.key_var: provider.api_key,
              spec.url_var: provider.base_url if provider.explicit_url else ""}
    try:
        remember_keys(path, values)
    except (OSError, KeyFileError) as err:
        # Kept in memory all the same; the message names the file, not the key.
        problem = err.strerror if isinstance(err, OSError) else str(err)
        log.error("jupyter-ci: could not save the %s key to %s: %s", spec.label, path, problem)
        return f"not saved to {path}: {problem}"
    return f"saved to {path}"


async def accept_key(body: object, ci: JupyterCI, broker: Broker, client: httpx.AsyncClient,
                     log: Logger) -> KeyAccepted:
    """Check a pasted key, hold it (and remember it on request); return the panel's reply.

    Raise BadRequest (a 400 whose message names no value) when it cannot work.
    """
    if not isinstance(body, dict) or not all(
            isinstance(body.get(k, ""), str) for k in ("provider", "key", "base_url")):
        raise BadRequest(KEYS_BODY)
    provider = broker.candidate(str(body.get("provider", "")), str(body.get("key", "")),
                                str(body.get("base_url", "")))
    check = await check_key(client, provider)
    broker.hold(provider)
    saved = _remember(ci, provider, log) if body.get("remember") is True else ""
    log.info("jupyter-ci: %s credentials set from the panel (in memory%s)",
             provider.spec.label, f"; {saved}" if saved else "")
    return KeyAccepted(**panel_config(ci.model, ci.models, broker.configured()).to_json(),
                       saved=saved, check=check.to_json())


def _unremember(ci: JupyterCI, provider: Provider, log: Logger) -> str:
    """Drop the provider's key and URL from the key file, if it holds them; say so."""
    # The file the next start reads (keys.json, else a legacy keys.env).
    path = Path(key_file_to_read(ci.key_file) or default_key_file()).expanduser()
    names = (provider.spec.key_var, provider.spec.url_var)
    try:
        if not path.is_file() or not set(read_key_file(path, log)) & set(names):
            return ""
        remember_keys(path, dict.fromkeys(names, ""))
    except (OSError, KeyFileError) as err:
        problem = err.strerror if isinstance(err, OSError) else str(err)
        log.error("jupyter-ci: could not remove the %s key from %s: %s", provider.spec.label,
                  path, problem)
        return f" It is still in {path}: {problem}."
    return f" Removed from {path} too."


def remove_key(name: str, ci: JupyterCI, broker: Broker, log: Logger) -> KeyRemoved:
    """Forget a provider's key and base URL, in memory and in the key file; return the reply.

    Raise BadRequest for an unknown provider.
    """
    provider = broker.forget(name)
    spec = provider.spec
    file = _unremember(ci, provider, log)
    removed = (f"{spec.label} key and base URL removed from the server.{file} One set in "
               f"the environment that starts JupyterLab ({spec.key_var}, "
               f"{spec.url_var}) comes back when it restarts.")
    log.info("jupyter-ci: %s credentials removed from the panel", spec.label)
    return KeyRemoved(**panel_config(ci.model, ci.models, broker.configured()).to_json(),
                      removed=removed)
