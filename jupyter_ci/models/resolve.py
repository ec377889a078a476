"""Turn `provider:model` (or nothing) into a ready model adapter, from the provider table."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from jupyter_ci import providers
from jupyter_ci.agent.errors import ModelConfigError
from jupyter_ci.models import broker
from jupyter_ci.models.base import ChatModel, Endpoint, SeesImages, UrlSetting
from jupyter_ci.providers import ProviderSpec

# Local OpenAI-compatible servers (Ollama, vLLM, llama.cpp) take any key.
PLACEHOLDER_KEY = "not-needed"

#: Under Jupyter Server a key can be given without a restart.
PANEL_HINT = ("Paste a key in the jupyter-ci panel (the Ask tab in JupyterLab's right "
              "sidebar, \"Model keys\"): the server keeps it, kernels never see it.")

#: Builds an adapter: factory(spec, model_name, endpoint).
AdapterFactory = Callable[[ProviderSpec, str, Endpoint], ChatModel]


@dataclass(frozen=True)
class ModelSettings:
    """What resolving needs from the settings."""

    default: str = ""
    timeout: float = 120.0
    retries: int = 3
    #: Where each ask's replies are recorded ("" = nowhere).
    record_dir: str = ""
    #: The model used when none is configured (a demo's `replay:...`; "" = none).
    fallback: str = ""


def parse_model_id(spec: str) -> tuple[ProviderSpec, str]:
    """Split `provider:model`, raising ModelConfigError for anything else.

    Spaces around either part go and the provider is lower-cased, as providers and the
    table read them: `" OpenAI: o1-pro "` is `openai:o1-pro`, priced and sent as one model.
    The model's own name keeps its case (an OpenAI-compatible server may tell names apart
    by it); prices are looked up without case (agent/cost.py).
    """
    provider, sep, name = spec.partition(":")
    provider, name = provider.strip().lower(), name.strip()
    if not sep or not provider or not name:
        raise ModelConfigError(
            f"Model {spec!r} is not of the form provider:model.",
            "Use e.g. -m openai:gpt-5.5 or -m anthropic:claude-sonnet-5-5.",
        )
    found = providers.get(provider)
    if found is None:
        raise ModelConfigError(
            f"Unknown model provider {provider!r} in {spec!r}.",
            f"Known providers: {', '.join(providers.PROVIDERS)}. Any OpenAI-compatible server "
            "(Ollama, vLLM, LM Studio) is reached as openai:<model> with OPENAI_BASE_URL.",
        )
    return found, name


def canonical_model_id(spec: str) -> str:
    """Return the one id of `provider:model` that prices, budgets and the call all use."""
    provider, name = parse_model_id(spec)
    return f"{provider.name}:{name}"


def configured_providers(env: Mapping[str, str]) -> list[str]:
    """List providers this process can reach, directly or through the server's broker."""
    if broker.behind_broker(env):
        listed = broker.brokered(env)
        return [spec.name for spec in providers.configurable() if spec.name in listed]
    keyed = [spec.name for spec in providers.configurable() if env.get(spec.key_var)]
    # A keyless local server comes first: its URL was set on purpose, for this machine.
    local = [spec.name for spec in providers.configurable() if spec.keyless_with_url
             and spec.name not in keyed and env.get(spec.url_var)]
    return local + keyed


def default_model_id(settings: ModelSettings, env: Mapping[str, str]) -> str:
    """Pick the model when -m is not given: setting/env, else the first configured provider."""
    if settings.default:
        return settings.default
    names = configured_providers(env)
    if not names and settings.fallback:
        return settings.fallback
    if not names:
        if env.get(broker.ENV_REST_SESSION) == "1":
            raise ModelConfigError("No model is configured for %%ask.",
                                   broker.REST_SESSION_HINT)
        hint = PANEL_HINT + " " if broker.behind_broker(env) else ""
        raise ModelConfigError("No model is configured for %%ask.",
                               hint + providers.setup_hint())
    spec = providers.PROVIDERS[names[0]]
    keyless = spec.keyless_with_url and env.get(spec.url_var) and not env.get(spec.key_var)
    if keyless or not spec.default_model_id:
        raise ModelConfigError(
            f"{spec.url_var or spec.label} is set (a local server?) but no model is chosen.",
            f"Set JUPYTER_CI_MODEL={spec.name}:<model> (e.g. {spec.name}:llama3.1) or pass -m.",
        )
    return spec.default_model_id


