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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from jupyter_ci.agent.approval import MODES, ApprovalMode, stricter
from jupyter_ci.agent.errors import AskStopped
from jupyter_ci.server.sessions.errors import SessionError
from jupyter_ci.server.sessions.fields import Check, Refused, read_body
from jupyter_ci.wire.codec import decode, encode
from jupyter_ci.wire.events import WaitingForUser
from jupyter_ci.wire.requests import ApprovalAnswer
from jupyter_ci.wire.rest import ApprovalReply
from jupyter_ci.wire.results import ApprovalNote

#: Sends one server-sent event: (event name, data).
EmitSSE = Callable[[str, Mapping[str, object]], None]
DECISIONS = ("run", "edit", "skip", "stop")
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


def check_mode(body: Mapping[str, object]) -> None:
    """Refuse a body whose `approve` is given and is not a mode."""
    value = body.get("approve")
    if value is not None and value not in MODES:
        raise Refused(400, "bad_field", f"'approve' must be one of {', '.join(MODES)} "
                      "(never: run every step; first: approve the first step; plan: approve "
                      "a plan first; each: approve every step).")


@dataclass
class Pending:
    """One question that waits for its answer."""

    id: str
    ask_id: str
    user: str
    #: Its waiting_for_user event, as GET .../approvals lists it.
    event: WaitingForUser
    future: asyncio.Future[str]


@dataclass
class Approvals:
    """A session's waiting questions, and the ids of those answered lately."""

    pending: dict[str, Pending] = field(default_factory=dict)
    answered: OrderedDict[str, str] = field(default_factory=OrderedDict)

    def listing(self) -> list[WaitingForUser]:
        """Return the waiting_for_user events that wait now, oldest first."""
        return [p.event for p in self.pending.values()]

    def answer(self, user: str, body: Mapping[str, object]) -> ApprovalReply:
        """Answer a waiting question with a body; return what was decided (ApprovalAnswered)."""
        given = read_body(ApprovalAnswer, body, _ANSWER_CHECKS)
        approval_id = given.approval_id
        if not approval_id:
            _no_id(body)
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
        answer = checked_answer(pending.event.kind, given)
        said = ApprovalReply(approval_id, pending.ask_id, answer.decision, answer.code,
                                answer.plan)
        # The loop reads the decision and the edited text; the ids are the route's.
        pending.future.set_result(json.dumps(
            {k: v for k, v in encode(said).items() if k not in ("approval_id", "ask_id")}))
        self.remember(approval_id, f"answered {answer.decision!r}")
        return said

    def remember(self, approval_id: str, why: str) -> None:
        """Keep a closed id (a bounded memory) so that a late answer is told why."""
        self.answered[approval_id] = why
        while len(self.answered) > ANSWERED_KEPT:
            self.answered.popitem(last=False)


def _no_id(body: object) -> None:
    raise Refused(400, "bad_field", "'approval_id' (the waiting_for_user event's) is required.")


def _bad_decision(body: object) -> None:
    raise Refused(400, "bad_field", f"'decision' must be one of {', '.join(DECISIONS)}.")


def _not_text(name: str) -> Check:
    def check(body: object) -> None:
        raise Refused(400, "bad_field", f"'{name}' must be a string.")
    return check


_ANSWER_CHECKS: dict[str, Check] = {"approval_id": _no_id, "decision": _bad_decision,
                                    "code": _not_text("code"), "plan": _not_text("plan")}


def checked_answer(kind: str, given: ApprovalAnswer) -> ApprovalAnswer:
    """Return the answer a body gives to a question of this `kind`, or raise a 400.

    Only the text an edit of this kind of question takes is kept (`plan` for a plan).
    """
    if kind == "plan" and given.decision == "skip":
        raise Refused(400, "bad_field", "A plan can be run, edited or stopped, not skipped.")
    if given.decision != "edit":
        return ApprovalAnswer(given.approval_id, given.decision)
    text_field = "plan" if kind == "plan" else "code"
    text = given.plan if kind == "plan" else given.code
    if text is None or not text.strip():
        raise Refused(400, "bad_field", f"An edit gives the new {text_field} in "
                      f"'{text_field}' (a non-empty string).")
    if kind == "plan":
        return ApprovalAnswer(given.approval_id, "edit", plan=text)
    return ApprovalAnswer(given.approval_id, "edit", code=text)


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
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.approvals.pending[approval_id] = Pending(approval_id, self.ask_id, self.user,
                                                      told, future)
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
        said = decode(ApprovalAnswer, {**json.loads(answer), "approval_id": approval_id})
        self.noted.append(ApprovalNote(approval_id, told.kind, told.step, said.decision,
                                       said.code, said.plan))
        return answer


def _what(told: WaitingForUser) -> str:
    """Name what a question is about, as the timeout's message says it."""
    if told.kind == "plan":
        return "the plan"
    return f"step {told.step}" if told.step is not None else "a step"
