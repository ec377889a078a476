"""Turn `provider:model` (or nothing) into a ready model adapter."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from jupyter_ci.agent.errors import ModelConfigError
from jupyter_ci.config import DEFAULT_MODELS
from jupyter_ci.models.base import ChatModel, Endpoint

PROVIDERS = ("openai", "anthropic")
KEY_VARS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
URL_VARS = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
# Local OpenAI-compatible servers (Ollama, vLLM, llama.cpp) take any key.
PLACEHOLDER_KEY = "not-needed"

SETUP_HINT = (
    "Set OPENAI_API_KEY (OpenAI) or ANTHROPIC_API_KEY (Anthropic); for a local "
    "OpenAI-compatible server such as Ollama set OPENAI_BASE_URL=http://localhost:11434/v1 "
    "and JUPYTER_CI_MODEL=openai:<model>. In JupyterLab, set them before starting it. "
    "Pick a model per ask with -m provider:model."
)


@dataclass(frozen=True)
class ModelSettings:
    """What resolving needs from the settings."""

    default: str = ""
    timeout: float = 120.0
    retries: int = 3


def parse_model_id(spec: str) -> tuple[str, str]:
    """Split `provider:model`, raising ModelConfigError for anything else."""
    provider, sep, name = spec.strip().partition(":")
    if not sep or not provider or not name:
        raise ModelConfigError(
            f"Model {spec!r} is not of the form provider:model.",
            "Use e.g. -m openai:gpt-4.1 or -m anthropic:claude-sonnet-4-5.",
        )
    if provider not in PROVIDERS:
        raise ModelConfigError(
            f"Unknown model provider {provider!r} in {spec!r}.",
            f"Known providers: {', '.join(PROVIDERS)}. Any OpenAI-compatible server "
            "(Ollama, vLLM, LM Studio) is reached as openai:<model> with OPENAI_BASE_URL.",
        )
    return provider, name


def configured_providers(env: Mapping[str, str]) -> list[str]:
    """List providers this process can reach, directly or through the server's broker."""
    if env.get("JUPYTER_CI_BROKER_URL"):
        listed = env.get("JUPYTER_CI_BROKER_PROVIDERS", "").split(",")
        return [p for p in PROVIDERS if p in listed]
    found = [p for p in PROVIDERS if env.get(KEY_VARS[p])]
    if "openai" not in found and env.get("OPENAI_BASE_URL"):
        found.insert(0, "openai")
    return found


def default_model_id(settings: ModelSettings, env: Mapping[str, str]) -> str:
    """Pick the model when -m is not given: setting/env, else the first configured provider."""
    if settings.default:
        return settings.default
    providers = configured_providers(env)
    if not providers:
        raise ModelConfigError("No model is configured for %%ask.", SETUP_HINT)
    if providers[0] == "openai" and env.get("OPENAI_BASE_URL") and not env.get("OPENAI_API_KEY"):
        raise ModelConfigError(
            "OPENAI_BASE_URL is set (a local server?) but no model is chosen.",
            "Set JUPYTER_CI_MODEL=openai:<model> (e.g. openai:llama3.1) or pass -m.",
        )
    return DEFAULT_MODELS[providers[0]]


def endpoint_for(provider: str, settings: ModelSettings, env: Mapping[str, str]) -> Endpoint:
    """Find the URL and credential for a provider, preferring the server's broker."""
    broker = env.get("JUPYTER_CI_BROKER_URL")
    if broker:
        token = env.get("JUPYTER_CI_BROKER_TOKEN", "")
        if provider not in configured_providers(env):
            raise ModelConfigError(
                f"The Jupyter server has no key for {provider}.",
                f"Set {KEY_VARS[provider]} in the environment that starts JupyterLab, "
                "then restart it.",
            )
        return Endpoint(token, f"{broker.rstrip('/')}/{provider}", settings.timeout,
                        settings.retries, env.get("JUPYTER_CI_BROKER_OPENAI_HOST") or None)
    key = env.get(KEY_VARS[provider], "")
    base_url = env.get(URL_VARS[provider]) or None
    if not key and provider == "openai" and base_url:
        key = PLACEHOLDER_KEY
    if not key:
        raise ModelConfigError(
            f"No API key for {provider}: {KEY_VARS[provider]} is not set.", SETUP_HINT
        )
    return Endpoint(key, base_url, settings.timeout, settings.retries)


def resolve_model(
    spec: str | None, settings: ModelSettings, env: Mapping[str, str] | None = None
) -> ChatModel:
    """Return the adapter for `spec`, or for the default model when spec is empty."""
    env = os.environ if env is None else env
    provider, name = parse_model_id(spec or default_model_id(settings, env))
    endpoint = endpoint_for(provider, settings, env)
    key = (provider, name, endpoint)
    if key not in _ADAPTERS:
        _ADAPTERS[key] = _adapter(provider, name, endpoint)
    return _ADAPTERS[key]


# One adapter (and SDK client) per model and endpoint, so later asks reuse its connections.
_ADAPTERS: dict[tuple[str, str, Endpoint], ChatModel] = {}


def _adapter(provider: str, name: str, endpoint: Endpoint) -> ChatModel:
    if provider == "anthropic":
        from jupyter_ci.models.anthropic import AnthropicChatModel

        return AnthropicChatModel(name, endpoint)
    from jupyter_ci.models.openai import OpenAIChatModel

    return OpenAIChatModel(name, endpoint)
