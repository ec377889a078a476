"""Split a model request into the parts a user checks: what was sent, with token estimates.

The parts are the request's own text, in order, cut at their seams: the system prompt, the
tool, then each message; the message holding the kernel context is cut into its sections
and the prompt. Concatenating the parts of a message gives the message exactly, so the
counts add up to an estimate of the whole request (characters / 4, as budget.py counts).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from jupyter_ci.agent.budget import estimate_tokens
from jupyter_ci.agent.prompts import CONTEXT_CLOSE, CONTEXT_OPEN, INSTRUCTIONS_HEADING
from jupyter_ci.agent.types import Message, ModelRequest
from jupyter_ci.wire.frozen import frozen

# Sections of the kernel context start with a `## Title` line (budget.fit_sections).
_SECTION = re.compile(r"\n\n(?=## )")
_ROLES = {"user": "user", "assistant": "model", "tool": "code result"}


@frozen
class Part:
    """One piece of a request: a name for people, the exact text sent, its token estimate."""

    name: str
    text: str

    @property
    def tokens(self) -> int:
        """Estimate the part's tokens."""
        return estimate_tokens(self.text)


def request_parts(request: ModelRequest) -> list[Part]:
    """Return the parts of `request`, in the order they are sent."""
    parts = _system_parts(request.system)
    for tool in request.tools:
        spec = {"name": tool.name, "description": tool.description,
                "parameters": tool.parameters}
        parts.append(Part(f"Tool {tool.name}", json.dumps(spec, indent=1)))
    for number, message in enumerate(request.messages, 1):
        parts += message_parts(number, message)
    return parts


def _system_parts(system: str) -> list[Part]:
    """The system prompt, and the user's standing instructions as a part of their own."""
    cut = system.find(f"\n{INSTRUCTIONS_HEADING}\n")
    if cut < 0:
        return [Part("System prompt", system)] if system else []
    return [Part("System prompt", system[:cut]), Part("Standing instructions", system[cut:])]


def message_parts(number: int, message: Message) -> list[Part]:
    """Return one message as parts: the context message is cut at its sections."""
    name = f"Message {number} ({_ROLES.get(message.role, message.role)})"
    text = message.content
    for call in message.tool_calls:
        text += f"\n[tool call {call.name}: {call.arguments}]"
    if message.result is not None and message.result.images:
        text += f"\n[{len(message.result.images)} image(s)]"
    if message.role != "user" or not text.startswith(CONTEXT_OPEN):
        return [Part(name, text)]
    end = text.find(CONTEXT_CLOSE)
    if end < 0:
        return [Part(name, text)]
    end += len(CONTEXT_CLOSE)
    return [*_sections(text[:end]), Part(f"{name}: prompt", text[end:])]


def _sections(context: str) -> list[Part]:
    """Cut the wrapped kernel context before each `## ` heading; the seams stay in."""
    starts = [0, *(m.start() for m in _SECTION.finditer(context))]
    parts = []
    for start, end in zip(starts, [*starts[1:], len(context)], strict=True):
        text = context[start:end]
        heading = next((line[3:] for line in text.splitlines() if line.startswith("## ")),
                       "")
        parts.append(Part(f"Kernel context: {heading or 'start'}", text))
    return parts


def total_tokens(parts: Sequence[Part]) -> int:
    """Add up the parts' estimates."""
    return sum(part.tokens for part in parts)

