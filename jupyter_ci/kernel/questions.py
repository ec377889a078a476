"""Questions put to the user on the kernel's stdin: installs, approvals, edit reviews."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from IPython.core.error import StdinNotImplementedError

from jupyter_ci.agent.approval import ApprovalMode, stricter
from jupyter_ci.agent.errors import NoOneToApprove
from jupyter_ci.agent.install import yes
from jupyter_ci.models.broker import ENV_APPROVAL
from jupyter_ci.wire.events import WaitingForUser

#: Asked for each line of edited code (or plan) typed on stdin.
EDIT_LINE = "jupyter-ci: the new text, line by line (an empty line ends it): "


def approval_mode(asked: str | None, setting: str) -> ApprovalMode:
    """The ask's approval: its own or the setting, never below the admin's minimum."""
    # The server puts the minimum in the environment of every kernel it starts.
    return stricter(asked or setting, os.environ.get(ENV_APPROVAL, ""))


def refuse_unanswerable(mode: ApprovalMode, can_ask: bool) -> None:
    """Refuse, before anything runs, an ask that must wait for someone who is not there."""
    if mode == "never" or can_ask:
        return
    locked = os.environ.get(ENV_APPROVAL, "") == mode
    raise NoOneToApprove(
        f"This ask waits for your approval (approval {mode!r}"
        f"{', set by the server admin' if locked else ''}), and no one can answer here: "
        "this run has no frontend that answers questions (stdin is off, as in nbclient and "
        "papermill). Nothing ran.",
        "Run it in JupyterLab, Notebook 7 or VS Code" + (
            "." if locked else ", or ask with --approve never (or set "
            "JupyterCI.approval = 'never')."))


class StdinQuestions:
    """Ask on stdin, as input() does: an input_request every frontend answers while busy."""

    def __init__(self, shell: Any) -> None:
        kernel = getattr(shell, "kernel", None)
        self.read: Callable[[str], Any] = kernel.raw_input if kernel is not None else input

    def confirm(self, question: str) -> bool:
        """Ask a yes/no question (an install); no answer is a no."""
        try:
            return yes(str(self.read(question)))
        except (EOFError, StdinNotImplementedError):
            return False

    def decide(self, asked: WaitingForUser) -> str:
        """Put an approval or a review to the user; return the answer (JSON or a word)."""
        # The labextension answers with JSON itself; a person types a word, and after
        # "e" the new code line by line.
        refusal = "r" if asked.kind == "edits" else "q"
        try:
            answer = str(self.read(asked.question))
            if asked.kind != "edits" and answer.strip().lower() in ("e", "edit"):
                lines = iter(lambda: str(self.read(EDIT_LINE)), "")
                key = "plan" if asked.kind == "plan" else "code"
                answer = json.dumps({"decision": "edit", key: "\n".join(lines)})
        except (EOFError, StdinNotImplementedError):
            return refusal
        return answer
