"""Turn a provider SDK's failure, left after the SDK's own retries, into an ask error.

The `openai` and `anthropic` SDKs share one exception tree (APITimeoutError under
APIConnectionError, APIStatusError with `status_code` and `body`), so one function
serves both; the adapter passes its SDK module in.
"""

from __future__ import annotations

from types import ModuleType

from jupyter_ci.agent.errors import AskError, ModelConfigError, ModelUnavailable
from jupyter_ci.models.base import Endpoint, UrlSetting
from jupyter_ci.providers import ProviderSpec


def ask_error(err: Exception, sdk: ModuleType, provider: ProviderSpec, url: str, model: str,
              endpoint: Endpoint) -> AskError:
    """Build the ask error for an SDK exception, with the key scrubbed from its text."""
    setting = endpoint.url_setting
    origin = f" ({setting.origin})" if setting.origin else ""
    where = f"{provider.label} at {url}{origin}"
    retries = _retries_taken(err, endpoint.max_retries)
    status = getattr(err, "status_code", None)
    if isinstance(err, sdk.APITimeoutError):
        error: AskError = ModelUnavailable(
            f"{where} did not answer within {endpoint.timeout:g} s ({retries}).",
            "Try again; for a slow model raise c.JupyterCI.request_timeout (seconds).")
    elif isinstance(err, sdk.APIConnectionError):
        cause = f": {err.__cause__}" if err.__cause__ else ""
        said = f"{setting.origin}; " if setting.origin else ""
        error = ModelUnavailable(f"Could not connect to {provider.label} at {url} "
                                 f"({said}{retries}){cause}",
                                 _unreachable_hint(provider, setting))
    elif isinstance(err, sdk.APIStatusError) and isinstance(status, int) and status >= 400:
        message = provider_message(getattr(err, "body", None), str(err))
        error = status_error(where, model, status, message, retries, provider.key_var)
        error = _with_url_hint(error, status, provider, model, setting)
    else:
        # Errors sent inside a stream that had started (e.g. "overloaded"): never retried.
        message = provider_message(getattr(err, "body", None), str(err))
        error = ModelUnavailable(f"{where} failed while answering: {message}",
                                 "Try again; if it keeps failing, try another model.")
    return scrub(error, endpoint.api_key)


def _unreachable_hint(provider: ProviderSpec, setting: UrlSetting) -> str:
    """Say what to check when nothing answered at the base URL, and where it was set."""
    if not setting.origin:
        return f"Check the network, or that the server behind {provider.url_var} is running."
    fix = f" or change it {setting.how}" if setting.how else ""
    local = " (Ollama: `ollama serve`)" if provider.keyless_with_url else ""
    return (f"Start the server that URL names{local}, or check the URL: it was "
            f"{setting.origin};{fix}.")


def _with_url_hint(error: AskError, status: int, provider: ProviderSpec, model: str,
                   setting: UrlSetting) -> AskError:
    """Add to a refused model or key what the base URL may have to do with it."""
    if status not in (401, 403, 404):
        return error
    if not setting.origin:
        # No URL set: a local model's name sent to the provider's cloud.
        local = provider.local_model_hint(model, setting.how or "where Jupyter starts")
        if not local:
            return error
        hint = local if status == 404 else f"{local} Otherwise: {error.hint}"
        return type(error)(error.message, hint)
    if status != 404:
        return error
    fix = f"; change it {setting.how}" if setting.how else ""
    local = (f" (Ollama lists its models with `ollama list`; `ollama pull {model}` fetches "
             "it)" if provider.keyless_with_url else "")
    return type(error)(error.message, (
        f"Check the model name{local} and the base URL, {setting.origin}{fix}. An "
        "OpenAI-compatible server's usually ends in /v1."))


def _retries_taken(err: Exception, default: int) -> str:
    """Say how often the SDK retried, from the header it stamps on every attempt."""
    request = getattr(err, "request", None)
    value = str(getattr(request, "headers", {}).get("x-stainless-retry-count", ""))
    count = int(value) if value.isdigit() else default
    return "not retried" if count == 0 else f"after {count} {'retry' if count == 1 else 'retries'}"


def provider_message(body: object, fallback: str) -> str:
    """Pick the human message out of a provider's JSON error body."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return fallback


def status_error(where: str, model: str, status: int, message: str, retries: str,
                 key_variable: str) -> AskError:
    """Build the ask error for an HTTP error status."""
    if status in (401, 403):
        return ModelConfigError(
            f"{where} rejected the API key (HTTP {status}): {message}",
            f"Check {key_variable}, or the key configured for the Jupyter server.")
    if status == 404:
        return ModelConfigError(
            f"{where} does not know the model '{model}' (HTTP 404): {message}",
            "Check the model name (provider:model) and the provider's base URL.")
    if status == 429:
        return ModelUnavailable(
            f"{where} rate-limited the request (HTTP 429, {retries}): {message}",
            "Wait a minute and try again, or check the account's quota.")
    if status >= 500:
        return ModelUnavailable(
            f"{where} failed (HTTP {status}, {retries}): {message}",
            "The provider has a problem; try again later or use another model.")
    return ModelUnavailable(f"{where} refused the request (HTTP {status}): {message}",
                            "The message above is the provider's; check the model's settings.")


def scrub(error: AskError, secret: str) -> AskError:
    """Remove the API key from an error's text, in case a server echoed it."""
    if len(secret) < 4 or (secret not in error.message and secret not in error.hint):
        return error
    return type(error)(error.message.replace(secret, "***"), error.hint.replace(secret, "***"))
