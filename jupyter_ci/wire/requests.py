"""The REST API's request bodies that have a fixed shape (server/openapi.json names them).

The server reads each with the codec, strictly; what a value may hold beyond its type (a
directory's name, the variables a session may set) the server checks after. A field's
`SCHEMA` metadata says it for openapi.json too; BODIES adds each body's own keywords.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from jupyter_ci.wire.codec import OMIT_IF, SCHEMA
from jupyter_ci.wire.frozen import frozen

_ENV_NAME = {"$ref": "#/components/schemas/EnvName"}
_NO_NUL = {"type": "string", "pattern": "^[^\\u0000]*$"}


@frozen
class NewSession:
    """POST /jupyter-ci/api/sessions: every field optional."""

    #: A kernelspec name; omitted: the server's default. Where a box can run
    #: (c.JupyterCI.session_sandbox 'auto' or 'always'), the kernel's `<name>-sandboxed`
    #: kernelspec is started (`python3-sandboxed` for python3), or the kernelspec named if it
    #: names the sandbox provisioner itself; a kernel without one is refused: 400 with reason
    #: `sandbox_required`, naming the kernelspec to install and the setting that allows
    #: unboxed sessions.
    kernel_name: str | None = None
    #: Extra environment variables of the session's kernel.
    env: dict[str, str] | None = field(default=None, metadata={SCHEMA: {
        "additionalProperties": {**_NO_NUL, "description": "No NUL character: a value with "
                                 "one is a 400 (reason `bad_request`) naming its variable."},
        "propertyNames": _ENV_NAME}})
    #: A plain name for the session's directory.
    cwd_name: str | None = field(default=None, metadata={SCHEMA: {
        "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"}})
    #: The language of the session's kernel: the `language` of an installed kernelspec
    #: ("python", "bash", "typescript", "r"), case-insensitive; "javascript", "js" and "ts"
    #: name Deno's TypeScript kernel, "sh" bash. The server's default kernel is taken when it
    #: runs that language. Unknown, or not the language of `kernel_name`: 400 with reason
    #: `unknown_language` listing the installed languages. Only Python sessions take asks; a
    #: session's `env` and directory apply in every language. Boxing
    #: (c.JupyterCI.session_sandbox) takes the kernel's `<name>-sandboxed` kernelspec
    #: (scripts/install-languages.sh writes them); where a box can run, a language whose
    #: kernel has none is refused (400, `sandbox_required`), as a `kernel_name` is.
    language: str | None = None


#: An execute's `timeout` when the body gives none: the server's c.JupyterCI.timeout.
SERVER_TIMEOUT = -1.0


@frozen
class Execute:
    """POST .../execute: one cell's `code`, or several `cells` run in order (one of them)."""

    #: One cell's code: the reply is an Execution.
    code: str | None = field(default=None, metadata={OMIT_IF: None})
    #: Several cells, run in order in one request, back to back (no other request's run
    #: between them), up to the first that does not end `ok`: the reply is an
    #: ExecutionOfCells. `timeout` and `env` apply to each cell. All the cells together count
    #: against c.JupyterCI.max_code_bytes (413 `code_too_large`, as over 1000 cells).
    cells: tuple[str, ...] | None = field(default=None, metadata={
        OMIT_IF: None, SCHEMA: {"minItems": 1, "maxItems": 1000}})
    #: Seconds after which the run is interrupted (the session stays usable; status
    #: `timeout`). Absent: the server's c.JupyterCI.timeout (60 s). 0 or null: no deadline at
    #: all.
    timeout: float | None = field(default=SERVER_TIMEOUT, metadata={
        OMIT_IF: SERVER_TIMEOUT, SCHEMA: {"minimum": 0, "maximum": 86400}})
    #: Environment variables for this run only: set before the code (Python: os.environ;
    #: bash, JavaScript/TypeScript and R kernels: their own environment) and what they
    #: replaced put back after it, also when it fails or times out. Checked as a session's
    #: `env`; never recorded in the session's notebook. In a kernel of another language: 400
    #: `env_not_supported`.
    env: dict[str, str] | None = field(default=None, metadata={
        OMIT_IF: None, SCHEMA: {"additionalProperties": _NO_NUL, "propertyNames": _ENV_NAME}})
    #: The language the code is written in, checked against the session's kernel (as
    #: NewSession's `language`: case-insensitive, the same aliases). Absent: not checked. Not
    #: the session's language: 400 with reason `language_mismatch`, naming both; a session of
    #: another language is created with POST /jupyter-ci/sessions {"language": ...}.
    language: str | None = field(default=None, metadata={OMIT_IF: None})


