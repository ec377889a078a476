"""Failures that end an ask; each says what happened and what to do."""

from __future__ import annotations


class AskError(Exception):
    """Base class: an ask ended without an answer."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n{self.hint}" if self.hint else self.message

    def _render_traceback_(self) -> list[str]:
        # IPython calls this duck-typed hook: the user sees the message, not our stack.
        return [f"{type(self).__name__}: {self.message}", *([self.hint] if self.hint else [])]


class LimitReached(AskError):
    """A hard limit (steps, consecutive fixes, tokens) was reached."""


class ModelUnavailable(AskError):
    """The model could not be reached or kept failing after retries."""


class BadModelReply(ModelUnavailable):
    """The model's server answered with something that is not its provider's wire format.

    An HTML page or plain text with status 200, an event that is not JSON or not the
    provider's shape, a stream cut off before its end: the message says what came back
    (content type, first bytes) and which base URL answered. Not retried.
    """


class ModelConfigError(AskError):
    """The model is unknown, or no key or server is configured for it."""


class KernelDied(AskError):
    """The kernel died while running generated code."""


class AskInterrupted(AskError):
    """The user interrupted the ask."""


class AskStopped(AskInterrupted):
    """The user stopped the ask when asked to approve a step or a plan."""


class NoOneToApprove(AskError):
    """An ask must wait for approval where no one can answer; it does not start."""


class RecordWouldFail(AskError):
    """A recorded answer's cells would fail now: they read what a restart lost."""
