"""What the JupyterLab panel is told: models to offer, the default, what is missing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from jupyter_ci import providers
from jupyter_ci.server.broker.broker import Provider


def no_provider() -> str:
    """Say what to set when the server holds no key or URL for any provider."""
    hints = " ".join(spec.setup_hint for spec in providers.configurable())
    return (
        "No model provider is configured. Paste a key below (Model keys), or: "
        f"{hints} Set it before starting JupyterLab, then restart it. Keys stay in the "
        "server; kernels reach the model through it."
    )


def no_model(names: Sequence[str]) -> str:
    """Say what to set when only keyless servers are configured, so no model is known."""
    urls = ", ".join(providers.PROVIDERS[n].url_var for n in names if n in providers.PROVIDERS)
    example = names[0] if names else "openai"
    return (
        f"{urls or 'A base URL'} is set (a local server?) but no model is chosen. Set "
        f"JUPYTER_CI_MODEL={example}:<model> (e.g. {example}:llama3.1) or "
        "c.JupyterCI.models before starting JupyterLab, then restart it."
    )


class KeyableProvider(TypedDict):
    """A provider the panel's key form offers."""

    name: str
    label: str
    configured: bool
    keyless_with_url: bool


class PanelJSON(TypedDict):
    """The JSON of GET /jupyter-ci/config."""

    models: list[str]
    default_model: str | None
    problem: str | None
    providers: list[KeyableProvider]


@dataclass(frozen=True)
class PanelConfig:
    """The body of GET /jupyter-ci/config."""

    models: list[str] = field(default_factory=list)
    default_model: str | None = None
    problem: str | None = None
    #: What the panel's key form offers.
    providers: list[KeyableProvider] = field(default_factory=list)

    def to_json(self) -> PanelJSON:
        """Return the JSON-ready dict (copies: the caller may add to it)."""
        return {"models": list(self.models), "default_model": self.default_model,
                "problem": self.problem,
                "providers": [KeyableProvider(**p) for p in self.providers]}


def panel_config(model: str, models: Sequence[str], configured: Sequence[Provider]
                 ) -> PanelConfig:
    """Combine the JupyterCI settings with the configured providers (keys never included)."""
    offered = list(models) or [
        # A keyless server (Ollama) serves its own models, not OpenAI's default.
        p.spec.default_model_id for p in configured if p.api_key and p.spec.default_model_id
    ]
    if model and model not in offered:
        offered.insert(0, model)
    default = model or (offered[0] if offered else None)
    problem = None
    if not configured:
        problem = no_provider()
    elif not offered:
        problem = no_model([p.name for p in configured])
    names = {p.name for p in configured}
    keyable = [KeyableProvider(name=spec.name, label=spec.label, configured=spec.name in names,
                               keyless_with_url=spec.keyless_with_url)
               for spec in providers.configurable()]
    return PanelConfig(offered, default, problem, keyable)
