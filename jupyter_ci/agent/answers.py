"""The ask loop's side of the user's answers: plans, step approvals and edit reviews."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from jupyter_ci.agent.actions import Action, ApprovePlan, Fail, RunCode
from jupyter_ci.agent.approval import (
    ApprovalMode,
    Decision,
    EditDecision,
    NotebookCell,
    ProposedEdit,
    plan_question,
)
from jupyter_ci.agent.control import edit_call, plan_approved, reviewed, skipped
from jupyter_ci.agent.errors import AskError, AskStopped
from jupyter_ci.agent.types import Message, ModelReply, ToolCall, ToolResult


class UserAnswers:
    """What AskLoop does with the user's answers; the loop provides the rest."""

    messages: list[Message]

    def _init_answers(self, approval: ApprovalMode, cells: Sequence[NotebookCell]) -> None:
        """Set up what the answers need: the mode, the cells, nothing proposed yet."""
        self.approval = approval
        #: The notebook's code cells the model may propose edits of (none: no edit tool).
        self.notebook_cells = tuple(cells)
        self._planning = approval == "plan"
        self._approved_once = False
        #: Edits proposed in this ask and what became of each; those awaiting review.
        self.edits: list[tuple[ProposedEdit, EditDecision]] = []
        self._proposed: list[ProposedEdit] = []
        #: Call id -> the code the user edited it into, told to the model with its result.
        self._edited: dict[str, str] = {}
        #: A step waiting for approval, and whether it is a new step (not a fix).
        self._waiting: tuple[RunCode, bool] | None = None

    def _tool_result(self, call_id: str, result: ToolResult) -> None:
        raise NotImplementedError

    def _fail(self, error: AskError) -> Fail:
        raise NotImplementedError

    def _call_model(self) -> Action:
        raise NotImplementedError

    def _next_call(self) -> Action:
        raise NotImplementedError

    def _commit(self, run: RunCode, new: bool) -> RunCode:
        raise NotImplementedError

    def _invalid(self, call: ToolCall, problem: str) -> Fail | None:
        raise NotImplementedError

    def _plan(self, reply: ModelReply) -> Action:
        """Put the model's plan to the user; a tool call made instead of planning waits."""
        for call in reply.tool_calls:
            self._tool_result(call.id, ToolResult(
                "not_run", "[not run: nothing runs before the user approves the plan]"))
        plan = reply.text.strip() or "(The model proposed no plan.)"
        return ApprovePlan(plan, plan_question())

    def on_plan_answer(self, decision: Decision) -> Action:
        """Take the user's answer to an `ApprovePlan`: carry the plan out, or stop."""
        if decision.kind not in ("run", "edit"):
            return self._fail(AskStopped("You stopped the ask at its plan; nothing ran.",
                                         "Ask again, or edit the plan before approving it."))
        self._planning = False
        edited = decision.kind == "edit" and bool(decision.code.strip())
        plan = decision.code if edited else self._last_text()
        self.messages.append(Message("user", plan_approved(plan, edited)))
        return self._call_model()

    def _last_text(self) -> str:
        return next((m.content for m in reversed(self.messages) if m.role == "assistant"), "")

    def on_approval(self, decision: Decision) -> Action:
        """Take the user's answer to an `ApproveStep`: run, run edited, skip or stop."""
        assert self._waiting is not None, "on_approval without an ApproveStep"
        (run, new), self._waiting = self._waiting, None
        if decision.kind == "stop":
            self._tool_result(run.call_id, ToolResult("not_run", "[not run: the user "
                                                      "stopped the ask]"))
            return self._fail(AskStopped(f"You stopped the ask before step {run.step} ran.",
                                         "Cells run so far keep their results."))
        if decision.kind == "skip":
            self._tool_result(run.call_id, skipped(run.step))
            return self._next_call()
        self._approved_once = True
        if decision.kind == "edit" and decision.code.strip() and decision.code != run.code:
            self._edited[run.call_id] = decision.code
            run = replace(run, code=decision.code)
        return self._commit(run, new)

    def on_review(self, decisions: dict[str, EditDecision]) -> Action:
        """Take what became of the proposed edits (a door with no reviewer says "proposed")."""
        for edit in self._proposed:
            decision = decisions.get(edit.call_id, "rejected")
            self.edits.append((edit, decision))
            self._tool_result(edit.call_id, reviewed(edit, decision))
        self._proposed = []
        return self._next_call()

    def _edit(self, call: ToolCall) -> Action | None:
        """Hold a proposed edit for review, or tell the model what is wrong with it."""
        found = edit_call(call, self.notebook_cells)
        if isinstance(found, str):
            return self._invalid(call, found)
        self._proposed.append(found)
        return None