#: Where a kernel outside a server gets its base URL from.
DIRECT_URL = "where Jupyter (or this Python) starts, then restart the kernel"
#: Where a kernel under a server has the server get its base URL from.
SERVER_URL = ("where JupyterLab starts and restart it, or as the base URL in the jupyter-ci "
              "panel (the Ask tab, Model keys)")


def endpoint_for(spec: ProviderSpec, settings: ModelSettings, env: Mapping[str, str],
                 name: str = "") -> Endpoint:
    """Find the URL and credential for a provider, preferring the server's model service.

    `name`, the model's, lets a missing key or URL be told apart for a local model's name.
    """
    if spec.in_process:
        return Endpoint("", None, settings.timeout, settings.retries)
    if broker.behind_broker(env):
        if spec.name not in configured_providers(env):
            local = spec.local_model_hint(name, SERVER_URL)
            raise ModelConfigError(
                f"The Jupyter server has no key for {spec.name}.",
                local or f"{PANEL_HINT} Or set {spec.key_var} in the environment that starts "
                "JupyterLab, then restart it.",
            )
        # The server's model service, not the provider: the kernel's credential is its key.
        return Endpoint(env.get(broker.ENV_TOKEN, ""), env.get(broker.ENV_URL, ""),
                        settings.timeout, settings.retries,
                        socket=env.get(broker.ENV_SOCKET) or None)
    key = env.get(spec.key_var, "")
    base_url = env.get(spec.url_var) or None
    if not key and spec.keyless_with_url and base_url:
        key = PLACEHOLDER_KEY
    if not key:
        in_session = env.get(broker.ENV_REST_SESSION) == "1"
        local = spec.local_model_hint(name, DIRECT_URL)
        raise ModelConfigError(
            f"No API key for {spec.name}: {spec.key_var} is not set.",
            broker.REST_SESSION_HINT if in_session else local or providers.setup_hint())
    origin = f"set by {spec.url_var} in this kernel's environment" if base_url else ""
    # The table's URL, not the SDK's own default: the same, and one place says it.
    return Endpoint(key, base_url or spec.default_url or None, settings.timeout,
                    settings.retries, url_setting=UrlSetting(origin, DIRECT_URL))


def resolve_model(
    spec: str | None, settings: ModelSettings, env: Mapping[str, str]
) -> ChatModel:
    """Return the adapter for `spec`, or for the default model when spec is empty.

    Given `env`, pure: no network, no writes to os.environ (behind a broker, pass what
    `broker.refreshed_environ` returns). With `settings.record_dir`, the adapter is wrapped
    to record this ask's replies there: call this once per ask.
    """
    provider, name = parse_model_id(spec or default_model_id(settings, env))
    endpoint = endpoint_for(provider, settings, env, name)
    if provider.in_process:
        model = adapter_factory(provider)(provider, name, endpoint)
    elif broker.behind_broker(env):
        from jupyter_ci.models.service import ServiceModel

        # Under a server no SDK loads here: the server streams the turn for the kernel.
        model = ServiceModel(provider, name, endpoint)
    else:
        key = (provider, name, endpoint)
        found = _ADAPTERS.get(key)
        if found is None:
            found = _ADAPTERS[key] = adapter_factory(provider)(provider, name, endpoint)
        model = found
    if settings.record_dir and provider.recordable:
        from jupyter_ci.models.recording import RecordingModel

        # A new wrapper per ask: it collects this ask's turns (the adapter is shared).
        return RecordingModel(model, Path(settings.record_dir))
    return model


# One adapter (and SDK client) per model and endpoint, so later asks reuse its connections.
_ADAPTERS: dict[tuple[ProviderSpec, str, Endpoint], ChatModel] = {}


def adapter_factory(spec: ProviderSpec) -> AdapterFactory:
    """Import the provider's adapter factory (SDKs load only when a model is used)."""
    module, _, attribute = spec.adapter.partition(":")
    factory: AdapterFactory = getattr(importlib.import_module(module), attribute)
    return factory


def vision_enabled(setting: str, model: SeesImages) -> bool:
    """Decide whether an ask shows `model` its images (`c.JupyterCI.vision`)."""
    if setting in ("on", "off"):
        return setting == "on"
    return model.sees_images
