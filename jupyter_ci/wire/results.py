"""An ask's end as REST reads it: the result its `ask_end` event carries (and `result`, its alias).

The comm's `ask_end` (events.AskEnd) carries the outcome for the labextension and the ask
record; a REST ask ends with this instead: the outcome's status as a client checks it, each
step's last attempt with its outputs, and the approvals the ask waited for.
"""

from __future__ import annotations

from dataclasses import field
from typing import ClassVar, Literal

from jupyter_ci.wire.codec import FLATTEN, OMIT_IF
from jupyter_ci.wire.events import (
    AskFailure,
    JSONObject,
    ResultStatus,
    UnresolvedStep,
    UsageTotals,
    WaitKind,
)
from jupyter_ci.wire.frozen import frozen

#: What became of a question (timeout: no answer came in c.JupyterCI.approval_timeout).
ApprovalDecision = Literal["run", "edit", "skip", "stop", "timeout"]


@frozen
class ResultUsage:
    """What the ask's model calls used and cost (cost_usd: null when the model is unpriced)."""

    #: Input plus output tokens (what the ask's token limit counts).
    tokens: int
    totals: UsageTotals = field(metadata={FLATTEN: True})


@frozen
class ApprovalNote:
    """A question the ask waited for, and what became of it."""

    approval_id: str
    kind: WaitKind
    step: int | None
    decision: ApprovalDecision
    #: With decision "edit" on a step: the code that ran instead.
    code: str | None = field(default=None, metadata={OMIT_IF: None})
    #: With decision "edit" on a plan: the plan carried out instead.
    plan: str | None = field(default=None, metadata={OMIT_IF: None})


@frozen
class AskResult:
    """The REST ask ended: its result (the same payload follows as `result`, deprecated)."""

    type: ClassVar[Literal["ask_end"]] = "ask_end"
    #: done: answered, every step's last attempt succeeded; unresolved: answered while the
    #: last attempt of a step still failed (see `unresolved`); failed: no answer (see
    #: `error`); stopped: the user answered `stop` to an approval, or no answer came within
    #: c.JupyterCI.approval_timeout (see `error`, type AskStopped or ApprovalTimedOut).
    status: ResultStatus
    #: The answer, Markdown.
    answer: str
    #: Each step's last attempt: its step_end event's fields (no `type`) and its `outputs`.
    steps: tuple[JSONObject, ...]
    #: What the ask's model calls used and cost: input_tokens counts every prompt token,
    #: cached_tokens of them read from the provider's prompt cache; cost_usd (USD) prices
    #: them with the server's price table (c.JupyterCI.prices and the built-in prices), null
    #: when the model has none (a local server, a replay).
    usage: ResultUsage
    #: Each approval the ask waited for, in order, and what became of it.
    approvals: tuple[ApprovalNote, ...]
    error: AskFailure | None = field(default=None, metadata={OMIT_IF: None})
    unresolved: UnresolvedStep | None = field(default=None, metadata={OMIT_IF: None})
