"""Jupyter's own shapes, declared once: nbformat v4 outputs and the IOPub contents they come from.

These are Jupyter's formats, not ours: plain JSON objects, so `TypedDict`s (no codec, no
class to build). The kernel only names them in annotations: importing this module costs
`%load_ext jupyter_ci` nothing.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

#: A MIME bundle: each MIME type's data (text, a list of lines, or JSON).
MimeBundle = dict[str, object]


class StreamOutput(TypedDict):
    """Text written to stdout or stderr."""

    output_type: Literal["stream"]
    name: str
    text: str


class DisplayData(TypedDict):
    """A rich display (`display()`, a plot)."""

    output_type: Literal["display_data"]
    data: MimeBundle
    metadata: dict[str, object]


class ExecuteResult(TypedDict):
    """The value of a cell's last expression."""

    output_type: Literal["execute_result"]
    data: MimeBundle
    metadata: dict[str, object]
    execution_count: int | None


class ErrorOutput(TypedDict):
    """An exception the code raised."""

    output_type: Literal["error"]
    ename: str
    evalue: str
    traceback: list[str]


NbOutput = StreamOutput | DisplayData | ExecuteResult | ErrorOutput


class Transient(TypedDict, total=False):
    """What a display message carries that is not kept in the notebook."""

    display_id: str


class StreamContent(TypedDict):
    """The content of an IOPub `stream` message."""

    name: str
    text: str


class DisplayContent(TypedDict):
    """The content of an IOPub `display_data` or `update_display_data` message."""

    data: MimeBundle
    metadata: dict[str, object]
    transient: NotRequired[Transient | None]


class ExecuteResultContent(TypedDict):
    """The content of an IOPub `execute_result` message."""

    data: MimeBundle
    metadata: dict[str, object]
    execution_count: int | None


class ErrorContent(TypedDict):
    """The content of an IOPub `error` message (and of an error execute_reply)."""

    ename: str
    evalue: str
    traceback: list[str]


class ClearOutputContent(TypedDict):
    """The content of an IOPub `clear_output` message."""

    wait: bool


#: The content of an IOPub message that changes a cell's outputs.
OutputContent = (StreamContent | DisplayContent | ExecuteResultContent | ErrorContent
                 | ClearOutputContent)


class CodeCell(TypedDict):
    """A code cell as a session's history keeps it (nbformat makes the v4 cell on export)."""

    cell_type: Literal["code"]
    source: str
    execution_count: int | None
    outputs: list[NbOutput]


class MarkdownCell(TypedDict):
    """A Markdown cell as a session's history keeps it."""

    cell_type: Literal["markdown"]
    source: str


#: A cell of a session's history.
HistoryCell = CodeCell | MarkdownCell


class Notebook(TypedDict):
    """An nbformat v4 notebook as nbformat.v4.new_notebook makes it (cells made by nbformat)."""

    nbformat: int
    nbformat_minor: int
    metadata: dict[str, object]
    cells: list[dict[str, object]]
