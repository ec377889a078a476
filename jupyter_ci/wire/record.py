"""The ask record: what an answered `%%ask` cell keeps in its metadata (docs/protocol.md §4).

The kernel writes it (signed) at an ask's end, the browser stores it, and a re-run reads it
back from a notebook that anyone may have written or edited: `read_record` reads it leniently
and never raises (labextension/src/cells.ts reads it by the same rule).
"""

from __future__ import annotations

from dataclasses import field

from jupyter_ci.wire.codec import OMIT_IF, WireError, decode
from jupyter_ci.wire.events import EditOutcome, UnresolvedStep, UsageTotals
from jupyter_ci.wire.frozen import frozen

RECORD_VERSION = 1


@frozen(kw_only=True)
class AskRecord:
    """The record the browser keeps in the %%ask cell's metadata."""

    version: int
    ask_id: str
    prompt_hash: str
    model: str
    #: "done", "failed" or "interrupted" as the kernel writes it; read as any text (a
    #: notebook may hold anything, and only "done" is ever reused).
    status: str
    #: The answer; for an ask that ended without one, what ended it.
    answer: str
    steps: int
    tokens: int
    #: When the ask ended, ISO 8601 in UTC.
    created: str
    #: The step left failing when the model answered anyway: still "done" (its cells and
    #: answer stand and are reused), but not a clean one.
    unresolved: UnresolvedStep | None = field(default=None, metadata={OMIT_IF: None})
    #: Edits of the user's cells the model proposed, each with what the user decided.
    edits: tuple[EditOutcome, ...] | None = field(default=None, metadata={OMIT_IF: None})
    #: The ask's tokens and cost, so a notebook's total survives a reload.
    usage: UsageTotals | None = field(default=None, metadata={OMIT_IF: None})
    #: This user's kernel's signature over the record and its prompt.
    signature: str | None = field(default=None, metadata={OMIT_IF: None})

    def done_for(self, phash: str) -> bool:
        """Tell whether it is a finished answer of the ask with this prompt hash."""
        return self.status == "done" and self.prompt_hash == phash


def read_record(data: object) -> AskRecord | None:
    """Read a record from a cell's metadata; None when it is not one (never raises)."""
    try:
        return decode(AskRecord, data, lenient=True)
    except WireError:
        return None
