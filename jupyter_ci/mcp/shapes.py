"""The JSON the MCP door reads from Jupyter and jupyter-ci and gives back, key by key.

A tool's return type is its MCP output schema (FastMCP derives it), so what a tool returns
is declared here: the REST API's session and file entries as the server writes them
(server/openapi.json), the open notebooks as `list_notebooks` gives them, and the answer to
an approval. What the door only reads (Jupyter's session and contents models, nbformat) is
declared as far as it reads it.
"""

# No `from __future__ import annotations`: TypedDict tells NotRequired keys (and FastMCP
# the output schema's required ones) from evaluated annotations only.
from typing import Literal, NotRequired

from typing_extensions import TypedDict

#: What the user decided about a step or plan (POST .../approvals).
Decision = Literal["run", "edit", "skip", "stop"]


class SessionInfo(TypedDict):
    """A REST session as GET and POST /jupyter-ci/api/sessions describe it."""

    id: str
    kernel_id: str
    kernel_name: str
    #: idle, busy, dead; with a gateway also unavailable, gone (see status_message).
    status: str
    created: str
    last_activity: str
    executions: int
    sandboxed: bool
    language: str
    cwd: str
    # Absent when empty; null in a tool's structured result (FastMCP fills absent keys in).
    status_message: NotRequired[str | None]
    unboxed_reason: NotRequired[str | None]
    sandbox_unenforced: NotRequired[str | None]


class FileEntry(TypedDict):
    """A file of a session's directory: its path there, size in bytes and MIME type."""

    path: str
    size: int
    mime: str


class KernelState(TypedDict):
    """An open notebook's kernel, as Jupyter's /api/sessions tells it (null: not said)."""

    id: str | None
    name: str | None
    execution_state: str | None
    last_activity: str | None


class OpenNotebook(TypedDict):
    """A notebook (or console, file) Jupyter has a kernel session for."""

    path: str | None
    name: str | None
    type: str | None
    kernel: KernelState


class JupyterKernel(TypedDict, total=False):
    """What the door reads of a kernel in Jupyter's GET /api/sessions."""

    id: str
    name: str
    execution_state: str
    last_activity: str


class JupyterSession(TypedDict, total=False):
    """What the door reads of one entry of Jupyter's GET /api/sessions."""

    path: str
    name: str
    type: str
    kernel: JupyterKernel | None


class Output(TypedDict, total=False):
    """What the door reads of an nbformat v4 output."""

    output_type: str
    name: str
    text: str | list[str]
    ename: str
    evalue: str
    #: MIME type to value: text (a string or its lines), or JSON (a chart, a table).
    data: dict[str, object]


class Cell(TypedDict, total=False):
    """What the door reads of an nbformat v4 cell."""

    cell_type: str
    execution_count: int | None
    source: str | list[str]
    outputs: list[Output]


class Notebook(TypedDict, total=False):
    """An nbformat v4 notebook, as far as the door reads it (its other keys pass through)."""

    cells: list[Cell]


class Contents(TypedDict, total=False):
    """What the door reads of Jupyter's GET /api/contents/<path> model."""

    type: str
    content: Notebook | None


class RunInNotebook(TypedDict):
    """The body of POST /jupyter-ci/notebooks/run."""

    path: str
    code: str
    #: Seconds; absent: the server's default.
    timeout: NotRequired[float]


class Answer(TypedDict):
    """The answer to a question, as POST .../approvals takes it (with its approval_id)."""

    decision: Decision
    #: With decision "edit" on a step: the code to run instead.
    code: NotRequired[str]
    #: With decision "edit" on a plan: the plan to carry out instead.
    plan: NotRequired[str]
