"""What the ask loop tells its driver to do (actions), its limits, and how an ask can end."""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from jupyter_ci.agent.approval import ProposedEdit
from jupyter_ci.agent.errors import AskError
from jupyter_ci.agent.images import Vision
from jupyter_ci.agent.restart import RestartProblem
from jupyter_ci.agent.types import ModelRequest
from jupyter_ci.wire.frozen import frozen


@frozen
class Limits:
    """Hard limits of one ask, enforced in code."""

    max_steps: int = 10
    max_fixes: int = 3
    timeout: float = 60.0
    max_output_chars: int = 20_000
    max_tokens: int = 400_000
    max_reply_tokens: int = 4_096
    #: Whether (and how many, how large) the images runs display reach the model.
    vision: Vision = field(default_factory=Vision)


@frozen
class CallModel:
    """Call the model with this request and feed the reply to `on_reply`."""

    request: ModelRequest
    #: Set when the model is sent back because a kept step would fail after a restart.
    restart: RestartProblem | None = None


#: The model's code; `%pip install` of a package it lacked; its code again after the install.
StepKind = Literal["code", "install", "retry"]


@frozen
class RunCode:
    """Run this code and feed the result to `on_result`; a retry of a step has attempt > 1."""

    code: str
    step: int
    attempt: int
    call_id: str
    #: Seconds the run may take before it is interrupted.
    timeout: float = 60.0
    kind: StepKind = "code"
    #: The package an "install" step installs, or a "retry" step was run again after.
    package: str = ""


@frozen
class ConfirmInstall:
    """Ask the user `question`; feed whether they said yes to `on_install_answer`."""

    package: str
    question: str


@frozen
class ApproveStep:
    """Ask the user whether to run this step; feed the answer to `on_approval`."""

    run: RunCode
    question: str


@frozen
class ApprovePlan:
    """Ask the user to approve (or edit) the model's plan; feed it to `on_plan_answer`."""

    plan: str
    question: str


@frozen
class ReviewEdits:
    """Show these proposed edits of the user's cells; feed the decisions to `on_review`."""

    edits: tuple[ProposedEdit, ...]
    question: str


#: What the user is asked, beside an install: put to them by a door's `decide`.
Question = ApproveStep | ApprovePlan | ReviewEdits


@frozen
class Finish:
    """The ask is done; show the answer."""

    answer: str


@frozen
class Fail:
    """The ask ended without an answer."""

    error: AskError


Action = (CallModel | RunCode | ConfirmInstall | ApproveStep | ApprovePlan | ReviewEdits
          | Finish | Fail)


@frozen
class Unresolved:
    """The model answered while the last attempt of a step still failed."""

    step: int
    error: str
    #: The names the step would miss after a restart, when that is what is unresolved.
    names: tuple[str, ...] = ()

    def describe(self) -> str:
        """Say so in the words the cell, the panel and the REST result use."""
        return f"done with an unresolved error in step {self.step}: {self.error}"
