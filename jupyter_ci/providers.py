"""Every fact about a model provider, in one table read by the resolver, service, panel and errors.

Adding a provider is one `ProviderSpec` here (or `register(spec)` at run time) plus, when
it speaks a new wire format, its adapter. Nothing else names a provider.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

AuthStyle = Literal["bearer", "x-api-key"]


@dataclass(frozen=True)
class ProviderSpec:
    """What jupyter-ci knows about one provider."""

    #: The `provider` of `provider:model`.
    name: str
    #: How messages name it ("OpenAI").
    label: str
    #: The adapter factory, "module:attribute", imported only when a model is first used;
    #: it is called as factory(spec, model_name, endpoint).
    adapter: str
    key_var: str = ""
    url_var: str = ""
    #: Model name used when only the provider is configured ("" = none: the user picks).
    default_model: str = ""
    default_url: str = ""
    auth: AuthStyle = "bearer"
    #: Below the base URL, the list of models (GET): how a pasted key is checked.
    models_path: str = ""
    #: Headers its SDK sends besides the key that listing models needs (a pasted key's check).
    check_headers: tuple[tuple[str, str], ...] = ()
    #: A base URL without a key is usable (local OpenAI-compatible servers take any key).
    keyless_with_url: bool = False
    #: The model lives in this process (test doubles, replays): no key, no URL, no broker.
    in_process: bool = False
    #: Model names known to take no images (a regular expression matched at the start);
    #: `vision = auto` sends images to every other model of this provider.
    text_only_models: str = ""
    #: Its replies are written to JupyterCI.record_dir when set (a replay's are a copy).
    recordable: bool = True
    #: Model names its own cloud (default_url) serves, a regular expression matched at the
    #: start without case; another name sent there is likely a local server's model.
    cloud_models: str = ""

    @property
    def default_model_id(self) -> str:
        """Return `provider:model` of the default model, or "" when there is none."""
        return f"{self.name}:{self.default_model}" if self.default_model else ""

    def sees_images(self, name: str) -> bool:
        """Tell whether its model `name` is shown images when `vision = auto`."""
        # Every model but those known to take text only; an OpenAI-compatible server that
        # refuses images anyway is handled by the adapter (it asks again without them).
        rule = self.text_only_models
        return not (rule and re.match(f"(?:{rule})", name))

    def local_model_hint(self, name: str, where: str) -> str:
        """Say how to reach a local server when `name` is no model of this provider's cloud.

        "" unless the provider serves OpenAI-compatible local servers through its URL
        variable and `name` does not look like one of its cloud's models. `where` says
        where to set the URL ("in the environment that starts JupyterLab, ...").
        """
        if not (self.keyless_with_url and self.cloud_models) or _is_cloud(self, name):
            return ""
        return (f"'{name}' looks like the name of a local model, but no {self.url_var} is "
                f"set, so it goes to {self.label}'s cloud ({self.default_url}). To use a "
                f"local server, set {self.url_var}=http://localhost:11434/v1 (Ollama; vLLM: "
                f"http://localhost:8000/v1, LiteLLM: http://localhost:4000/v1, LM Studio: "
                f"http://localhost:1234/v1) {where}; it needs no key.")

    @property
    def setup_hint(self) -> str:
        """Say what to set to use this provider."""
        if self.in_process:
            return f"{self.label} models are made in code, not configured."
        hint = f"set {self.key_var}"
        if self.keyless_with_url:
            hint += f" (or {self.url_var} for a local server that needs no key)"
        return f"{self.label}: {hint}."


def _is_cloud(spec: ProviderSpec, name: str) -> bool:
    """Tell whether `name` looks like a model of the provider's own cloud."""
    name = name.strip()
    if name.lower().startswith("ft:"):  # a fine-tune: ft:gpt-4o-mini:org::id
        return True
    # A tag (Ollama's gpt-oss:20b) or a repository (vLLM's openai/gpt-oss-20b) is local.
    local = ":" in name or "/" in name
    return not local and re.match(f"(?:{spec.cloud_models})", name, re.IGNORECASE) is not None


PROVIDERS: dict[str, ProviderSpec] = {}


def register(spec: ProviderSpec) -> ProviderSpec:
    """Add (or replace) a provider in the table; return it."""
    PROVIDERS[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove a provider from the table (tests that added one)."""
    PROVIDERS.pop(name, None)


def get(name: str) -> ProviderSpec | None:
    """Return the provider called `name`, or None."""
    return PROVIDERS.get(name)


def model_sees_images(model_id: str) -> bool:
    """Tell whether `provider:model` is shown images under `vision = auto` (unknown: yes)."""
    provider, _, name = model_id.partition(":")
    spec = PROVIDERS.get(provider)
    return spec is None or spec.sees_images(name)


def configurable() -> Iterator[ProviderSpec]:
    """Yield the providers configured by keys and URLs (not in-process ones), in order."""
    return (spec for spec in PROVIDERS.values() if not spec.in_process)


def setup_hint() -> str:
    """Say how to configure any provider, for errors that end an ask."""
    hints = " ".join(spec.setup_hint for spec in configurable())
    return (
        f"{hints} For Ollama, vLLM or LM Studio set OPENAI_BASE_URL (e.g. "
        "http://localhost:11434/v1) and JUPYTER_CI_MODEL=openai:<model>. In JupyterLab, set "
        "them before starting it. Pick a model per ask with -m provider:model."
    )


register(ProviderSpec(
    name="openai", label="OpenAI", adapter="jupyter_ci.models.openai:OpenAIChatModel",
    key_var="OPENAI_API_KEY", url_var="OPENAI_BASE_URL", default_model="gpt-5.5",
    default_url="https://api.openai.com/v1", auth="bearer",
    models_path="models", keyless_with_url=True,
    # gpt-4o, 4.1, 4.5, 5, o1, o3, o4-mini see images; these do not.
    text_only_models=r"gpt-3\.5|gpt-4(-0314|-0613|-32k.*)?$|o1-mini|o1-preview|o3-mini|"
                     r"davinci|babbage",
    # gpt-*, o1/o3/o4*, chatgpt-*, and the rest of OpenAI's catalogue (fine-tunes, ft:...,
    # too); Ollama's llama3.1 or qwen2.5-coder:7b match none of these.
    cloud_models=r"gpt|chatgpt|o\d|text-|davinci|babbage|codex|computer-use|omni-|"
                 r"dall-e|whisper|tts-|sora",
))
register(ProviderSpec(
    name="anthropic", label="Anthropic", adapter="jupyter_ci.models.anthropic:AnthropicChatModel",
    key_var="ANTHROPIC_API_KEY", url_var="ANTHROPIC_BASE_URL",
    default_model="claude-sonnet-5-5", default_url="https://api.anthropic.com",
    auth="x-api-key", models_path="v1/models",
    check_headers=(("anthropic-version", "2023-06-01"),),
    text_only_models=r"claude-(1|2|instant)",  # every Claude 3 and later sees images
))
register(ProviderSpec(
    name="scripted", label="Scripted", adapter="jupyter_ci.models.scripted:registered_model",
    in_process=True,
))
register(ProviderSpec(
    name="replay", label="Replay", adapter="jupyter_ci.models.replay:replay_model",
    in_process=True, recordable=False,
))
