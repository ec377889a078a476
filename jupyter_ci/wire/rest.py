"""The REST API's results: what an execute, a session, a file listing and an answer reply.

The server builds these and encodes each once; the client reads them back leniently (a newer
server may add fields). scripts/gen_wire.py writes their openapi.json schemas; a field's
`SCHEMA` metadata adds what JSON Schema says beyond its type (a minimum, a format).
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from jupyter_ci.wire.codec import FLATTEN, OMIT_IF, ROUND, SCHEMA
from jupyter_ci.wire.events import FileEntry as FileEntry
from jupyter_ci.wire.frozen import frozen
from jupyter_ci.wire.nbformat import NbOutput

#: How one run ended as the API says it (the executor's "died" is "dead" here).
RunStatus = Literal["ok", "error", "timeout", "dead"]
SessionStatus = Literal["idle", "busy", "dead", "unavailable", "gone"]
#: What the user decided about a question (ApprovalAnswer.decision).
Decision = Literal["run", "edit", "skip", "stop"]
_AT_LEAST_0 = {SCHEMA: {"minimum": 0}}
_DATE_TIME = {SCHEMA: {"format": "date-time"}}


@frozen
class Execution:
    """One cell's run: its status, nbformat outputs, count, duration and the files it wrote."""

    #: `timeout`: the run passed its timeout and was interrupted, the kernel and its variables
    #: kept; if the code did not stop within 10 s of the interrupt (it ignores SIGINT), the
    #: kernel was restarted (c.JupyterCI.restart_on_stuck_interrupt, on by default) and the
    #: last output is an `error` output `TimeoutError` whose evalue says "kernel restarted,
    #: variables lost": the session is usable at once, blank. `dead`: the kernel died (or,
    #: with that setting off, ignored the interrupt): nothing more runs until POST
    #: .../restart. A run an interrupt stopped (a client that hung up) is `error` with a last
    #: `error` output `KeyboardInterrupt`. `ok` only when the kernel's reply says the code
    #: ran: a request the kernel aborted (queued behind another client's failing request, or
    #: an interrupt) is `error` with a last `error` output `NotRun`; one an interrupt hit in
    #: the kernel's own handling (no reply) is `error` with `KernelError`, saying the code may
    #: not have run.
    status: RunStatus
    #: nbformat outputs, within c.JupyterCI.session_run_output_bytes (16 MiB): past it the
    #: middle is dropped and a stream output says how much; a streaming execute's output
    #: events carry every output whole.
    outputs: tuple[NbOutput, ...]
    execution_count: int | None
    #: Milliseconds the run took.
    duration_ms: float = field(metadata={ROUND: 1, **_AT_LEAST_0})
    #: Files in the session's directory the run created or changed, never following
    #: symlinks, hidden folders and caches skipped.
    files: tuple[FileEntry, ...] = ()
    #: The directory held more than a look reads (5,000 entries, 2,000 files or 64 folder
    #: levels): `files` may miss some. List them with code.
    files_cut: bool = False


@frozen
class ExecutionOfCells:
    """The runs of an execute's `cells`, in order, up to the first that did not end `ok`."""

    #: `ok` when every cell ran `ok`; else the status of the last cell run, the first that
    #: did not end `ok`.
    status: RunStatus
    #: One Execution per cell run, in order; each is recorded in the session's notebook as
    #: its own cell.
    results: tuple[Execution, ...] = field(metadata={SCHEMA: {"minItems": 1}})
    #: Cells not run because an earlier one did not end `ok`.
    skipped: int = field(metadata=_AT_LEAST_0)


@frozen
class CellStart:
    """A streamed execute of `cells` starts a cell."""

    index: int = field(metadata=_AT_LEAST_0)


@frozen
class CellResult:
    """A streamed execute of `cells` ran a cell: its index and its Execution."""

    index: int = field(metadata=_AT_LEAST_0)
    execution: Execution = field(metadata={FLATTEN: True})


@frozen
class SessionInfo:
    """A session as GET and POST .../sessions describe it."""

    id: str
    kernel_id: str
    kernel_name: str
    #: `dead`: the kernel died (restart the session). With kernels in a gateway
    #: (`--gateway-url`): `unavailable` while the gateway does not answer (runs get 503
    #: `gateway_unreachable`; the session reconnects to its kernel, variables kept, when the
    #: gateway is back), `gone` when the gateway came back without the session's kernel (runs
    #: get 410 `kernel_gone`; its files stay downloadable until it is deleted).
    #: `status_message` then says which gateway and why.
    status: SessionStatus
    created: str = field(metadata=_DATE_TIME)
    last_activity: str = field(metadata=_DATE_TIME)
    #: Cells in the session's notebook so far.
    executions: int = field(metadata=_AT_LEAST_0)
    #: Its kernel runs in a bubblewrap box (c.JupyterCI.session_sandbox). Where a box can
    #: run, every session is boxed or refused (400 `sandbox_required`), whatever kernel or
    #: language was asked for.
    sandboxed: bool
    #: The language of the session's kernel, from its kernelspec, lower-cased: "python",
    #: "bash", "typescript" (Deno), "r".
    language: str
    #: The session's working directory (its files), as a path on the server.
    cwd: str
    #: Present when `status` is `unavailable` or `gone`: what happened, naming the gateway's
    #: URL, and what to do.
    status_message: str | None = field(default=None, metadata={OMIT_IF: None})
    #: Present when `sandboxed` is false: why (c.JupyterCI.session_sandbox is 'never', or no
    #: box can run on this machine, and what is missing).
    unboxed_reason: str | None = field(default=None, metadata={OMIT_IF: None})
    #: Present when the session is boxed but this server cannot enforce some of the box's
    #: limits (a root server that cannot make a pids cgroup: the process limit; a machine
    #: other than x86_64 or aarch64: the seccomp filter), saying which and what would.
    sandbox_unenforced: str = field(default="", metadata={OMIT_IF: ""})


@frozen
class ApprovalReply:
    """What POST .../approvals decided for the question it answered."""

    approval_id: str
    #: The ask that waited for it.
    ask_id: str
    decision: Decision
    #: With decision "edit" on a step: the code that runs instead.
    code: str | None = field(default=None, metadata={OMIT_IF: None})
    #: With decision "edit" on a plan: the plan carried out instead.
    plan: str | None = field(default=None, metadata={OMIT_IF: None})


@frozen
class ErrorReply:
    """A refusal (a 4xx or 5xx reply's body, a stream's `error` event): what and why."""

    #: What happened and what to do.
    message: str
    #: A stable word a client can branch on (`unknown_session`, `bad_field`, ...).
    reason: str


#: The classes whose schemas scripts/gen_wire.py writes into openapi.json, by schema name.
SCHEMAS: dict[str, type] = {"Error": ErrorReply, "File": FileEntry, "Execution": Execution,
                            "ExecutionOfCells": ExecutionOfCells, "Session": SessionInfo,
                            "ApprovalAnswered": ApprovalReply}
