"""What the JupyterLab panel is told: models to offer, the default, what is missing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from jupyter_ci.config import DEFAULT_MODELS
from jupyter_ci.server.broker import Provider

NO_PROVIDER = (
    "No model provider is configured. Set OPENAI_API_KEY or ANTHROPIC_API_KEY (or "
    "OPENAI_BASE_URL for a local server such as Ollama) before starting JupyterLab, "
    "then restart it. Keys stay in the server; kernels reach the model through it."
)
NO_MODEL = (
    "OPENAI_BASE_URL is set (a local server?) but no model is chosen. Set "
    "JUPYTER_CI_MODEL=openai:<model> (e.g. openai:llama3.1) or c.JupyterCI.models before "
    "starting JupyterLab, then restart it."
)


@dataclass(frozen=True)
class PanelConfig:
    """The body of GET /jupyter-ci/config."""

    models: list[str] = field(default_factory=list)
    default_model: str | None = None
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the JSON-ready dict."""
        return asdict(self)


def panel_config(model: str, models: Sequence[str], providers: Sequence[Provider]) -> PanelConfig:
    """Combine the JupyterCI settings with the configured providers (keys never included)."""
    offered = list(models) or [
        # A keyless server (Ollama) serves its own models, not OpenAI's default.
        DEFAULT_MODELS[p.name] for p in providers if p.api_key and p.name in DEFAULT_MODELS
    ]
    if model and model not in offered:
        offered.insert(0, model)
    default = model or (offered[0] if offered else None)
    problem = None
    if not providers:
        problem = NO_PROVIDER
    elif not offered:
        problem = NO_MODEL
    return PanelConfig(offered, default, problem)
