"""The labextension's encoding of an ask: each event's JSON form on the ask's comm.

One comm per ask (`jupyter_ci`, docs/protocol.md): opened with the ask's start, closed after
its end. The model's text is batched a few times a second; a page that joins late (reloaded,
a second tab) is sent where the ask stands, from the journal, after each step starts and ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jupyter_ci.agent.events import (
    AskEnded,
    Event,
    Journal,
    Outcome,
    OutputsChanged,
    StepEnded,
    StepSentBack,
    StepStarted,
    event_json,
)
from jupyter_ci.kernel.protocol import (
    AskInfo,
    Reused,
    ask_start,
    ask_state,
    message,
)
from jupyter_ci.kernel.record import pin_of, record_of, signed
from jupyter_ci.kernel.views import Narration
from jupyter_ci.wire.events import AskStart, Text
from jupyter_ci.wire.names import COMM_TARGET
from jupyter_ci.wire.record import AskRecord

#: Send the model's streamed text at most this often.
TEXT_S = 0.1


def announce_reuse(cell_id: str | None, prompt: str, record: AskRecord) -> None:
    """Tell the panel that a re-run reused its answer (one comm, opened and closed)."""
    from comm import create_comm

    reused = Reused(record.ask_id, cell_id, prompt, record.model, record.answer,
                    record.steps, pin_of(record.prompt_hash))
    create_comm(target_name=COMM_TARGET, data=reused.to_json()).close()


@dataclass
class CommEncoder:
    """Sends an ask's events to the browser; its end carries the signed record and pin."""

    info: AskInfo
    #: The prompt's hash, for the record.
    phash: str
    journal: Journal
    #: The %%ask cell's progress log as it stands (a late page shows it too).
    log: Callable[[], list[str]]
    narration: Narration = field(default_factory=Narration)
    _comm: Any = None
    _text: str = ""
    _text_sent_at: float = 0.0

    def __call__(self, event: Event) -> None:
        """Send one event (text batched)."""
        if isinstance(event, AskStart):
            self._open(event)
            return
        if isinstance(event, Text):
            self._text += self.narration.text(event.delta)
            if time.monotonic() - self._text_sent_at >= TEXT_S:
                self._send_text()
            return
        if not isinstance(event, OutputsChanged):  # those come on the IOPub thread
            self._send_text()
        if isinstance(event, AskEnded):
            self._end(event.outcome, event_json(event))
            return
        if isinstance(event, StepStarted):
            self.narration.step()
        elif isinstance(event, StepSentBack):
            self.narration.sent_back()
        self._send(event_json(event))
        if isinstance(event, StepStarted | StepEnded):
            self._broadcast_state()

    def _open(self, event: AskStart) -> None:
        """Open the comm with ask_start; the browser finds the %%ask cell by id."""
        from comm import create_comm

        self._comm = create_comm(target_name=COMM_TARGET,
                                 data=ask_start(self.info, event_json(event)))

    def _send_text(self) -> None:
        if self._text:
            self._send(event_json(Text(self._text)))
            self._text = ""
        self._text_sent_at = time.monotonic()

    def _send(self, event: dict[str, Any]) -> None:
        if self._comm is not None:
            self._comm.send(message(self.info.ask_id, event))

    def _broadcast_state(self, end: dict[str, Any] | None = None) -> None:
        """Tell every page on this kernel where the ask stands, on a comm opened and closed
        at once: a page reloaded mid-ask, or a second tab, never saw the ask's comm open, so
        it rebuilds the ask's cells from this and listens on `comm_id` for the rest."""
        from comm import create_comm

        if self._comm is None:
            return
        events = self.journal.catch_up()
        if end is not None:
            events[-1] = end  # the journal's ask_end, with the record and pin
        create_comm(target_name=COMM_TARGET, data=ask_state(
            self.info, self._comm.comm_id, end is None, self.log(), events)).close()

    def _end(self, outcome: Outcome, event: dict[str, Any]) -> None:
        """Send the end with the record for the %%ask cell's metadata; close the comm."""
        record = record_of(self.info, self.phash, outcome)
        # The panel shows what the model said between steps above its answer, as the cell.
        answer = self.narration.above(outcome.answer) if outcome.status == "done" else ""
        end = {**event, "answer": answer,
               "record": signed(record, self.info.prompt)}
        if outcome.status == "done":
            end["pin"] = pin_of(record.prompt_hash)
        # Pages that follow the ask ignore this state (they know the ask); a page that
        # missed all of it gets the whole ask, its end included.
        self._broadcast_state(end)
        self._send(end)
        if self._comm is not None:
            self._comm.close()
            self._comm = None
