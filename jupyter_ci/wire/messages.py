"""Jupyter messages as jupyter_client's kernel clients return them: the parts jupyter-ci reads.

TypedDicts of the messaging spec (v5), no code: an IOPub message is a union narrowed on its
`msg_type`; the content of a message that changes a cell's outputs is wire.nbformat's.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from jupyter_ci.wire.nbformat import (
    ClearOutputContent,
    DisplayContent,
    ErrorContent,
    ExecuteResultContent,
    StreamContent,
)


class Header(TypedDict, total=False):
    """A message's header, or the header of the request it answers (empty when none)."""

    msg_id: str
    msg_type: str
    session: str
    username: str
    version: str


class StatusContent(TypedDict):
    """The content of an IOPub `status` message."""

    execution_state: str


class ExecuteInputContent(TypedDict):
    """The content of an IOPub `execute_input` message."""

    code: str
    execution_count: int | None


class CommContent(TypedDict, total=False):
    """The content of a `comm_open`, `comm_msg` or `comm_close` message."""

    comm_id: str
    target_name: str
    data: dict[str, object]


class _Message(TypedDict):
    header: Header
    parent_header: Header
    metadata: dict[str, object]


class StatusMessage(_Message):
    """The kernel's state changed (busy, idle, starting)."""

    msg_type: Literal["status"]
    content: StatusContent


class ExecuteInputMessage(_Message):
    """The code a request runs, with its execution count."""

    msg_type: Literal["execute_input"]
    content: ExecuteInputContent


class StreamMessage(_Message):
    """Text on stdout or stderr."""

    msg_type: Literal["stream"]
    content: StreamContent


class DisplayMessage(_Message):
    """A display, or an update of one shown before (by its display_id)."""

    msg_type: Literal["display_data", "update_display_data"]
    content: DisplayContent


class ExecuteResultMessage(_Message):
    """The value of a cell's last expression."""

    msg_type: Literal["execute_result"]
    content: ExecuteResultContent


class ErrorMessage(_Message):
    """An exception the code raised."""

    msg_type: Literal["error"]
    content: ErrorContent


class ClearOutputMessage(_Message):
    """Clear the cell's outputs (now, or at the next output with `wait`)."""

    msg_type: Literal["clear_output"]
    content: ClearOutputContent


class CommMessage(_Message):
    """A comm's message (the labextension's acknowledgements come so)."""

    msg_type: Literal["comm_open", "comm_msg", "comm_close"]
    content: CommContent


#: An IOPub message that changes a cell's outputs (agent.outputs.OUTPUT_MSG_TYPES).
OutputMessage = (StreamMessage | DisplayMessage | ExecuteResultMessage | ErrorMessage
                 | ClearOutputMessage)
#: A message on the IOPub channel: narrow it on `msg_type`.
IOPubMessage = (StatusMessage | ExecuteInputMessage | StreamMessage | DisplayMessage
                | ExecuteResultMessage | ErrorMessage | ClearOutputMessage | CommMessage)


class LanguageInfo(TypedDict, total=False):
    """The kernel's language, as its kernel_info_reply says it."""

    name: str
    version: str
    mimetype: str
    file_extension: str


class ReplyContent(TypedDict, total=False):
    """The content of an `execute_reply` (the error fields when its status is error) or a
    `kernel_info_reply` (its language_info)."""

    status: str
    execution_count: int | None
    ename: str
    evalue: str
    traceback: list[str]
    user_expressions: dict[str, object]
    language_info: LanguageInfo


class ShellReply(_Message):
    """A reply on the shell channel (execute_reply and kernel_info_reply are read here)."""

    msg_type: str
    content: ReplyContent


class ExecuteRequestContent(TypedDict):
    """The content of an `execute_request`, as jupyter_client's `execute` sends it."""

    code: str
    silent: bool
    store_history: bool
    user_expressions: dict[str, str]
    allow_stdin: bool
    stop_on_error: bool
