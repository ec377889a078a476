"""Approval modes, the questions they put to the user, and how an answer is read."""

from __future__ import annotations

import json
from typing import Literal

from jupyter_ci.wire.events import EditDecision as EditDecision
from jupyter_ci.wire.events import ProposedEdit as ProposedEdit
from jupyter_ci.wire.frozen import frozen

ApprovalMode = Literal["never", "first", "plan", "each"]
#: The modes from least to most asking: an admin's minimum wins when it is stricter.
MODES: tuple[ApprovalMode, ...] = ("never", "first", "plan", "each")
DecisionKind = Literal["run", "edit", "skip", "stop"]
#: Every question jupyter-ci puts on stdin starts so; the labextension answers those itself.
PREFIX = "jupyter-ci: "


def stricter(*modes: str) -> ApprovalMode:
    """Return the strictest of `modes` (unknown names are ignored; none known: never)."""
    known = [MODES.index(m) for m in (m.strip().lower() for m in modes) if m in MODES]
    return MODES[max(known, default=0)]


@frozen
class Decision:
    """The user's answer to a step or plan: run it, run it edited, skip it or stop the ask."""

    kind: DecisionKind
    #: The edited code (a step) or plan text (a plan) when `kind` is "edit".
    code: str = ""


@frozen
class NotebookCell:
    """A code cell of the user's notebook the model may propose to edit."""

    id: str
    source: str
    #: "ename: evalue" when the cell's outputs hold an error.
    error: str = ""


_WORDS: dict[str, DecisionKind] = {
    "": "run", "y": "run", "yes": "run", "r": "run", "run": "run", "a": "run",
    "approve": "run", "e": "edit", "edit": "edit", "s": "skip", "skip": "skip",
    "q": "stop", "n": "stop", "no": "stop", "stop": "stop", "quit": "stop",
}


def parse_answer(text: str) -> Decision:
    """Read an answer to a step or plan: the labextension's JSON, or a word typed on stdin."""
    data = _json(text)
    if data is not None:
        kind = data.get("decision")
        code = data.get("code", data.get("plan", ""))
        if kind in ("run", "edit", "skip", "stop") and isinstance(code, str):
            if kind == "edit" and not code.strip():
                return Decision("run")
            return Decision(kind, code)
        return Decision("stop")  # a malformed answer runs nothing
    return Decision(_WORDS.get(text.strip().lower(), "stop"))


def parse_review(text: str, edits: tuple[ProposedEdit, ...]) -> dict[str, EditDecision]:
    """Read the decisions on proposed edits; whatever is not accepted is rejected."""
    data = _json(text)
    accepted: set[str] = set()
    if data is not None:
        found = data.get("decisions")
        if isinstance(found, dict):
            accepted = {k for k, v in found.items() if v == "accepted"}
    elif text.strip().lower() in ("a", "accept", "y", "yes"):
        accepted = {edit.call_id for edit in edits}
    return {edit.call_id: "accepted" if edit.call_id in accepted else "rejected"
            for edit in edits}


def _json(text: str) -> dict[str, object] | None:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def step_question(step: int) -> str:
    """The stdin question for a step (its code is shown above it)."""
    return f"{PREFIX}run step {step}? [Y]es / [e]dit / [s]kip / [q] stop: "


def plan_question() -> str:
    """The stdin question for a plan."""
    return f"{PREFIX}carry out this plan? [Y]es / [e]dit / [q] stop: "


def edits_question(count: int) -> str:
    """The stdin question for proposed edits."""
    what = "this edit" if count == 1 else f"these {count} edits"
    return f"{PREFIX}apply {what}? [a]ccept / [r]eject: "
