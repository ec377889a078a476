"""The REST API's request bodies that have a fixed shape (server/openapi.json names them).

The server reads each with the codec, strictly; what a value may hold beyond its type (a
directory's name, the variables a session may set) the server checks after.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from jupyter_ci.wire.codec import OMIT_IF


@dataclass(frozen=True)
class NewSession:
    """POST /jupyter-ci/api/sessions: every field optional."""

    #: A kernelspec name; omitted: the server's default.
    kernel_name: str | None = None
    #: Extra environment variables of the session's kernel.
    env: dict[str, str] | None = None
    #: A plain name for the session's directory.
    cwd_name: str | None = None
    #: The language of the session's kernel ("python", "bash", "typescript", "r").
    language: str | None = None


#: An execute's `timeout` when the body gives none: the server's c.JupyterCI.timeout.
SERVER_TIMEOUT = -1.0


@dataclass(frozen=True)
class Execute:
    """POST .../execute: one cell's `code`, or several `cells` run in order (one of them)."""

    #: One cell's code: the reply is an Execution.
    code: str | None = field(default=None, metadata={OMIT_IF: None})
    #: Several cells, run in order in one request, up to the first that does not end `ok`:
    #: the reply is an ExecutionOfCells.
    cells: tuple[str, ...] | None = field(default=None, metadata={OMIT_IF: None})
    #: Seconds after which the run is interrupted; absent: the server's c.JupyterCI.timeout;
    #: 0 or null: no deadline at all.
    timeout: float | None = field(default=SERVER_TIMEOUT, metadata={OMIT_IF: SERVER_TIMEOUT})
    #: Environment variables for this run only.
    env: dict[str, str] | None = field(default=None, metadata={OMIT_IF: None})


@dataclass(frozen=True)
class ApprovalAnswer:
    """POST .../approvals: the answer to a waiting question."""

    #: The waiting_for_user event's.
    approval_id: str
    #: run: as shown; edit: run `code` (or carry out `plan`) instead; skip: not this step;
    #: stop: end the ask.
    decision: Literal["run", "edit", "skip", "stop"]
    #: The edited code, with decision edit on a step.
    code: str | None = field(default=None, metadata={OMIT_IF: None})
    #: The edited plan, with decision edit on a plan.
    plan: str | None = field(default=None, metadata={OMIT_IF: None})
