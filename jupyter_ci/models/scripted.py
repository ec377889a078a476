"""A model that plays back scripted replies: a test double for the loop and the magic."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from jupyter_ci.agent.errors import ModelUnavailable
from jupyter_ci.agent.types import ModelReply, ModelRequest, ToolCall
from jupyter_ci.models.base import OnText

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
