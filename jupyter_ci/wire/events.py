"""An ask's events as they cross the wire: the one JSON form every door sends.

The comm sends each in its envelope, the REST stream names its server-sent event by the
`type`, and scripts/gen_wire.py writes protocol.ts's interfaces, openapi.json's schemas and
docs/protocol.md's field tables from these classes. A field's comment is its documentation
there. The agent's events (agent/events.py) carry live objects; each gives its wire form.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, ClassVar, Literal

from jupyter_ci.wire.codec import FLATTEN, OMIT_IF, ROUND, SCHEMA
from jupyter_ci.wire.frozen import frozen
from jupyter_ci.wire.nbformat import NbOutput

#: An open JSON object: an nbformat v4 output, a file as the API lists it.
JSONObject = dict[str, Any]
AskStatus = Literal["done", "failed", "interrupted"]
#: How an ask ended as REST and MCP read it (Outcome.result_status decides it).
ResultStatus = Literal["done", "unresolved", "failed", "stopped"]
#: What a step runs: the model's code, an install of a missing package, or a retry after it.
StepKind = Literal["code", "install", "retry"]
StepStatus = Literal["ok", "error", "timeout", "died", "interrupted"]
#: What a waiting question is about.
WaitKind = Literal["install", "step", "plan", "edits"]
EditDecision = Literal["accepted", "rejected", "proposed"]


@frozen
class AskStart:
    """An ask began: who is asked what."""

    type: ClassVar[Literal["ask_start"]] = "ask_start"
    ask_id: str
    prompt: str
    model: str


@frozen
class Part:
    """One part of what a model call sent."""

    name: str
    #: Estimated: characters / 4.
    tokens: int
    #: The exact text sent, after redaction.
    text: str


@frozen
class RequestSent:
    """At every model call: what it sent, in parts."""

    type: ClassVar[Literal["request_sent"]] = "request_sent"
    parts: tuple[Part, ...]


@frozen
class Thinking:
    """The model is called and nothing came back yet."""

    type: ClassVar[Literal["thinking"]] = "thinking"


@frozen
class Text:
    """A piece of the model's text as it streams."""

    type: ClassVar[Literal["text"]] = "text"
    delta: str


@frozen
class Usage:
    """The tokens and cost of the model's turn just ended, and of the whole ask so far."""

    type: ClassVar[Literal["usage"]] = "usage"
    #: Of the turn just ended: the whole prompt, cached tokens included.
    input_tokens: int
    output_tokens: int
    #: The ask's tokens so far.
    ask_tokens: int
    #: Of the turn's input, read from the provider's cache (0 when it reports none).
    cached_tokens: int = 0
    #: The turn's price in US dollars; null for a model without a price.
    cost_usd: float | None = field(default=None, metadata={ROUND: 8})
    #: The ask's price so far; null for a model without a price.
    ask_cost_usd: float | None = field(default=None, metadata={ROUND: 8})
    #: The model's context window in tokens, when known.
    context_window: int | None = None


@frozen
class CodePreview:
    """The code of a step the model is still writing (a fix of the last step if it failed)."""

    type: ClassVar[Literal["code_preview"]] = "code_preview"
    #: The step it will be: the step that failed last (a fix), else the next one.
    step: int
    attempt: int
    code: str


@frozen
class StepStart:
    """A step's code is about to run; the outputs that follow are its."""

    type: ClassVar[Literal["step_start"]] = "step_start"
    step: int
    attempt: int
    kind: StepKind
    #: The package an install (or the retry after it) is about; '' otherwise.
    package: str
    code: str


@frozen
class Output:
    """One output of the running step, appended to its outputs."""

    type: ClassVar[Literal["output"]] = "output"
    step: int
    #: An nbformat v4 output.
    output: NbOutput


@frozen
class ClearOutput:
    """The running step cleared its outputs (with wait: on its next output)."""

    type: ClassVar[Literal["clear_output"]] = "clear_output"
    step: int
    wait: bool


@frozen
class SetOutputs:
    """The running step's outputs, replaced whole (a display updated in place)."""

    type: ClassVar[Literal["set_outputs"]] = "set_outputs"
    step: int
    outputs: tuple[NbOutput, ...]


@frozen
class StepError:
    """The error a step's code raised."""

    ename: str
    evalue: str


@frozen
class StepEnd:
    """A step's code finished, failed, timed out, was interrupted, or its kernel died."""

    type: ClassVar[Literal["step_end"]] = "step_end"
    step: int
    attempt: int
    kind: StepKind
    code: str
    status: StepStatus
    execution_count: int | None
    #: How long the attempt ran, in milliseconds.
    duration_ms: float
    error: StepError | None


