"""The labextension's encoding of an ask: each event's JSON form on the ask's comm.

One comm per ask (`jupyter_ci`, docs/protocol.md): opened with the ask's start, closed after
its end. The model's text is batched a few times a second; a page that joins late (reloaded,
a second tab) is sent where the ask stands, from the journal, after each step starts and ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
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
    wire_of,
)
from jupyter_ci.kernel.protocol import AskInfo
from jupyter_ci.kernel.record import pin_of, record_of, signed
from jupyter_ci.kernel.views import Narration
from jupyter_ci.wire import events as wire
from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.comm import AskClosed, AskOpened, AskReused, AskState, Envelope
from jupyter_ci.wire.events import AskStart, Text
from jupyter_ci.wire.names import COMM_TARGET
from jupyter_ci.wire.record import AskRecord

#: Send the model's streamed text at most this often.
TEXT_S = 0.1


def announce_reuse(cell_id: str | None, prompt: str, record: AskRecord) -> None:
    """Tell the panel that a re-run reused its answer (one comm, opened and closed)."""
    from comm import create_comm

    reused = AskReused(cell_id=cell_id, prompt=prompt, model=record.model,
                       answer=record.answer, steps=record.steps,
                       pin=pin_of(record.prompt_hash), ask_id=record.ask_id)
    create_comm(target_name=COMM_TARGET, data=encode(reused)).close()


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
            self._end(event.outcome)
            return
        if isinstance(event, StepStarted):
            self.narration.step()
        elif isinstance(event, StepSentBack):
            self.narration.sent_back()
        self._send(wire_of(event))
        if isinstance(event, StepStarted | StepEnded):
            self._broadcast_state()

    def _open(self, event: AskStart) -> None:
        """Open the comm with ask_start; the browser finds the %%ask cell by id."""
        from comm import create_comm

        self._comm = create_comm(target_name=COMM_TARGET,
                                 data=encode(self._opened(event)))

    def _opened(self, event: AskStart) -> AskOpened:
        info = self.info
        return AskOpened(start=event, cell_id=info.cell_id, replace_ask_id=info.replace_ask_id,
                         execution_count=info.execution_count)

    def _send_text(self) -> None:
        if self._text:
            self._send(Text(self._text))
            self._text = ""
        self._text_sent_at = time.monotonic()

    def _send(self, event: wire.Event | AskClosed) -> None:
        if self._comm is not None:
            sent = event if isinstance(event, AskClosed) else Envelope(event, self.info.ask_id)
            self._comm.send(encode(sent))

    def _broadcast_state(self, end: AskClosed | None = None) -> None:
        """Tell every page on this kernel where the ask stands, on a comm opened and closed
        at once: a page reloaded mid-ask, or a second tab, never saw the ask's comm open, so
        it rebuilds the ask's cells from this and listens on `comm_id` for the rest."""
        from comm import create_comm

        if self._comm is None:
            return
        info = self.info
        messages: list[AskOpened | AskClosed | Envelope] = [
            self._opened(event) if isinstance(event, AskStart) else Envelope(event, info.ask_id)
            for event in self.journal.caught_up()]
        if end is not None:
            messages[-1] = end  # the journal's ask_end, with the record and pin
        state = AskState(cell_id=info.cell_id, notebook=info.notebook,
                         comm_id=self._comm.comm_id, live=end is None, log=tuple(self.log()),
                         messages=tuple(messages), ask_id=info.ask_id)
        create_comm(target_name=COMM_TARGET, data=encode(state)).close()

    def _end(self, outcome: Outcome) -> None:
        """Send the end with the record for the %%ask cell's metadata; close the comm."""
        record = record_of(self.info, self.phash, outcome)
        # The panel shows what the model said between steps above its answer, as the cell.
        answer = self.narration.above(outcome.answer) if outcome.status == "done" else ""
        done = outcome.status == "done"
        end = AskClosed(end=wire.AskEnd(replace(outcome.to_wire(), answer=answer)),
                        record=signed(record, self.info.prompt),
                        pin=pin_of(record.prompt_hash) if done else None,
                        ask_id=self.info.ask_id)
        # Pages that follow the ask ignore this state (they know the ask); a page that
        # missed all of it gets the whole ask, its end included.
        self._broadcast_state(end)
        self._send(end)
        if self._comm is not None:
            self._comm.close()
            self._comm = None
