"""Approval of a REST ask's steps: each question waits as a future until a call answers it.

The driver tells each question as one `waiting_for_user` event carrying its `approval_id`,
then asks through `Asker` (the ask's `decide`), which waits until `POST .../approvals`
answers it, from this connection or another one, by the same user. A question that no answer
reaches within c.JupyterCI.approval_timeout stops the ask. Deleting the session or hanging up
cancels the ask's task, and the wait with it: the `finally` in `Asker.__call__` forgets the
question, so nothing is left behind.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jupyter_ci.agent.approval import MODES, ApprovalMode, stricter
from jupyter_ci.agent.errors import AskStopped
from jupyter_ci.agent.events import event_json
from jupyter_ci.server.sessions.errors import SessionError
from jupyter_ci.server.sessions.fields import Refused
from jupyter_ci.wire.events import WaitingForUser
from jupyter_ci.wire.results import ApprovalNote

#: Sends one server-sent event: (event name, data).
EmitSSE = Callable[[str, dict[str, Any]], None]
DECISIONS = ("run", "edit", "skip", "stop")
#: The fields an answer's body may hold.
ANSWER_FIELDS = ("approval_id", "decision", "code", "plan")
#: Answered approvals a session remembers, so a second answer is a 409, not a 404.
ANSWERED_KEPT = 256


class UnknownApproval(SessionError):
    """No question of this session waits under this id (never asked, or its ask ended)."""

    status, reason = 404, "unknown_approval"


class ApprovalAnswered(SessionError):
    """The question was answered already (by this call's twin, or another connection)."""

    status, reason = 409, "approval_answered"


class NotYourApproval(SessionError):
    """Another user started the ask that waits: only they may answer it."""

    status, reason = 403, "not_your_approval"


class ApprovalTimedOut(AskStopped):
    """No answer came to a question within c.JupyterCI.approval_timeout: the ask stopped."""


def approval_mode(asked: str | None, default: str, minimum: str) -> ApprovalMode:
    """Return an ask's mode: the one asked (else the default), never below the minimum."""
    return stricter(asked or default, minimum)


def parse_mode(body: dict[str, Any]) -> str | None:
    """Return the body's `approve`, checked to be a mode, or None when it gives none."""
    value = body.get("approve")
    if value is not None and value not in MODES:
        raise Refused(400, "bad_field", f"'approve' must be one of {', '.join(MODES)} "
                      "(never: run every step; first: approve the first step; plan: approve "
                      "a plan first; each: approve every step).")
    return value


@dataclass
class Pending:
    """One question that waits for its answer."""

    id: str
    ask_id: str
    user: str
    event: dict[str, Any]
    future: asyncio.Future[str]


@dataclass
class Approvals:
    """A session's waiting questions, and the ids of those answered lately."""

    pending: dict[str, Pending] = field(default_factory=dict)
    answered: OrderedDict[str, str] = field(default_factory=OrderedDict)

    def listing(self) -> list[dict[str, Any]]:
        """Return the waiting_for_user events that wait now, oldest first."""
        return [p.event for p in self.pending.values()]

    def answer(self, user: str, body: dict[str, Any]) -> dict[str, Any]:
        """Answer a waiting question with a checked body; return what was decided."""
        approval_id = body.get("approval_id")
        if not isinstance(approval_id, str) or not approval_id:
            raise Refused(400, "bad_field", "'approval_id' (the waiting_for_user event's) is "
                          "required.")
        pending = self.pending.get(approval_id)
        if pending is None or pending.future.done():
            if approval_id in self.answered:
                raise ApprovalAnswered(f"The approval {approval_id!r} was closed already: "
                                       f"{self.answered[approval_id]}.")
            raise UnknownApproval(f"No question waits under {approval_id!r} in this session: "
                                  "it was never asked here, or its ask ended (stopped, timed "
                                  "out, or the session was deleted).")
        if pending.user != user:
            raise NotYourApproval("Only the user who started this ask can answer its "
                                  "approvals.")
        answer = checked_answer(pending.event, body)
        pending.future.set_result(json.dumps(answer))
        self.remember(approval_id, f"answered {answer['decision']!r}")
        return {"approval_id": approval_id, "ask_id": pending.ask_id, **answer}

    def remember(self, approval_id: str, why: str) -> None:
        """Keep a closed id (a bounded memory) so that a late answer is told why."""
        self.answered[approval_id] = why
        while len(self.answered) > ANSWERED_KEPT:
            self.answered.popitem(last=False)


def checked_answer(event: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """Return the answer a body gives to the question `event` asks, or raise a 400."""
    decision = body.get("decision")
    if decision not in DECISIONS:
        raise Refused(400, "bad_field", f"'decision' must be one of {', '.join(DECISIONS)}.")
    kind = event.get("kind")
    if kind == "plan" and decision == "skip":
        raise Refused(400, "bad_field", "A plan can be run, edited or stopped, not skipped.")
    text_field = "plan" if kind == "plan" else "code"
    for name in ("code", "plan"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise Refused(400, "bad_field", f"'{name}' must be a string.")
    if decision != "edit":
        return {"decision": decision}
    text = body.get(text_field)
    if not isinstance(text, str) or not text.strip():
        raise Refused(400, "bad_field", f"An edit gives the new {text_field} in "
                      f"'{text_field}' (a non-empty string).")
    return {"decision": "edit", text_field: text}


class Asker:
    """An ask's `decide`: each question told waits until it is answered."""

    def __init__(self, approvals: Approvals, ask_id: str, user: str, timeout: float) -> None:
        self.approvals, self.ask_id, self.user = approvals, ask_id, user
        self.timeout = timeout
        #: What each question was and what became of it (the ask's result lists them).
        self.noted: list[ApprovalNote] = []

    async def __call__(self, told: WaitingForUser) -> str:
        """Wait for the answer to the question told; return the answer's text."""
        approval_id = told.approval_id or ""
        event = event_json(told)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.approvals.pending[approval_id] = Pending(approval_id, self.ask_id, self.user,
                                                      event, future)
        try:
            answer = await asyncio.wait_for(future, self.timeout)
        except TimeoutError:
            self.noted.append(ApprovalNote(approval_id, told.kind, told.step, "timeout"))
            self.approvals.remember(approval_id, "no answer came in time, and the ask stopped")
            raise ApprovalTimedOut(
                f"No answer came to the approval of {_what(told)} within {self.timeout:g} s "
                "(c.JupyterCI.approval_timeout): the ask stopped, and nothing more ran.",
                "Answer waiting_for_user events by their approval_id with POST "
                ".../approvals.") from None
        finally:
            self.approvals.pending.pop(approval_id, None)
        said = json.loads(answer)
        self.noted.append(ApprovalNote(approval_id, told.kind, told.step, said["decision"],
                                       said.get("code"), said.get("plan")))
        return answer


def _what(told: WaitingForUser) -> str:
    """Name what a question is about, as the timeout's message says it."""
    if told.kind == "plan":
        return "the plan"
    return f"step {told.step}" if told.step is not None else "a step"