@frozen
class ApprovalAnswer:
    """POST .../approvals: the answer to a waiting question."""

    #: The waiting_for_user event's.
    approval_id: str = field(metadata={SCHEMA: {"minLength": 1}})
    #: run: run the code (or carry out the plan) as shown; edit: run `code` (or carry out
    #: `plan`) instead, and the model is told it was edited; skip: do not run this step, the
    #: model is told (not for a plan); stop: end the ask, nothing more runs.
    decision: Literal["run", "edit", "skip", "stop"]
    #: The edited code, with decision edit on a step.
    code: str | None = field(default=None, metadata={OMIT_IF: None})
    #: The edited plan, with decision edit on a plan.
    plan: str | None = field(default=None, metadata={OMIT_IF: None})


#: Which steps of an ask wait for the user's approval (agent.approval.MODES).
Approve = Literal["never", "first", "plan", "each"]


@frozen
class Ask:
    """POST .../ask: the prompt, and what may override the server's settings for this ask."""

    prompt: str = field(metadata={SCHEMA: {"minLength": 1}})
    #: provider:model, e.g. openai:gpt-5.5. replay:<path> plays back a recording: the path
    #: starts in the session's own directory and must stay inside it (or inside
    #: c.JupyterCI.record_dir); anything else is a 400. Absent or null: the server's
    #: c.JupyterCI.model.
    model: str | None = None
    #: Seconds each step may run before it is interrupted. Absent or null: the server's
    #: c.JupyterCI.timeout (60 s).
    timeout: float | None = field(default=None, metadata={SCHEMA: {"exclusiveMinimum": 0}})
    #: Absent or null: the server's c.JupyterCI.max_steps.
    max_steps: int | None = field(default=None, metadata={SCHEMA: {"minimum": 1}})
    #: Absent or null: the server's c.JupyterCI.max_fixes.
    max_fixes: int | None = field(default=None, metadata={SCHEMA: {"minimum": 1}})
    #: Which steps wait for the user's approval before they run: never (none), first (the
    #: first step; then it runs on), plan (the model first proposes a numbered plan to
    #: approve or edit), each (every step). Omitted: c.JupyterCI.approval (default never).
    #: The server's c.JupyterCI.approval_minimum wins when it is stricter, whatever is asked
    #: here. A waiting step sends a `waiting_for_user` event (with its approval_id) and waits
    #: for POST .../approvals; with no answer within c.JupyterCI.approval_timeout (600 s) the
    #: ask ends `stopped`. Anything but these four names is a 400.
    approve: Approve | None = None


#: The bodies whose schemas scripts/gen_wire.py writes into openapi.json, by schema name,
#: with the keywords of the body as a whole (any other field is a 400).
BODIES: dict[str, tuple[type, dict[str, object]]] = {
    "NewSession": (NewSession, {"additionalProperties": False}),
    "Execute": (Execute, {"additionalProperties": False,
                          "oneOf": [{"required": ["code"]}, {"required": ["cells"]}],
                          "description": "Exactly one of `code` and `cells` (else 400 "
                          "`bad_field`)."}),
    "ApprovalAnswer": (ApprovalAnswer, {"additionalProperties": False}),
    "Ask": (Ask, {"additionalProperties": False})}
