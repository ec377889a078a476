"""One ask's lifecycle, owned once for both doors: start, notices, drive, remember, outcome.

The kernel's `%%ask` and a REST session's ask build only what differs between them: the loop
with its context, the model, the executor, the journal's encoders, who answers questions,
and the memory the ask joins. Everything an ask does around its loop happens here, in this
order, for both: it is told to begin (with any notice), driven to its outcome (the driver
returns it), remembered for the follow-ups, and its end is told.
"""

from __future__ import annotations

from dataclasses import dataclass

from jupyter_ci.agent.drive import (
    AsyncDecide,
    AsyncExecutor,
    AsyncModel,
    Confirm,
    Decide,
    Executor,
    Failure,
    Model,
    Price,
    drive,
    drive_async,
)
from jupyter_ci.agent.events import AskEnded, Journal, Outcome
from jupyter_ci.agent.loop import AskLoop
from jupyter_ci.agent.memory import Memory
from jupyter_ci.wire.events import AskStart, Notice


@dataclass
class AskLife:
    """One ask: who asks what of which model, its loop, its journal and its memory."""

    ask_id: str
    prompt: str
    model_id: str
    loop: AskLoop
    journal: Journal
    memory: Memory

    def start(self, *notices: str | None) -> None:
        """Tell the ask began, then what the user should know that does not stop it."""
        self.journal.emit(AskStart(self.ask_id, self.prompt, self.model_id))
        for notice in notices:
            if notice:  # a retiring model still answers: said, not refused
                self.journal.emit(Notice(notice))

    def drive(self, model: Model, executor: Executor, confirm: Confirm | None = None,
              decide: Decide | None = None, price: Price | None = None) -> Outcome:
        """Drive the loop in this thread to its outcome, and remember the ask."""
        return self.remember(drive(self.loop, model, executor, self.journal.emit, confirm,
                                   decide, price, self.ask_id))

    async def drive_async(self, model: AsyncModel, executor: AsyncExecutor,
                          decide: AsyncDecide | None = None, price: Price | None = None,
                          failure: Failure | None = None) -> Outcome:
        """Drive the loop from an event loop to its outcome, and remember the ask."""
        return self.remember(await drive_async(self.loop, model, executor, self.journal.emit,
                                               decide, price, self.ask_id, failure))

    def remember(self, outcome: Outcome) -> Outcome:
        """Keep the ask in the memory: a follow-up ("why did that fail?") reads what happened."""
        said = outcome.answer if outcome.error is None else (
            f"(The ask {outcome.status}: {outcome.error})")
        self.memory.remember(self.prompt, self.loop.transcript(), said)
        return outcome

    def end(self, outcome: Outcome) -> Outcome:
        """Tell the ask's end (its answer as the door shows it); return the outcome."""
        self.journal.emit(AskEnded(outcome))
        return outcome
