"""The dict twins of the REST wire classes: what the client's methods return, as TypedDicts.

The client returns the server's JSON as dicts (its public API since the first release); these
say their shape. Each is its dataclass's encoded form field for field (a nested dataclass its
twin, a tuple a list, a field the codec omits `NotRequired`, a tagged class's `type` first):
tests/test_wire_shapes.py holds them equal, so they cannot drift.
"""

# No `from __future__ import annotations`: Python 3.11 sees NotRequired only when evaluated.
from typing import Literal, NotRequired, TypedDict, overload

from jupyter_ci.wire.codec import encode
from jupyter_ci.wire.events import ProposedEdit, WaitingForUser, WaitKind
from jupyter_ci.wire.rest import ApprovalReply, Decision, FileEntry, SessionInfo, SessionStatus


class FileEntryJSON(TypedDict):
    """FileEntry's JSON: one file of a session's directory."""

    path: str
    size: int
    mime: str


class SessionInfoJSON(TypedDict):
    """SessionInfo's JSON: a session as GET and POST .../sessions describe it."""

    id: str
    kernel_id: str
    kernel_name: str
    status: SessionStatus
    created: str
    last_activity: str
    executions: int
    sandboxed: bool
    language: str
    cwd: str
    status_message: NotRequired[str | None]
    unboxed_reason: NotRequired[str | None]
    sandbox_unenforced: NotRequired[str]


class ApprovalReplyJSON(TypedDict):
    """ApprovalReply's JSON: what POST .../approvals decided."""

    approval_id: str
    ask_id: str
    decision: Decision
    code: NotRequired[str | None]
    plan: NotRequired[str | None]


class ProposedEditJSON(TypedDict):
    """ProposedEdit's JSON: a new source proposed for a cell of the user's notebook."""

    call_id: str
    cell_id: str
    old: str
    new: str


class WaitingForUserJSON(TypedDict):
    """WaitingForUser's JSON: a question that waits for the user."""

    type: Literal["waiting_for_user"]
    question: str
    kind: WaitKind
    step: int | None
    attempt: int | None
    code: str | None
    plan: str | None
    edits: list[ProposedEditJSON] | None
    approval_id: NotRequired[str | None]
    ask_id: NotRequired[str | None]


#: Each wire class and its twin (tests/test_wire_shapes.py compares them).
TWINS: dict[type, type] = {FileEntry: FileEntryJSON, SessionInfo: SessionInfoJSON,
                           ApprovalReply: ApprovalReplyJSON, ProposedEdit: ProposedEditJSON,
                           WaitingForUser: WaitingForUserJSON}
Shape = FileEntryJSON | SessionInfoJSON | ApprovalReplyJSON | WaitingForUserJSON


@overload
def shape_of(obj: FileEntry) -> FileEntryJSON: ...
@overload
def shape_of(obj: SessionInfo) -> SessionInfoJSON: ...
@overload
def shape_of(obj: ApprovalReply) -> ApprovalReplyJSON: ...
@overload
def shape_of(obj: WaitingForUser) -> WaitingForUserJSON: ...
def shape_of(obj: FileEntry | SessionInfo | ApprovalReply | WaitingForUser) -> Shape:
    """Return a wire object's JSON form as its twin (the codec writes exactly that shape)."""
    shaped: Shape = encode(obj)
    return shaped
