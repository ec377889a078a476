"""A model that plays back scripted replies: a test double for the loop and the magic."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from jupyter_ci import providers
from jupyter_ci.agent.errors import ModelConfigError, ModelUnavailable
from jupyter_ci.agent.types import ModelReply, ModelRequest, ToolCall
from jupyter_ci.models.base import Endpoint, OnText
from jupyter_ci.providers import ProviderSpec

Script = ModelReply | Callable[[ModelRequest], ModelReply]


def code_call(code: str, call_id: str = "") -> ModelReply:
    """Script a reply that runs `code`."""
    import json

    call = ToolCall(call_id or f"call_{abs(hash(code)) % 10**8}", "run_python",
                    json.dumps({"code": code}))
    return ModelReply(tool_calls=(call,))


@dataclass
class ScriptedModel:
    """Replies from a list, in order, recording every request it was sent."""

    replies: list[Script]
    id: str = "scripted:test"
    requests: list[ModelRequest] = field(default_factory=list)

    @classmethod
    def of(cls, replies: Iterable[Script]) -> ScriptedModel:
        """Build from any iterable of replies."""
        return cls(list(replies))

    @property
    def sees_images(self) -> bool:
        """Tell whether the model its id names takes images (`scripted:` ones all do)."""
        return providers.model_sees_images(self.id)

    def complete(self, request: ModelRequest, on_text: OnText) -> ModelReply:
        """Return the next scripted reply, streaming its text in two pieces."""
        self.requests.append(request)
        if not self.replies:
            raise ModelUnavailable("The scripted model has no replies left.")
        script = self.replies.pop(0)
        reply = script(request) if callable(script) else script
        half = len(reply.text) // 2
        for piece in (reply.text[:half], reply.text[half:]):
            if piece:
                on_text(piece)
        return reply


#: Scripted models by name, reached as `-m scripted:<name>` (tests, benchmarks, demos).
_REGISTERED: dict[str, ScriptedModel] = {}


def register(name: str, replies: Iterable[Script]) -> ScriptedModel:
    """Make `scripted:<name>` answer with these replies; return the model to inspect later."""
    model = ScriptedModel(list(replies), id=f"scripted:{name}")
    _REGISTERED[name] = model
    return model


def registered_model(spec: ProviderSpec, name: str, endpoint: Endpoint) -> ScriptedModel:
    """Return the scripted model registered as `name` (the adapter factory of `scripted:`)."""
    model = _REGISTERED.get(name)
    if model is None:
        raise ModelConfigError(
            f"No scripted model is registered as {name!r}.",
            "Register one first: jupyter_ci.models.scripted.register(name, replies).",
        )
    return model
