"""Approval of an MCP `ask`'s steps: each question goes to the MCP client as an elicitation.

The client shows the proposed code (or plan) with run / edit / skip / stop; what it answers
goes back to the REST ask as the approval's answer. A client that cannot elicit cannot
approve: the tool refuses an ask that would wait, and nothing runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver import Context
from mcp.types import ClientCapabilities, ElicitationCapability
from pydantic import BaseModel, Field

from jupyter_ci.mcp.shapes import Answer
from jupyter_ci.wire.codec import WireError, decode
from jupyter_ci.wire.events import WaitingForUser

NEEDS_ELICITATION = (
    "This ask needs the user's approval before its code runs ({mode}), and this "
    "MCP client does not support elicitation, so it cannot ask them: nothing ran. Use a "
    "client that supports MCP elicitation, or ask with approve='never' where the server "
    "allows it (its c.JupyterCI.approval_minimum may not).")
#: Times one question is put again when its answer is an edit with nothing in it.
ASKED_AT_MOST = 3
#: Characters of proposed code or plan shown in the elicitation's message.
SHOWN_CHARS = 20_000


class StepAnswer(BaseModel):
    """The form of a step's approval."""

    decision: str = Field(description="run: run the code as shown; edit: run `code` "
                          "instead; skip: do not run it (the model is told); stop: end "
                          "the ask.", json_schema_extra={"enum": ["run", "edit", "skip",
                                                                   "stop"]})
    code: str = Field("", description="The edited code to run (with decision 'edit').")


class PlanAnswer(BaseModel):
    """The form of a plan's approval."""

    decision: str = Field(description="run: carry out the plan as shown; edit: carry out "
                          "`plan` instead; stop: end the ask.",
                          json_schema_extra={"enum": ["run", "edit", "stop"]})
    plan: str = Field("", description="The edited plan (with decision 'edit').")


def can_elicit(ctx: Context[Any, Any]) -> bool:
    """Tell whether the MCP client said it supports elicitation."""
    wanted = ClientCapabilities(elicitation=ElicitationCapability())
    session = ctx.request_context.session
    # MCP 2026-07-28 (mcp.Client's first choice, kept on stdio) has a server send its client
    # no request, elicitation among them, whatever the client offers.
    return bool(session.can_send_request and session.check_client_capability(wanted))


def message(event: WaitingForUser) -> str:
    """Return what the elicitation shows: the question and the code or plan it is about."""
    question = event.question or "Approve this step?"
    if event.kind == "plan":
        return f"{question}\n\nProposed plan:\n{_cut(event.plan or '')}"
    title = f"Step {event.step}" if event.step is not None else "The next step"
    return f"{question}\n\n{title} would run this code:\n```python\n" \
        f"{_cut(event.code or '')}\n```"


def _cut(text: str) -> str:
    if len(text) <= SHOWN_CHARS:
        return text
    return text[:SHOWN_CHARS] + f"\n… [{len(text) - SHOWN_CHARS} more characters]"


async def elicit(ctx: Context[Any, Any], event: WaitingForUser) -> Answer:
    """Ask the MCP client's user; return the approval's answer (declined or dismissed: stop)."""
    plan = event.kind == "plan"
    schema: type[StepAnswer] | type[PlanAnswer] = PlanAnswer if plan else StepAnswer
    text_field = "plan" if plan else "code"
    shown = message(event)
    for _ in range(ASKED_AT_MOST):
        result = await ctx.elicit(shown, schema)
        if result.action != "accept":
            return {"decision": "stop"}
        data = result.data.model_dump()
        decision = str(data.get("decision", "")).strip().lower()
        text = str(data.get(text_field) or "")
        if decision == "edit" and text.strip():
            return {"decision": "edit", "plan": text} if plan else \
                {"decision": "edit", "code": text}
        if decision == "edit":  # said edit, gave nothing: asked again, not run as shown
            shown = f"An edit needs the new {text_field} in `{text_field}`.\n\n{message(event)}"
            continue
        if decision == "run":
            return {"decision": "run"}
        if decision == "skip" and not plan:
            return {"decision": "skip"}
        break
    return {"decision": "stop"}  # anything else runs nothing


class Approver:
    """An MCP ask's `on_approval`: elicits each question, or (no elicitation) stops the ask."""

    def __init__(self, ctx: Context[Any, Any]) -> None:
        self.ctx, self.elicits = ctx, can_elicit(ctx)
        #: Questions that came though the client cannot elicit (the server's setting asked).
        self.refused: list[Mapping[str, object]] = []

    async def __call__(self, event: Mapping[str, object]) -> Answer:
        """Return the answer to one question (a waiting_for_user event with its approval_id)."""
        if not self.elicits:
            self.refused.append(event)
            return {"decision": "stop"}
        try:
            # Leniently, as the client reads a reply: a newer server may add fields.
            question = decode(WaitingForUser, {**event, "type": "waiting_for_user"},
                              lenient=True)
        except WireError:
            return {"decision": "stop"}  # a question we cannot show runs nothing
        return await elicit(self.ctx, question)