@frozen
class FileEntry:
    """One file of a session's directory, as the API lists it."""

    #: Relative to the session's directory.
    path: str
    size: int = field(metadata={SCHEMA: {"minimum": 0}})
    mime: str


@frozen
class Files:
    """The running step wrote files the user can download (a REST session's directory)."""

    type: ClassVar[Literal["files"]] = "files"
    step: int
    files: tuple[FileEntry, ...]


@frozen
class StepSentBack:
    """The model is sent back to make step `step` self-contained."""

    type: ClassVar[Literal["step_sent_back"]] = "step_sent_back"
    step: int
    #: The kernel's notice.
    message: str


@frozen
class Notice:
    """Something the user should know that does not stop the ask (a retiring model)."""

    type: ClassVar[Literal["warning"]] = "warning"
    message: str


@frozen
class ProposedEdit:
    """A new source the model proposes for an existing cell of the user's notebook."""

    call_id: str
    #: The cell's id in the notebook.
    cell_id: str
    #: The source the kernel was sent for that cell.
    old: str
    new: str

    def diff(self) -> str:
        """Return a unified diff of the change, as the headless answer lists it."""
        import difflib  # here: `%load_ext jupyter_ci` should not pay for it

        lines = difflib.unified_diff(self.old.splitlines(), self.new.splitlines(),
                                     f"cell {self.cell_id}", f"cell {self.cell_id} (proposed)",
                                     lineterm="")
        return "\n".join(lines)


@frozen
class WaitingForUser:
    """A question waits for the user: an install, a step, a plan or edits to review."""

    type: ClassVar[Literal["waiting_for_user"]] = "waiting_for_user"
    #: The exact prompt of the stdin input_request that follows.
    question: str
    kind: WaitKind = "install"
    step: int | None = None
    attempt: int | None = None
    #: A step: the code proposed.
    code: str | None = None
    #: A plan: the model's numbered plan, Markdown.
    plan: str | None = None
    #: With kind "edits": the edits to review together.
    edits: tuple[ProposedEdit, ...] | None = None
    #: A step, plan or edits: the id to answer it by (over REST: POST .../approvals).
    approval_id: str | None = field(default=None, metadata={OMIT_IF: None})
    #: A step, plan or edits: the ask_start event's ask_id.
    ask_id: str | None = field(default=None, metadata={OMIT_IF: None})


@frozen
class AskFailure:
    """Why an ask ended without an answer."""

    message: str
    #: What to do about it ('' when nothing).
    hint: str
    #: The kind of failure (the error class name).
    type: str


@frozen
class UnresolvedStep:
    """A step whose last attempt still failed when the model answered."""

    step: int
    error: str
    #: Names the step reads that only a failed attempt or the live kernel defined.
    names: tuple[str, ...] = field(metadata={OMIT_IF: ()})
    #: The sentence every door shows ("done with an unresolved error in step 2: …").
    message: str


@frozen
class UsageTotals:
    """An ask's tokens over all its model calls, and their price (null: unpriced)."""

    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cost_usd: float | None = field(metadata={ROUND: 8})


@frozen
class EditOutcome:
    """An edit an ask proposed, and what became of it."""

    call_id: str
    cell_id: str
    old: str
    new: str
    #: "proposed" where no one reviewed it.
    decision: EditDecision


@frozen
class Outcome:
    """How an ask ended, as the REST result, the comm's end and the record read it."""

    status: AskStatus
    #: The answer, Markdown.
    answer: str
    error: AskFailure | None
    #: With status "done": the answer came while a step still failed.
    unresolved: UnresolvedStep | None
    #: Steps run.
    steps: int
    #: Tokens used.
    tokens: int
    usage: UsageTotals
    #: The edits of the user's cells it proposed, and what was decided.
    edits: tuple[EditOutcome, ...]


@frozen
class AskEnd:
    """The ask ended, answered or not: its outcome's fields."""

    type: ClassVar[Literal["ask_end"]] = "ask_end"
    outcome: Outcome = field(metadata={FLATTEN: True})


Event = (AskStart | RequestSent | Thinking | Text | Usage | CodePreview | StepStart | Output
         | ClearOutput | SetOutputs | StepEnd | Files | StepSentBack | Notice | WaitingForUser
         | AskEnd)
#: Every event class, in the order the docs list them.
EVENTS: tuple[type, ...] = (AskStart, Thinking, Text, RequestSent, CodePreview, StepStart,
                            Output, ClearOutput, SetOutputs, StepEnd, Files, StepSentBack,
                            WaitingForUser, Usage, Notice, AskEnd)
