"""What a kernel remembers of its earlier asks, compacted to fit a token budget."""

from __future__ import annotations

from collections.abc import Sequence

from jupyter_ci.agent.budget import estimate_tokens, trim_middle
from jupyter_ci.agent.control import parse_arguments
from jupyter_ci.agent.types import Message
from jupyter_ci.wire.frozen import frozen

# Older asks are summaries: enough to build on, too short to crowd out the new task.
MAX_CODE_CHARS = 1_500
MAX_OUTPUT_CHARS = 400


@frozen
class PastAsk:
    """One finished ask, reduced to what a follow-up needs."""

    prompt: str
    summary: str


def summarize(transcript: Sequence[Message], answer: str) -> str:
    """Compact an ask's transcript: the code that ran, a little of its output, the answer."""
    results = {m.tool_call_id: m.result for m in transcript if m.result is not None}
    parts: list[str] = []
    for message in transcript:
        for call in message.tool_calls:
            code, _ = parse_arguments(call)
            result = results.get(call.id)
            if not code or result is None or result.status in ("invalid", "not_run"):
                continue
            output, failed = result.text, result.failed
            label = "Code that failed" if failed else "Code run"
            parts.append(f"{label}:\n```python\n{trim_middle(code, MAX_CODE_CHARS)}\n```")
            if output and not failed:
                parts.append(f"Output: {trim_middle(output, MAX_OUTPUT_CHARS)}")
    parts.append(f"Answer: {answer}")
    return "\n".join(parts)


class Memory:
    """The earlier asks of one kernel, oldest first, within a token budget."""

    def __init__(self, budget_tokens: int) -> None:
        self.budget_tokens = budget_tokens
        self.asks: list[PastAsk] = []

    def remember(self, prompt: str, transcript: Sequence[Message], answer: str) -> None:
        """Add a finished ask."""
        self.asks.append(PastAsk(prompt, summarize(transcript, answer)))

    def remember_summary(self, prompt: str, summary: str) -> None:
        """Add an ask known only by its prompt and a summary (a reused answer)."""
        self.asks.append(PastAsk(prompt, summary))

    def clear(self) -> None:
        """Forget every earlier ask."""
        self.asks.clear()

    def messages(self) -> list[Message]:
        """Return the newest asks that fit the budget as user/assistant pairs."""
        kept: list[Message] = []
        used = 0
        for ask in reversed(self.asks):
            cost = estimate_tokens(ask.prompt) + estimate_tokens(ask.summary)
            if used + cost > self.budget_tokens and kept:
                break
            used += cost
            summary = ask.summary
            if cost > self.budget_tokens:
                # Even the newest ask alone is too big: keep its head and tail.
                summary = trim_middle(summary, self.budget_tokens * 4)
            kept[:0] = [Message("user", ask.prompt), Message("assistant", summary)]
        return kept
