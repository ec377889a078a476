"""What the kernel and the labextension say around an ask's events (docs/protocol.md §1-2).

The browser announces itself in each execute_request (`Frontend`, read strictly: a request
that does not read as one is refused with the field that is wrong). On the ask's comm the
kernel sends each event in its `Envelope`, opens the comm with `AskOpened` and ends it with
`AskClosed`; on comms opened and closed at once it sends `AskState` (a page that missed the
start) and `AskReused` (a re-run that reused its answer).
"""

from __future__ import annotations

from dataclasses import field
from typing import ClassVar, Literal

from jupyter_ci.wire.codec import FLATTEN, OMIT_IF
from jupyter_ci.wire.events import AskEnd, AskStart, Event
from jupyter_ci.wire.frozen import frozen
from jupyter_ci.wire.names import PROTOCOL_VERSION
from jupyter_ci.wire.record import AskRecord


@frozen
class AskAbove:
    """An ask cell above the asking one, as the browser read it."""

    cell_id: str
    #: The ask its record names (null: not answered yet).
    ask_id: str | None = None
    #: Where its generated cells are in `above`.
    cells: tuple[int, ...] = ()


@frozen
class SentCell:
    """One of the notebook's code cells, which the model may propose to edit."""

    id: str
    source: str
    #: "ename: evalue" when its outputs hold an error.
    error: str = ""


@frozen
class Frontend:
    """The labextension's announcement, `metadata.jupyter_ci_frontend` of a request."""

    protocol: int
    #: The ids of this cell's generated cells (the rule of docs/protocol.md §4).
    generated: tuple[str, ...] = ()
    #: The notebook's path.
    path: str | None = None
    #: Ask cells: the sources of the code cells above (null: too big to send).
    above: tuple[str, ...] | None = None
    #: Ask cells: the ask cells above, and where their generated cells are in `above`.
    asks_above: tuple[AskAbove, ...] = ()
    #: Ask cells: the notebook's code cells.
    cells: tuple[SentCell, ...] = ()


@frozen
class Envelope:
    """One event on the ask's comm: the ask it belongs to and the version beside its fields."""

    event: Event = field(metadata={FLATTEN: True})
    ask_id: str
    protocol: int = PROTOCOL_VERSION


@frozen(kw_only=True)
class AskOpened:
    """The comm's open data: the ask's start, and the cell the browser shows it in."""

    start: AskStart = field(metadata={FLATTEN: True})
    #: The `%%ask` cell (null: the request named none).
    cell_id: str | None
    #: The ask whose generated cells this one replaces (a re-ask).
    replace_ask_id: str | None
    #: The `%%ask` cell's own count (its execute_reply reports the last step's).
    execution_count: int | None
    protocol: int = PROTOCOL_VERSION


@frozen(kw_only=True)
class AskClosed:
    """The comm's last message: the ask's end, the record to keep and, when done, the pin."""

    end: AskEnd = field(metadata={FLATTEN: True})
    #: Signed by this user's kernel.
    record: AskRecord
    #: With status "done": what to write as `--pin` into the `%%ask` line.
    pin: str | None = field(default=None, metadata={OMIT_IF: None})
    ask_id: str
    protocol: int = PROTOCOL_VERSION


@frozen(kw_only=True)
class AskState:
    """Where an ask stands, for a page that missed its start (reloaded, or a second tab)."""

    type: ClassVar[Literal["ask_state"]] = "ask_state"
    cell_id: str | None
    #: The notebook's path as the asking page named it.
    notebook: str | None
    #: The ask's own comm, which carries the rest while `live`.
    comm_id: str
    live: bool
    #: The `%%ask` cell's progress log so far.
    log: tuple[str, ...]
    #: The start, each step's messages with its outputs as they stand, the end when over.
    messages: tuple[AskOpened | AskClosed | Envelope, ...]
    ask_id: str
    protocol: int = PROTOCOL_VERSION


@frozen(kw_only=True)
class AskReused:
    """A re-run reused its recorded answer."""

    type: ClassVar[Literal["ask_reused"]] = "ask_reused"
    cell_id: str | None
    prompt: str
    model: str
    answer: str
    steps: int
    #: What to write as `--pin` into the `%%ask` line.
    pin: str
    ask_id: str
    protocol: int = PROTOCOL_VERSION


@frozen
class ExternalCell:
    """An MCP client's code, for a page to show as a new cell first (docs/protocol.md §5)."""

    type: ClassVar[Literal["external_cell"]] = "external_cell"
    id: str
    #: Who sent it ("mcp").
    source: str
    #: The notebook it is for.
    path: str | None
    code: str
    protocol: int = PROTOCOL_VERSION


@frozen
class ExternalAck:
    """A page's answer: it shows the cell (the one message a page sends the kernel)."""

    type: ClassVar[Literal["external_ack"]] = "external_ack"
    id: str


@frozen
class ExternalAcked:
    """The kernel's echo of an acknowledgement, which the server waits for on IOPub."""

    type: ClassVar[Literal["external_acked"]] = "external_acked"
    id: str


@frozen
class ExternalRun:
    """Sent in the code's own request, just before it runs: its outputs are the cell's."""

    type: ClassVar[Literal["external_run"]] = "external_run"
    id: str
    #: The request's count (its execute_input came before).
    execution_count: int | None


@frozen
class ExternalCancelled:
    """The comm's close data when no page acknowledged the cell in time."""

    type: ClassVar[Literal["external_cancelled"]] = "external_cancelled"
    id: str
